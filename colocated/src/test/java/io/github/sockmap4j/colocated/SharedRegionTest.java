package io.github.sockmap4j.colocated;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.linux.ffi.SharedMemory;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * What a region's opener accepts from a peer's descriptor (no root: memfd needs none): only a
 * sealed file of the agreed size and layout, which then cannot shrink under the mapping; and
 * that closing leaves no descriptor behind, refused or not.
 */
class SharedRegionTest {
    private static final long CAPACITY = 8192;

    private static long openDescriptors() throws IOException {
        try (Stream<Path> fds = Files.list(Path.of("/proc/self/fd"))) {
            return fds.count();
        }
    }

    /** A second mapping of the same file (as the peer's) sees the creator's messages. */
    @Test
    void theOpenerReadsWhatTheCreatorWrites() throws Exception {
        try (SharedRegion mine = SharedRegion.create("sm4j-test", CAPACITY)) {
            int copy = mine.descriptorForPeer();
            try (SharedRegion peer = SharedRegion.open(copy, CAPACITY)) {
                MemorySegment hello = Arena.ofAuto().allocateFrom("hello");
                assertTrue(mine.outbound().writer().offer(7, hello, 0, (int) hello.byteSize()));
                StringBuilder got = new StringBuilder();
                assertEquals(1, peer.inbound().reader().poll((k, m) -> got.append(k).append(m.getString(0)), 10));
                assertEquals("7hello", got.toString());
                assertTrue(peer.outbound().writer().offer(3, hello, 0, 2));
                assertEquals(1, mine.inbound().reader().poll((k, m) -> assertEquals(2, m.byteSize()), 10));
            }
        }
    }

    /** The peer's file cannot be made smaller under the mapping: the seals refuse the truncate. */
    @Test
    void aSealedRegionCannotBeTruncated() throws Exception {
        try (SharedRegion region = SharedRegion.create("sm4j-test", CAPACITY);
             FileChannel ch = FileChannel.open(Path.of("/proc/self/fd/" + region.fd()), StandardOpenOption.WRITE)) {
            IOException e = assertThrows(IOException.class, () -> ch.truncate(64));
            assertTrue(e.getMessage().contains("not permitted"), e.getMessage());
            assertEquals(SharedRegion.sizeFor(CAPACITY), ch.size());
        }
    }

    @Test
    void anUnsealedFileIsRefused() throws Exception {
        long before = openDescriptors();
        int fd = SharedMemory.create("sm4j-test", SharedRegion.sizeFor(CAPACITY), 0);
        IOException e = assertThrows(IOException.class, () -> SharedRegion.open(fd, CAPACITY));
        assertTrue(e.getMessage().contains("not sealed"), e.getMessage());
        assertEquals(before, openDescriptors(), "the refused descriptor was closed");
    }

    @Test
    void aRegionOfAnotherSizeIsRefused() throws Exception {
        try (SharedRegion region = SharedRegion.create("sm4j-test", CAPACITY)) {
            IOException e = assertThrows(IOException.class, () -> SharedRegion.open(region.descriptorForPeer(), CAPACITY * 2));
            assertTrue(e.getMessage().contains("not the"), e.getMessage());
        }
    }

    @Test
    void aRegionOfAnotherLayoutIsRefused() throws Exception {
        try (SharedRegion region = SharedRegion.create("sm4j-test", CAPACITY)) {
            region.memory().set(ValueLayout.JAVA_INT, 8, SharedRegion.VERSION + 1);
            IOException e = assertThrows(IOException.class, () -> SharedRegion.open(region.descriptorForPeer(), CAPACITY));
            assertTrue(e.getMessage().contains("version"), e.getMessage());
        }
    }

    @Test
    void closingLeavesNoDescriptor() throws Exception {
        long before = openDescriptors();
        for (int i = 0; i < 50; i++) {
            try (SharedRegion region = SharedRegion.create("sm4j-test", CAPACITY);
                 SharedRegion peer = SharedRegion.open(region.descriptorForPeer(), CAPACITY)) {
                assertTrue(region.outbound().writer().offer(0, Arena.ofAuto().allocate(8), 0, 8));
                assertEquals(1, peer.inbound().reader().poll((k, m) -> { }, 10));
            }
        }
        assertEquals(before, openDescriptors());
    }

    @Test
    void aHeapIsSharedAfterTheRingsAndItsSizeIsTheOpenersToBound() throws Exception {
        long heap = 64 * 1024;
        try (SharedRegion region = SharedRegion.create("sm4j-test", CAPACITY, heap)) {
            assertEquals(heap, region.heap().byteSize());
            assertEquals(0, region.heap().address() % 4096, "the heap starts on a page");
            region.heap().set(ValueLayout.JAVA_LONG, heap - 8, 0x1234_5678_9abcL);
            try (SharedRegion peer = SharedRegion.open(region.descriptorForPeer(), CAPACITY, heap)) {
                assertEquals(0x1234_5678_9abcL, peer.heap().get(ValueLayout.JAVA_LONG, heap - 8));
            }
            IOException larger = assertThrows(IOException.class,
                    () -> SharedRegion.open(region.descriptorForPeer(), CAPACITY, heap / 2));
            assertTrue(larger.getMessage().contains("at most " + heap / 2), larger.getMessage());
            IOException none = assertThrows(IOException.class, () -> SharedRegion.open(region.descriptorForPeer(), CAPACITY));
            assertTrue(none.getMessage().contains("at most 0"), none.getMessage());
        }
        try (SharedRegion plain = SharedRegion.create("sm4j-test", CAPACITY);
             SharedRegion peer = SharedRegion.open(plain.descriptorForPeer(), CAPACITY, heap)) {
            assertEquals(0, peer.heap().byteSize(), "a region without a heap opens where one may come");
        }
    }

