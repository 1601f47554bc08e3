package io.github.sockmap4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.testbed.ChildJvm;
import io.github.sockmap4j.testsupport.TestKernel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * "Active" for this process only when its own connections are covered: a service told to attach
 * to a cgroup it is not in says so (API, log) and, when the fast path is required, fails; one in a
 * cgroup below the attached one is covered, and its connections are registered.
 */
@Tag("kernel")
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class CoverageTest {

    /** Runs Main in {@code runIn} with the fast path attached to {@code attach}; its report. */
    static String run(Path runIn, Path attach, boolean required) throws Exception {
        Path pins = Path.of("/sys/fs/bpf", TestKernel.uniqueName("cover"));
        List<String> cmd = new ArrayList<>(ChildJvm.javaCommand(Main.class));
        cmd.add(1, "-Dsockmap4j.pinDir=" + pins);
        cmd.add(1, "-Dsockmap4j.cgroup=" + attach);
        cmd.add(1, "-Dsockmap4j.require=" + required);
        try (ChildJvm child = ChildJvm.startInCgroup(runIn, cmd)) {
            String report = child.expect("report=", 60);
            assertEquals(0, child.waitFor(60), child::output);
            return report + " | " + child.output();
        } finally {
            if (Files.exists(pins)) {
                TestKernel.removePins(pins);
            }
        }
    }

    @Test
    void aProcessOutsideTheAttachedCgroupIsNotCalledActive() throws Exception {
        Path attached = TestKernel.newCgroup("attached");
        Path elsewhere = TestKernel.newCgroup("elsewhere");
        try {
            String r = run(elsewhere, attached, false);
            assertTrue(r.startsWith("active=false problem=true registered=0"), r);
            assertTrue(r.contains("outside " + attached), "says why: " + r);
            assertTrue(r.contains("NOT for this process"), "a WARN in the log: " + r);
            String required = run(elsewhere, attached, true);
            assertTrue(required.startsWith("threw SockmapUnavailableException"), required);
            assertTrue(required.contains("does not cover this process"), required);
        } finally {
            Files.deleteIfExists(attached);
            Files.deleteIfExists(elsewhere);
        }
    }

    @Test
    void aProcessBelowTheAttachedCgroupIsCovered() throws Exception {
        Path attached = TestKernel.newCgroup("parent");
        Path below = Files.createDirectory(attached.resolve("child"));
        try {
            String r = run(below, attached, true);
            assertTrue(r.startsWith("active=true problem=false registered=2"), r);
        } finally {
            Files.deleteIfExists(below);
            Files.deleteIfExists(attached);
        }
    }

    /** Opens the global fast path, opts a port in, connects to it once; prints what it saw. */
    public static final class Main {
        public static void main(String[] args) throws Exception {
            Sockmap s;
            try {
                s = Sockmap.global();
            } catch (SockmapUnavailableException e) {
                System.out.println("report=threw " + e.getClass().getSimpleName() + " " + e.getMessage());
                return;
            }
            long before = s.stats().socketsRegistered();
            try (SockmapServerChannel server = s.openServerChannel()) {
                server.bind(new java.net.InetSocketAddress(java.net.InetAddress.getLoopbackAddress(), 0));
                try (SockmapChannel c = s.openChannel()) {
                    c.connect(server.getLocalAddress());
                    try (var accepted = server.accept()) {
                        System.out.println("accepted=" + accepted.isConnected());
                    }
                }
            }
            System.out.println("report=active=" + s.isActive() + " problem=" + (s.coverageProblem() != null) + " registered="
                    + (s.stats().socketsRegistered() - before) + " problem=" + s.coverageProblem());
        }
    }
}
