package io.github.sockmap4j.linux.ffi;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

/**
 * The one place a native call's result becomes an exception, without root: real failed calls
 * (an integer result and a pointer result) and the sign convention for every errno.
 */
class ErrnoTest {

    @Test
    void aFailedCallNamesItsOperationErrnoAndDetail() {
        int r = SysCalls.tryOpen("/nonexistent-sockmap4j-" + ProcessHandle.current().pid(), 0, 0);
        NativeIOException e = assertThrows(NativeIOException.class, () -> Errno.ok("open", r, "the test's path"));
        assertEquals(Errno.ENOENT, e.errno());
        assertTrue(e.getMessage().startsWith("open failed: ENOENT ("), e.getMessage());
        assertTrue(e.getMessage().endsWith("(the test's path)"), e.getMessage());
    }

    @Test
    void aPointerCallThatFailedReadsTheErrnoItLeft() {
        try (Arena arena = Arena.ofConfined()) {
            NativeIOException e = assertThrows(NativeIOException.class,
                    () -> SysCalls.mmapShared(-1, 4096, Linux.PROT_READ, arena));
            assertEquals(Errno.EBADF, e.errno());
            assertTrue(e.getMessage().startsWith("mmap failed: EBADF"), e.getMessage());
            assertTrue(e.getMessage().contains("4096 bytes of fd -1"), e.getMessage());
        }
    }

    @Test
    void aResultThatIsNoFailureIsRefused() {
        assertThrows(IllegalArgumentException.class, () -> Errno.error("close", 0));
        assertThrows(IllegalArgumentException.class, () -> Errno.error("close", 7, "a count"));
        assertThrows(IllegalArgumentException.class, () -> Errno.error("read", -5000));
    }

    @Property(tries = 200)
    void everyErrnoRoundTrips(@ForAll @IntRange(min = 1, max = 4095) int errno) {
        NativeIOException e = Errno.error("op", -errno);
        assertEquals(errno, e.errno());
        assertTrue(e.getMessage().startsWith("op failed: "), e.getMessage());
        assertEquals(errno, Errno.error("op", (long) -errno, "d").errno());
    }
}