    @Test
    void aHeapTheHeaderDoesNotSayIsRefused() throws Exception {
        try (SharedRegion region = SharedRegion.create("sm4j-test", CAPACITY, 8192)) {
            region.memory().set(ValueLayout.JAVA_LONG, 32, 4096);
            IOException e = assertThrows(IOException.class, () -> SharedRegion.open(region.descriptorForPeer(), CAPACITY, 8192));
            assertTrue(e.getMessage().contains("a heap of 4096"), e.getMessage());
        }
        assertThrows(IllegalArgumentException.class, () -> SharedRegion.create("sm4j-test", CAPACITY, 100));
    }

    /** The count an eventfd holds, read (and so reset); 0 where nothing raised it (EAGAIN). */
    private static long count(int eventfd) {
        MemorySegment buf = Arena.ofAuto().allocate(8, 8);
        long n = io.github.sockmap4j.linux.ffi.LibC.tryRead(eventfd, buf);
        return n == 8 ? buf.get(ValueLayout.JAVA_LONG, 0) : 0;
    }

    /**
     * A region's bells go to the opener with it; a reader that says it waits on its ring's bell is
     * rung once for a batch, by the writer in the other mapping, and not at all while it reads.
     */
    @Test
    void aReaderOnTheBellIsRungOnceABatchAndNotWhileItReads() throws Exception {
        try (SharedRegion mine = SharedRegion.create("sm4j-test", CAPACITY, 0, true);
             SharedRegion peer = SharedRegion.open(mine.descriptorForPeer(), CAPACITY, 0, mine.bellsForPeer())) {
            assertEquals(2, mine.bells().length);
            int bell = peer.inbound().bell();
            assertTrue(bell >= 0, "the opener's ring has its bell");
            MessageRing.Reader r = peer.inbound().reader();
            MessageRing.Writer w = mine.outbound().writer();
            MemorySegment m = Arena.ofAuto().allocate(16);
            r.sleepOnBell();
            assertTrue(w.offer(1, m, 0, 16, false));
            assertTrue(w.offer(2, m, 0, 16, false));
            assertEquals(0, count(bell), "quiet writes ring nobody");
            w.wakeIfAsleep();
            assertEquals(1, count(bell), "the batch's end rang the bell once");
            r.awake();
            assertEquals(2, r.poll((k, x) -> { }, 10));
            assertTrue(w.offer(3, m, 0, 16));
            assertEquals(0, count(bell), "a reader that says it reads is not rung");
            r.interrupt();
            assertEquals(0, count(bell), "nor interrupted through the bell");
            r.sleepOnBell();
            r.interrupt();
            assertEquals(1, count(bell), "an interrupt rings a reader that waits on the bell");
        }
    }

    /**
     * A peer that hands over something else as a bell (a file, one bell of two) has the region
     * refused with what was wrong, and every descriptor it sent closed: a writer raises a bell
     * while it holds its ring, so only an eventfd that cannot block is taken.
     */
    @Test
    void bellsThatAreNotEventfdsAreRefused() throws Exception {
        try (SharedRegion mine = SharedRegion.create("sm4j-test", CAPACITY, 0, true)) {
            long before = openDescriptors();
            int file = io.github.sockmap4j.linux.ffi.SysCalls.open("/dev/null", io.github.sockmap4j.linux.ffi.Linux.O_RDWR
                    | io.github.sockmap4j.linux.ffi.Linux.O_CLOEXEC, 0);
            int[] bells = mine.bellsForPeer();
            IOException e = assertThrows(IOException.class,
                    () -> SharedRegion.open(mine.descriptorForPeer(), CAPACITY, 0, new int[] {bells[0], file}));
            assertTrue(e.getMessage().contains("/dev/null, not an eventfd"), e.getMessage());
            io.github.sockmap4j.linux.ffi.LibC.close(bells[1]);
            int[] one = mine.bellsForPeer();
            io.github.sockmap4j.linux.ffi.LibC.close(one[1]);
            e = assertThrows(IOException.class,
                    () -> SharedRegion.open(mine.descriptorForPeer(), CAPACITY, 0, new int[] {one[0]}));
            assertTrue(e.getMessage().contains("1 bells came"), e.getMessage());
            assertEquals(before, openDescriptors(), "every descriptor of the refused offers closed");
        }
    }
}
