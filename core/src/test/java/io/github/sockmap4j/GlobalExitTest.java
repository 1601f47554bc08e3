package io.github.sockmap4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

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
 * A process that relies on {@link Sockmap#global()}'s exit hook leaves nothing pinned, even when
 * its threads keep calling {@code global()} while the JVM exits (before the fix, such a call
 * reopened the global after the hook had closed it, pinned everything again and then failed to
 * add a hook: the pins outlived the process).
 */
@Tag("kernel")
class GlobalExitTest {
    @Test
    @Timeout(value = 180, unit = TimeUnit.SECONDS)
    void exitWhileThreadsStillCallGlobalLeavesNoPins() throws Exception {
        for (int run = 0; run < 5; run++) {
            Path cgroup = TestKernel.newCgroup("exit");
            Path pins = Path.of("/sys/fs/bpf", TestKernel.uniqueName("exit"));
            try {
                List<String> cmd = new ArrayList<>(ChildJvm.javaCommand(PeerMains.GlobalThenExit.class));
                cmd.add(1, "-Dsockmap4j.pinDir=" + pins);
                cmd.add(1, "-Dsockmap4j.cgroup=" + cgroup);
                try (ChildJvm child = ChildJvm.startInCgroup(cgroup, cmd)) {
                    assertEquals("true", child.expect("active=", 60), child::output);
                    assertEquals(0, child.waitFor(60), child::output);
                }
                assertFalse(Files.exists(pins), "run " + run + ": " + pins + " outlived the process");
            } finally {
                if (Files.exists(pins)) {
                    TestKernel.removePins(pins);
                }
                Files.deleteIfExists(cgroup);
            }
        }
    }
}
