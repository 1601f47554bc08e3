package io.github.sockmap4j.colocated;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;
import org.junit.jupiter.api.Test;

/**
 * The ring in one process's memory of a region (no root): messages in order across the data
 * area's end, a sleeping reader and writer woken, and a peer that writes what it likes into the
 * shared memory closing only its ring with {@link RingCorruptException}, never reading past it.
 */
class MessageRingTest {
    private static final int CAPACITY = 4096;

    private static MemorySegment pattern(int seq, int length) {
        MemorySegment m = Arena.ofAuto().allocate(Math.max(length, 1));
        for (int i = 0; i < length; i++) {
            m.set(ValueLayout.JAVA_BYTE, i, (byte) (seq * 31 + i));
        }
        return m;
    }

    /** Read into arrays of their own and kept while the ring's space is written again: each stays as it came. */
    @Property(tries = 100)
    void ownedMessagesStayAsTheyCameWhileTheRingIsReused(
            @ForAll @Size(min = 1, max = 200) List<@IntRange(min = 0, max = 1024) Integer> sizes) throws Exception {
        try (SharedRegion region = SharedRegion.create("sm4j-test", CAPACITY)) {
            MessageRing.Writer w = region.outbound().writer();
            MessageRing.Reader r = region.outbound().reader();
            List<byte[]> kept = new ArrayList<>();
            int sent = 0;
            while (kept.size() < sizes.size()) {
                while (sent < sizes.size() && w.offer(sent % 5, pattern(sent, sizes.get(sent)), 0, sizes.get(sent))) {
                    sent++;
                }
                r.pollOwned((kind, m) -> {
                    assertEquals(kept.size() % 5, kind);
                    kept.add(m);
                }, 3);
            }
            for (int i = 0; i < kept.size(); i++) {
                assertEquals(-1, MemorySegment.ofArray(kept.get(i)).mismatch(pattern(i, sizes.get(i)).asSlice(0, sizes.get(i))),
                        "message " + i + " of " + sizes.get(i) + " bytes");
            }
        }
    }

    /** Any sizes, written until full and read in bursts: each message arrives once, whole, in order. */
    @Property(tries = 200)
    void everyMessageArrivesWholeAndInOrder(@ForAll @Size(min = 1, max = 200) List<@IntRange(min = 0, max = 1024) Integer> sizes,
                                            @ForAll @IntRange(min = 1, max = 7) int burst) throws Exception {
        try (SharedRegion region = SharedRegion.create("sm4j-test", CAPACITY)) {
            MessageRing.Writer w = region.outbound().writer();
            MessageRing.Reader r = region.outbound().reader();
            List<Integer> got = new ArrayList<>();
            int sent = 0;
            while (got.size() < sizes.size()) {
                while (sent < sizes.size() && w.offer(sent % 5, pattern(sent, sizes.get(sent)), 0, sizes.get(sent))) {
                    sent++;
                }
                r.poll((kind, m) -> {
                    int seq = got.size();
                    assertEquals(seq % 5, kind);
                    assertEquals((long) sizes.get(seq), m.byteSize());
                    assertEquals(-1, m.mismatch(pattern(seq, sizes.get(seq)).asSlice(0, sizes.get(seq))));
                    got.add(seq);
                }, burst);
            }
            assertFalse(r.hasMessages());
        }
    }

