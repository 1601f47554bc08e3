package io.github.sockmap4j.testsupport;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.testbed.Await;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * After each test class of a module run by {@link GlobalSockmapSession}: every socket the class
 * registered in the global SOCKHASH has left it, or the class fails with its name and the
 * process's TCP sockets (which one, in what state, with what queued). A channel a test leaves
 * open would otherwise show only at the end of the run, with nothing to say whose it was.
 * Registered for every class through JUnit's extension auto-detection (the parent POM turns it on).
 *
 * <p>Sockets a class before leaked are counted once: the class that left them failed already.
 */
public final class NoSocketLeftRegistered implements AfterAllCallback {
    /** How long the kernel may take to finish closes a class started (FIN handshakes, event loops). */
    private static final Duration GRACE = Duration.ofSeconds(10);
    private static int leftBefore;

    @Override
    public void afterAll(ExtensionContext context) throws Exception {
        if (GlobalSockmapSession.kernel() == null || context.getTestClass().isEmpty()) {
            return;
        }
        GlobalSockmapSession.current().afterClass();
        Sockmap sockmap = Sockmap.global();
        if (Await.holdsWithin(GRACE, () -> sockmap.stats().socketsInMap() <= leftBefore)) {
            return;
        }
        long left = sockmap.stats().socketsInMap();
        int before = leftBefore;
        leftBefore = (int) left;
        throw new AssertionError(context.getRequiredTestClass().getName() + " left " + (left - before)
                + " socket(s) registered in the SOCKHASH " + GRACE.toSeconds() + " s after its last test (a channel "
                + "it opened was not closed, or a close was not seen). This process's TCP sockets:\n" + ownSockets());
    }

    /** {@code ss -tanpem} lines of this process's sockets. */
    static String ownSockets() throws IOException, InterruptedException {
        Process ss = new ProcessBuilder("ss", "-tanpem").redirectErrorStream(true).start();
        String out = new String(ss.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        ss.waitFor();
        String pid = "pid=" + ProcessHandle.current().pid() + ",";
        StringBuilder b = new StringBuilder();
        String[] lines = out.split("\n");
        for (int i = 0; i < lines.length; i++) {
            // ss prints a socket's details (skmem, cookie) on the line after it.
            if (lines[i].contains(pid)) {
                b.append("  ").append(lines[i].trim()).append('\n');
                if (i + 1 < lines.length && lines[i + 1].startsWith("\t")) {
                    b.append("    ").append(lines[i + 1].trim()).append('\n');
                }
            }
        }
        return b.toString();
    }
}
