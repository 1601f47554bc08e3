package io.github.sockmap4j.testsupport;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.testbed.Await;
import io.github.sockmap4j.testbed.KernelCorner;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import org.junit.platform.launcher.LauncherSession;
import org.junit.platform.launcher.LauncherSessionListener;

/**
 * For a module's whole test run: a child cgroup this JVM moves into and a pin directory, opened
 * as the pins of {@link Sockmap#global()} (which the Netty transport and gRPC use), and all of it
 * removed when the run ends rather than by the JVM's exit hook. A module registers a subclass in
 * {@code META-INF/services/org.junit.platform.launcher.LauncherSessionListener}; the subclass
 * stops whatever could open the global again (event loops) in {@link #beforeClose()}. With
 * {@code sockmap4j.require=true} a missing fast path fails the run instead of falling back.
 *
 * <p>Only a run with the kernel tests ({@code -Pkernel}, which sets {@code sockmap4j.kernelTests})
 * sets anything up: the tests that need no privilege run without it.
 */
public abstract class GlobalSockmapSession implements LauncherSessionListener {
    private static KernelCorner kernel;
    private final String name;

    protected GlobalSockmapSession(String name) {
        this.name = name;
    }

    /** The run's pins and cgroup, for tests that look at them. */
    public static KernelCorner kernel() {
        return kernel;
    }

    private static boolean kernelTests() {
        return Boolean.getBoolean("sockmap4j.kernelTests");
    }

    @Override
    public void launcherSessionOpened(LauncherSession session) {
        if (!kernelTests()) {
            return;
        }
        try {
            kernel = KernelCorner.enter(name);
            kernel.atExit(() -> TestKernel.removePins(kernel.pinDir));
            current = this;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        System.setProperty("sockmap4j.pinDir", kernel.pinDir.toString());
        System.setProperty("sockmap4j.cgroup", kernel.cgroup.toString());
        Sockmap.global(); // with sockmap4j.require=true, a fast path that is off fails the run here
    }

    private static GlobalSockmapSession current;

    /** The session of this run, or null in a run without the kernel tests. */
    static GlobalSockmapSession current() {
        return current;
    }

    /**
     * After each test class, before {@link NoSocketLeftRegistered} checks it: closes what the
     * module's shared fixtures hold for the class alone (a suite's event loops).
     */
    protected void afterClass() {
    }

    /** Stops what the module's tests left running that holds sockets or could reopen the global. */
    protected void beforeClose() {
    }

    @Override
    public void launcherSessionClosed(LauncherSession session) {
        if (kernel == null) {
            return;
        }
        try {
            beforeClose();
            // Sockets closed by the loops' shutdown leave the map as the kernel finishes closing them.
            if (!Await.holdsWithin(Duration.ofSeconds(10), () -> Sockmap.global().stats().socketsInMap() == 0)) {
                // A channel a test left open: say which, so that the failure below can be traced.
                System.err.println("sockets still registered at the end of the run (a test left a channel open):");
                new ProcessBuilder(io.github.sockmap4j.testbed.Sh.tool("bpftool"), "map", "dump", "pinned", kernel.pinDir.resolve("socks").toString())
                        .inheritIO().start().waitFor();
                new ProcessBuilder("ss", "-tanp").inheritIO().start().waitFor();
            }
            kernel.closeAfter(() -> Sockmap.global().close()); // the pins go with the last Sockmap over them
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
