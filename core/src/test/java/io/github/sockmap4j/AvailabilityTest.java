package io.github.sockmap4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.linux.sys.Cgroups;
import io.github.sockmap4j.testbed.Bpftool;
import io.github.sockmap4j.testsupport.TestKernel;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** What the library says when the fast path cannot be had, and that it never touches the kernel then. */
@Tag("kernel")
class AvailabilityTest {
    static SockmapConfig base(String what) {
        return SockmapConfig.fromSystemProperties().withRequired(false)
                .withPinDirectory(Path.of("/sys/fs/bpf").resolve(TestKernel.uniqueName(what)));
    }

    @Test
    void forcedOffSaysSo() throws Exception {
        try (Sockmap s = Sockmap.open(base("off").withDisabled(true))) {
            assertFalse(s.isActive());
            assertTrue(s.unavailabilityCause().contains("sockmap4j.disable=true"), s.unavailabilityCause());
            assertEquals(SockmapStats.EMPTY, s.stats());
            assertFalse(Files.exists(s.config().pinDirectory()));
        }
    }

    @Test
    void requiredButOffThrowsWithTheReason() {
        SockmapUnavailableException e = assertThrows(SockmapUnavailableException.class,
                () -> Sockmap.open(base("req").withDisabled(true).withRequired(true)));
        assertTrue(e.getMessage().contains("sockmap4j.disable=true"), e.getMessage());
    }

    @Test
    void theRootCgroupIsRefusedByDefault() throws Exception {
        Path root = Cgroups.unifiedMount().orElseThrow().mountPoint();
        SockmapConfig c = base("root").withCgroup(root);
        try (Sockmap s = Sockmap.open(c)) {
            assertFalse(s.isActive());
            assertTrue(s.unavailabilityCause().contains("root cgroup"), s.unavailabilityCause());
            assertTrue(s.unavailabilityCause().contains("sockmap4j.cgroup"), "names what to do");
        }
        assertTrue(Bpftool.cgroupAttachments(root).isEmpty(), "nothing attached to the root cgroup");
        assertFalse(Files.exists(c.pinDirectory()));
    }

    @Test
    void aPathThatIsNoCgroupIsNamed() throws Exception {
        try (Sockmap s = Sockmap.open(base("nocg").withCgroup(Path.of("/tmp")))) {
            assertFalse(s.isActive());
            assertTrue(s.unavailabilityCause().contains("/tmp is not a cgroup v2 directory"), s.unavailabilityCause());
        }
    }

    @Test
    void inactiveOptInIsAHarmlessHandle() throws Exception {
        try (Sockmap s = Sockmap.open(base("inactive").withDisabled(true)); OptIn o = s.optIn(8080)) {
            assertFalse(o.active());
            assertEquals(8080, o.port());
        }
    }

    @Test
    void badPortsAndPrefixesAreRejectedWithTheValue() throws Exception {
        try (Sockmap s = Sockmap.open(base("bad").withDisabled(true))) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> s.optIn(70000));
            assertTrue(e.getMessage().contains("port=70000"), e.getMessage());
            e = assertThrows(IllegalArgumentException.class,
                    () -> s.optIn(80, InetAddress.getByName("10.0.0.0"), 33));
            assertTrue(e.getMessage().contains("prefixBits=33"), e.getMessage());
        }
    }

    @Test
    void configRejectsATinyMap() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> SockmapConfig.fromSystemProperties().withMaxSockets(1));
        assertTrue(e.getMessage().contains("maxSockets=1"), e.getMessage());
    }

    @Test
    void ensureActiveThrowsWhenOff() throws Exception {
        try (Sockmap s = Sockmap.open(base("ensure").withDisabled(true))) {
            SockmapUnavailableException e = assertThrows(SockmapUnavailableException.class, s::ensureActive);
            assertTrue(e.getMessage().contains("disable"), e.getMessage());
        }
    }
}
