package io.github.sockmap4j;

import io.github.sockmap4j.testbed.ChildJvm;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link Sockmap#global()} with bad {@code sockmap4j.*} settings, in child JVMs (the instance is
 * process-wide): a service falls back with the reason instead of failing, unless the fast path is
 * required, and then fails the same way at every call without trying again. No privileges needed.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class GlobalSettingsTest {

    static String run(String... props) throws Exception {
        List<String> cmd = new ArrayList<>(ChildJvm.javaCommand(Main.class));
        for (String p : props) {
            cmd.add(1, p);
        }
        try (ChildJvm child = ChildJvm.start(cmd)) {
            String first = child.expect("global=", 60);
            String second = child.expect("again=", 60);
            assertEquals(0, child.waitFor(30), child.output());
            return first + " | " + second;
        }
    }

    @Test
    void aBadSettingFallsBackWithTheReason() throws Exception {
        for (String bad : List.of("0", "abc")) {
            String out = run("-Dsockmap4j.maxSockets=" + bad);
            assertTrue(out.startsWith("inactive ") && out.contains("sockmap4j.maxSockets")
                    && out.contains("=" + bad), () -> bad + ": " + out);
        }
    }

    @Test
    void requiredFailsAtEveryCallWithOneTypeAndOneCause() throws Exception {
        String out = run("-Dsockmap4j.require=true", "-Dsockmap4j.maxSockets=abc");
        assertTrue(out.startsWith("threw SockmapUnavailableException"), out);
        String[] calls = out.split(" \\| ");
        assertEquals(calls[0], calls[1], "the same failure again: " + out);
    }

    public static final class Main {
        public static void main(String[] args) {
            System.out.println("global=" + once());
            System.out.println("again=" + once());
        }

        static String once() {
            try {
                Sockmap s = Sockmap.global();
                return (s.isActive() ? "active " : "inactive ") + s.unavailabilityCause();
            } catch (RuntimeException e) {
                return "threw " + e.getClass().getSimpleName() + " " + e.getMessage();
            }
        }
    }
}
