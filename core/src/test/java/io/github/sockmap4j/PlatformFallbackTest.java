package io.github.sockmap4j;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.linux.ffi.Platform;
import io.github.sockmap4j.linux.sys.HostCheck;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/**
 * A platform without a table of native constants (here: Linux on riscv64, as the platform check
 * would see it) leaves the fast path off with a reason naming the platform, opts nothing in, and
 * its channels still carry bytes over plain TCP. Needs no privilege: nothing native is set up.
 */
class PlatformFallbackTest {
    static final Platform RISCV = Platform.detect("Linux", "riscv64");

    static SockmapConfig config() {
        return SockmapConfig.builder().pinDirectory(Path.of("/sys/fs/bpf/sockmap4j-never-made")).build();
    }

    @Test
    void foreignArchitectureIsInactiveWithItsReason() throws Exception {
        try (Sockmap s = Sockmap.open(config(), RISCV)) {
            assertFalse(s.isActive());
            assertTrue(s.unavailabilityCause().contains("os.arch=riscv64"), s.unavailabilityCause());
            SockmapUnavailableException e = assertThrows(SockmapUnavailableException.class, s::ensureActive);
            assertTrue(e.getMessage().contains("riscv64"), e.getMessage());
            assertEquals(SockmapStats.EMPTY, s.stats());
            assertTrue(s.cgroup().isEmpty());
            try (OptIn o = s.optIn(9)) {
                assertFalse(o.active(), "nothing reaches a kernel on a foreign platform");
                o.setBound(4096); // a no-op, not an error
            }
        }
    }

    @Test
    void requiredOnAForeignArchitectureFailsWithTheReason() {
        SockmapUnavailableException e = assertThrows(SockmapUnavailableException.class,
                () -> Sockmap.open(config().toBuilder().required(true).build(), RISCV));
        assertTrue(e.getMessage().contains("os.arch=riscv64"), e.getMessage());
    }

    @Test
    void otherOperatingSystemIsInactiveWithItsReason() throws Exception {
        try (Sockmap s = Sockmap.open(config(), Platform.detect("Windows 11", "amd64"))) {
            assertFalse(s.isActive());
            assertTrue(s.unavailabilityCause().contains("not Linux (os.name=Windows 11)"), s.unavailabilityCause());
        }
    }

    @Test
    void channelsOfAnInactiveFastPathCarryBytesOverTcp() throws Exception {
        try (Sockmap s = Sockmap.open(config(), RISCV);
             SockmapServerChannel server = s.openServerChannel()) {
            server.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
            try (SockmapChannel client = s.openChannel()) {
                client.connect(server.getLocalAddress());
                try (SockmapChannel accepted = (SockmapChannel) server.accept()) {
                    byte[] sent = "plain TCP all the way".getBytes(java.nio.charset.StandardCharsets.US_ASCII);
                    client.write(ByteBuffer.wrap(sent));
                    ByteBuffer got = ByteBuffer.allocate(sent.length);
                    while (got.hasRemaining() && accepted.read(got) >= 0) {
                        // blocking reads until all arrived
                    }
                    assertArrayEquals(sent, got.array());
                    assertFalse(client.isAccelerated());
                    assertFalse(accepted.isAccelerated());
                    assertEquals(-1, accepted.inFlightBound());
                }
            }
        }
    }

    @Test
    void hostAvailabilityIsComputedOnceAndExplained() {
        boolean available = SockmapAvailability.isAvailable();
        String cause = SockmapAvailability.unavailabilityCause();
        assertEquals(available, cause == null, "a cause exactly when unavailable: " + cause);
        assertEquals(HostCheck.check(Platform.current()).cause(), cause, "the answer kept is the check's");
        assertEquals(HostCheck.Reason.UNSUPPORTED_PLATFORM, HostCheck.check(RISCV).reason(), "a platform's own answer");
        if (!available) {
            SockmapUnavailableException e = assertThrows(SockmapUnavailableException.class,
                    SockmapAvailability::ensureAvailability);
            assertTrue(e.getMessage().contains(cause));
        } else {
            assertNull(cause);
        }
    }
}