    /** Two threads, each sleeping when it must: 200,000 messages, none lost, none twice, none out of order. */
    @Test
    void aSleepingReaderAndWriterAreWokenAndLoseNothing() throws Exception {
        int count = 200_000;
        try (SharedRegion region = SharedRegion.create("sm4j-test", CAPACITY)) {
            MessageRing.Writer w = region.outbound().writer();
            MessageRing.Reader r = region.outbound().reader();
            AtomicReference<Throwable> failed = new AtomicReference<>();
            long[] next = {0};
            Thread reader = Thread.ofPlatform().start(() -> {
                try {
                    while (next[0] < count) {
                        if (r.poll((kind, m) -> {
                            assertEquals(next[0], m.get(ValueLayout.JAVA_LONG_UNALIGNED, 0));
                            next[0]++;
                        }, 64) == 0) {
                            r.awaitMessages(TimeUnit.SECONDS.toNanos(10));
                        }
                    }
                } catch (Throwable t) {
                    failed.set(t);
                }
            });
            MemorySegment msg = Arena.ofAuto().allocate(64);
            for (long i = 0; i < count; i++) {
                msg.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, i);
                int len = 8 + (int) (i % 57);
                while (!w.offer(0, msg, 0, len)) {
                    w.awaitSpace(len, TimeUnit.SECONDS.toNanos(10));
                }
            }
            reader.join(TimeUnit.SECONDS.toMillis(60));
            assertFalse(reader.isAlive(), "the reader finished");
            assertEquals(null, failed.get());
            assertEquals(count, next[0]);
        }
    }

    /** A sleep ends at its timeout, and at once when the reader's own process interrupts it. */
    @Test
    void aSleepEndsAtItsTimeoutOrWhenInterrupted() throws Exception {
        try (SharedRegion region = SharedRegion.create("sm4j-test", CAPACITY)) {
            MessageRing.Reader r = region.inbound().reader();
            assertEquals(MessageRing.Wake.TIMED_OUT, r.awaitMessages(TimeUnit.MILLISECONDS.toNanos(20)));
            Thread sleeper = Thread.ofPlatform().start(() -> r.awaitMessages(TimeUnit.SECONDS.toNanos(60)));
            while (sleeper.getState() != Thread.State.RUNNABLE || sleeper.isAlive() && !inFutex(sleeper)) {
                if (!sleeper.isAlive()) {
                    break;
                }
                Thread.onSpinWait();
            }
            r.interrupt();
            sleeper.join(TimeUnit.SECONDS.toMillis(10));
            assertFalse(sleeper.isAlive(), "the sleeper was woken");
        }
    }

    /**
     * A borrowed reading end: the writer wakes the borrower asleep on its own signal, never the
     * reader's thread asleep beside it, and nobody while the borrower reads; once it is given
     * back, the reader's thread again.
     */
    @Test
    void whileTheReadingEndIsLentTheWriterWakesTheBorrowerOnly() throws Exception {
        try (SharedRegion region = SharedRegion.create("sm4j-test", CAPACITY)) {
            MessageRing ring = region.outbound();
            MessageRing.Writer w = ring.writer();
            MessageRing.Reader r = ring.reader();
            MemorySegment one = pattern(1, 16);
            AtomicReference<MessageRing.Wake> readerWoke = new AtomicReference<>();
            Thread readerThread = Thread.ofPlatform().start(() -> readerWoke.set(r.awaitMessages(TimeUnit.SECONDS.toNanos(60))));
            awaitWord(ring, 0, 1); // the reader's thread said it sleeps
            r.borrow();
            int[] before = ring.readerWords();
            assertTrue(w.offer(0, one, 0, 16), "published while the borrower reads");
            assertEquals(before[1], ring.readerWords()[1], "the reader's thread was not woken");
            assertEquals(before[3], ring.readerWords()[3], "a borrower that reads is not woken");
            assertEquals(MessageRing.Wake.READY, r.awaitAsBorrower(TimeUnit.SECONDS.toNanos(10), () -> false),
                    "what was published before the borrower sleeps ends its sleep at once");
            assertEquals(1, r.poll((k, m) -> { }, 10));

            AtomicReference<MessageRing.Wake> borrowerWoke = new AtomicReference<>();
            Thread borrower = Thread.ofPlatform().start(() ->
                    borrowerWoke.set(r.awaitAsBorrower(TimeUnit.SECONDS.toNanos(60), () -> false)));
            awaitWord(ring, 2, 2); // the borrower sleeps
            before = ring.readerWords();
            assertTrue(w.offer(0, one, 0, 16));
            borrower.join(TimeUnit.SECONDS.toMillis(10));
            assertEquals(MessageRing.Wake.READY, borrowerWoke.get(), "the writer woke the borrower");
            assertEquals(before[1], ring.readerWords()[1], "and not the reader's thread");
            assertEquals(before[3] + 1, ring.readerWords()[3]);
            assertTrue(readerThread.isAlive(), "the reader's thread sleeps on");
            assertEquals(1, r.poll((k, m) -> { }, 10));

            r.giveBack();
            assertEquals(0, ring.readerWords()[2]);
            assertTrue(w.offer(0, one, 0, 16));
            readerThread.join(TimeUnit.SECONDS.toMillis(10));
            assertEquals(MessageRing.Wake.READY, readerWoke.get(), "given back, the writer wakes the reader's thread");
            assertEquals(before[1] + 1, ring.readerWords()[1]);
        }
    }

    /** A borrower's sleep ends when the reader's process interrupts the ring (a close, a task for the reader). */
    @Test
    void anInterruptWakesABorrowerToo() throws Exception {
        try (SharedRegion region = SharedRegion.create("sm4j-test", CAPACITY)) {
            MessageRing ring = region.outbound();
            MessageRing.Reader r = ring.reader();
            r.borrow();
            assertEquals(MessageRing.Wake.TIMED_OUT, r.awaitAsBorrower(TimeUnit.MILLISECONDS.toNanos(20), () -> false));
            Thread borrower = Thread.ofPlatform().start(() -> r.awaitAsBorrower(TimeUnit.SECONDS.toNanos(60), () -> false));
            awaitWord(ring, 2, 2);
            r.interrupt();
            borrower.join(TimeUnit.SECONDS.toMillis(10));
            assertFalse(borrower.isAlive(), "the borrower was woken");
            r.giveBack();
        }
    }

    /**
     * Quiet offers are written, not published: the reader sees nothing of a batch until its end
     * publishes it (from any thread of the writer's process), and then all of it.
     */
    @Test
    void aBatchIsSeenWholeOnceItsEndPublishesIt() throws Exception {
        try (SharedRegion region = SharedRegion.create("sm4j-test", CAPACITY)) {
            MessageRing ring = region.outbound();
            MessageRing.Writer w = ring.writer();
            MessageRing.Reader r = ring.reader();
            assertTrue(w.offer(1, pattern(1, 100), 0, 100, false));
            assertTrue(w.offer(2, pattern(2, 200), 0, 200, false));
            assertFalse(r.hasMessages(), "nothing published yet");
            assertEquals(0, r.poll((k, m) -> { }, 10));
            Thread publisher = Thread.ofPlatform().start(w::wakeIfAsleep);
            publisher.join();
            List<Integer> kinds = new ArrayList<>();
            assertEquals(2, r.poll((k, m) -> kinds.add(k), 10));
            assertEquals(List.of(1, 2), kinds);
            w.publish(); // again, with nothing new: the tail stays where it is
            assertFalse(r.hasMessages());
        }
    }

    /** Waits until the ring's reader word {@code index} ({@link MessageRing#readerWords}) is {@code value}. */
    private static void awaitWord(MessageRing ring, int index, int value) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (ring.readerWords()[index] != value) {
            assertTrue(System.nanoTime() < deadline, "word " + index + " never became " + value);
            Thread.onSpinWait();
        }
    }

    private static boolean inFutex(Thread t) {
        for (StackTraceElement e : t.getStackTrace()) {
            if (e.getMethodName().equals("awaitMessages")) {
                return true;
            }
        }
        return false;
    }

    /** The writer's tail past the capacity: refused, naming it. */
    @Test
    void aTailPastTheCapacityIsRefused() throws Exception {
        try (SharedRegion region = SharedRegion.create("sm4j-test", CAPACITY)) {
            MessageRing.Reader r = region.outbound().reader();
            region.memory().set(ValueLayout.JAVA_LONG, SharedRegion.HEADER_BYTES, CAPACITY + 8L);
            RingCorruptException e = assertThrows(RingCorruptException.class, () -> r.poll((k, m) -> { }, 10));
            assertTrue(e.getMessage().contains("tail"), e.getMessage());
        }
    }

    /** A record whose length runs past what was published: refused, nothing handed over. */
    @Test
    void aRecordLongerThanWhatWasPublishedIsRefused() throws Exception {
        try (SharedRegion region = SharedRegion.create("sm4j-test", CAPACITY)) {
            MessageRing.Writer w = region.outbound().writer();
            MessageRing.Reader r = region.outbound().reader();
            assertTrue(w.offer(1, pattern(0, 16), 0, 16));
            long data = SharedRegion.HEADER_BYTES + MessageRing.CONTROL_BYTES;
            region.memory().set(ValueLayout.JAVA_INT, data, 1000);
            List<Long> handed = new ArrayList<>();
            assertThrows(RingCorruptException.class, () -> r.poll((k, m) -> handed.add(m.byteSize()), 10));
            assertEquals(List.of(), handed);
        }
    }

    /** The reader's head ahead of what was written: the writer refuses it rather than overwrite. */
    @Test
    void aHeadAheadOfTheTailIsRefusedByTheWriter() throws Exception {
        try (SharedRegion region = SharedRegion.create("sm4j-test", CAPACITY)) {
            MessageRing.Writer w = region.outbound().writer();
            region.memory().set(ValueLayout.JAVA_LONG, SharedRegion.HEADER_BYTES + 64, 4096);
            assertThrows(RingCorruptException.class, () -> w.offer(0, pattern(0, 8), 0, 8));
        }
    }

    /**
     * A peer that writes any bytes over a ring (control block and data): the reader hands over
     * only messages within the ring's bounds, or refuses with RingCorruptException; nothing else
     * is thrown and nothing past the mapping is read (the segment would throw).
     */
    @Property(tries = 500)
    void garbageFromThePeerIsRefusedOrReadWithinBounds(@ForAll @Size(min = 8, max = 64) List<Long> words,
                                                       @ForAll @IntRange(min = 0, max = 40) int tailWords,
                                                       @ForAll boolean plausibleTail) throws Exception {
        try (SharedRegion region = SharedRegion.create("sm4j-test", CAPACITY)) {
            MessageRing.Reader r = region.outbound().reader();
            long data = SharedRegion.HEADER_BYTES + MessageRing.CONTROL_BYTES;
            for (int i = 0; i < words.size(); i++) {
                region.memory().set(ValueLayout.JAVA_LONG, data + 8L * i, words.get(i));
            }
            long tail = plausibleTail ? 8L * tailWords : words.get(tailWords % words.size());
            region.memory().set(ValueLayout.JAVA_LONG, SharedRegion.HEADER_BYTES, tail);
            try {
                r.poll((k, m) -> assertTrue(k >= 0 && m.byteSize() <= region.outbound().maxMessage()), 1000);
            } catch (RingCorruptException expected) {
                assertTrue(expected.getMessage().startsWith("ring to the opener"), expected.getMessage());
            }
        }
    }
}
