package io.github.sockmap4j.internal.flow;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.LongRange;
import org.junit.jupiter.api.Test;

/**
 * The credit engine's every decision, as both of its drivers meet them (an event loop's writer,
 * Netty's HoldForCredit; a channel's blocking or non-blocking write): the receiver is a model, time
 * is a number the test advances, and idling advances it; nothing sleeps and no kernel is asked.
 */
class CreditEngineTest {
    private static final long MS = 1_000_000L;
    private static final long BOUND = 256 * 1024;

    /** A receiver as the writer sees it: its bound, what was sent and read, the kernel's answers. */
    static final class Model implements CreditEngine.Receiver {
        long bound = BOUND;
        long sent;
        long read;
        /** What the writer has read of the receiver; -1: its socket publishes nothing. */
        long heard = -1;
        boolean gone;
        boolean onTcp;
        /** A bound the receiver publishes only once looked for again (a slot claimed late); -1: none. */
        long lateBound = -1;
        int refreshes;
        final List<Long> waits = new ArrayList<>();

        @Override
        public long available() {
            return Math.max(0, bound - (sent - read));
        }

        @Override
        public long refresh() {
            refreshes++;
            if (lateBound >= 0) {
                bound = lateBound;
                lateBound = -1;
            }
            return available();
        }

        @Override
        public long bound() {
            return bound;
        }

        @Override
        public long receiverRead() {
            return read;
        }

        @Override
        public long readFromReceiver() {
            return heard;
        }

        @Override
        public boolean onTcp() {
            return onTcp;
        }

        @Override
        public boolean receiverGone() {
            return gone;
        }

        @Override
        public void sent(long bytes) {
            sent += bytes;
        }

        @Override
        public void waited(long nanos) {
            waits.add(nanos);
        }
    }

    /** Idling that spins twice, then "parks" by advancing the clock, doubling to 1 ms, and runs {@link #onPark}. */
    static final class Steps implements CreditEngine.Idle {
        final long[] clock;
        Runnable onPark = () -> { };
        int steps;
        long park;
        int parks;

        Steps(long[] clock) {
            this.clock = clock;
        }

        @Override
        public void reset() {
            steps = 0;
            park = 1_000;
        }

        @Override
        public boolean idle() {
            if (steps++ < 2) {
                return false;
            }
            clock[0] += park;
            park = Math.min(park * 2, CreditEngine.MAX_WAIT_NANOS);
            parks++;
            onPark.run();
            if (parks > 1_000_000) {
                throw new AssertionError("the wait never ended");
            }
            return true;
        }

        @Override
        public boolean waitedLongest() {
            return park >= CreditEngine.MAX_WAIT_NANOS;
        }
    }

    final long[] now = {1_000 * MS};
    final Model rx = new Model();
    final Steps idle = new Steps(now);
    final CreditEngine engine = new CreditEngine(rx, () -> now[0], idle);

    // ---- The rule's arithmetic ----

    @Property
    void aWorthwhileSendIsNeverEmptyNorMoreThanIsLeft(@ForAll @LongRange(min = 1, max = 1L << 40) long remaining,
                                                      @ForAll @LongRange(min = 0, max = 1L << 30) long bound) {
        long w = CreditEngine.worthSending(remaining, bound);
        assertTrue(w >= 1 && w <= remaining, "worth " + w + " of " + remaining);
        assertTrue(w <= CreditEngine.MIN_SEND, "a worthwhile part asks no more than " + CreditEngine.MIN_SEND);
    }

    @Test
    void whatGoesNow() {
        long bound = 256 * 1024;
        assertTrue(CreditEngine.fits(1000, false, 1000, bound), "a message that fits goes whole");
        assertFalse(CreditEngine.fits(1000, false, 999, bound), "an unsplittable message waits for all of it");
        assertTrue(CreditEngine.fits(1 << 20, true, CreditEngine.MIN_SEND, bound), "a splittable one goes in a part");
        assertFalse(CreditEngine.fits(1 << 20, true, CreditEngine.MIN_SEND - 1, bound), "but not in a tiny part");
        assertTrue(CreditEngine.fits(1 << 20, false, bound, bound),
                "one larger than the bound goes once the receiver has read everything");
        assertFalse(CreditEngine.fits(1 << 20, false, bound - 1, bound));
    }

    @Test
    void aReceiverThatReadsNothingForTheStallTimeIsNoLongerWaitedFor() {
        long t = 1_000 * MS;
        engine.begin(7, -1, t);
        for (long at = t; at <= t + CreditEngine.STALLED_RECEIVER_NANOS; at += 10 * MS) {
            assertFalse(engine.watch(7, -1, at), "not stalled yet at +" + (at - t) / MS + " ms");
        }
        assertTrue(engine.watch(7, -1, t + CreditEngine.STALLED_RECEIVER_NANOS + 10 * MS), "stalled");
        assertTrue(engine.released(7), "released while it still reads nothing");
        assertFalse(engine.released(8), "a read ends the release");
        assertFalse(engine.released(8), "and it stays ended");
    }

    @Test
    void aReceiverThatReadsIsNeverStalled() {
        engine.begin(0, -1, 0);
        for (long i = 1; i <= 100; i++) {
            assertFalse(engine.watch(i, -1, i * 10 * MS), "it read at +" + i * 10 + " ms");
        }
    }

    @Test
    void aReceiverThatStillSendsIsWaitedForThoughItReadsNothing() {
        engine.begin(7, 0, 0);
        long at = 0;
        for (long heard = 1; heard <= 100; heard++) {
            at += 10 * MS;
            assertFalse(engine.watch(7, heard * 100, at), "it sent at +" + at / MS + " ms");
        }
        // It stops sending too: from its last send, the stall time of the writer's running.
        long lastSend = at;
        while (at + 10 * MS - lastSend <= CreditEngine.STALLED_RECEIVER_NANOS) {
            at += 10 * MS;
            assertFalse(engine.watch(7, 100 * 100, at), "+" + (at - lastSend) / MS + " ms since its last send");
        }
        assertTrue(engine.watch(7, 100 * 100, at + 10 * MS), "silent both ways: stalled");
    }

    @Test
    void timeTheWriterDidNotRunIsNotCountedAgainstTheReceiver() {
        engine.begin(3, -1, 0);
        assertFalse(engine.watch(3, -1, 10 * MS));
        // The writer was paused (a collection, a busy loop) for far longer than the stall time.
        long resumed = 10 * MS + 5 * CreditEngine.STALLED_RECEIVER_NANOS;
        assertFalse(engine.watch(3, -1, resumed), "a pause of its own is not the receiver's");
        long at = resumed;
        while (at + 10 * MS - resumed <= CreditEngine.STALLED_RECEIVER_NANOS - 10 * MS) {
            at += 10 * MS;
            assertFalse(engine.watch(3, -1, at), "+" + (at - resumed) / MS + " ms of its own running");
        }
        at += 30 * MS;
        assertTrue(engine.watch(3, -1, at), "stalled once it ran the stall time itself: +" + (at - resumed) / MS + " ms");
    }

    // ---- An event loop's writer (spi.WriteCredit, Netty's HoldForCredit) ----

    @Test
    void aMessageThatFitsGoesAndIsCounted() {
        assertTrue(engine.admit(1000, true));
        assertEquals(1000, rx.sent);
        assertTrue(engine.admit(-1, false), "what is not data passes, uncounted");
        assertEquals(1000, rx.sent);
    }

    @Test
    void aMessageThatDoesNotFitIsHeldWholeEvenWhenAPartWould() {
        rx.sent = BOUND - 100;
        assertFalse(engine.admit(1000, true), "parts are the drain's, not the admission's");
        assertFalse(engine.admit(1000, false));
        assertEquals(BOUND - 100, rx.sent, "nothing counted for a held message");
    }

    @Test
    void anUnsplittableMessageLargerThanTheBoundGoesOnceEverythingIsRead() {
        rx.sent = 10;
        assertFalse(engine.admit(BOUND * 2, false), "10 bytes unread");
        rx.read = 10;
        assertTrue(engine.admit(BOUND * 2, false), "all read: it goes, past the bound");
        assertEquals(10 + BOUND * 2, rx.sent);
    }

    @Test
    void aHeldMessageGoesWholeInAPartOrNotYet() {
        rx.sent = BOUND - 100;
        assertEquals(CreditEngine.WHOLE, engine.next(100, false, false), "exactly its size");
        assertEquals(0, engine.next(1000, true, false), "100 bytes of credit: no part worth sending");
        rx.read = 40_000; // 40,100 of credit
        assertEquals(40_100, engine.next(100_000, true, false), "a part of what the credit covers");
        assertEquals(0, engine.next(100_000, false, false), "an unsplittable one waits for all of it");
        assertEquals(CreditEngine.WHOLE, engine.next(100_000, false, true), "unless forced");
        assertEquals(CreditEngine.WHOLE, engine.next(0, true, false), "not data: goes");
        assertEquals(CreditEngine.WHOLE, engine.next(-1, false, false));
    }

    @Test
    void theKernelIsAskedAgainOnlyWhenWhatIsSeenFallsShort() {
        assertEquals(CreditEngine.WHOLE, engine.next(1000, true, false));
        assertEquals(0, rx.refreshes, "shared memory was enough");
        rx.bound = 0;
        rx.lateBound = BOUND; // the receiver claimed its slot after the connect
        assertEquals(CreditEngine.WHOLE, engine.next(1000, true, false), "found on a second look");
        assertEquals(1, rx.refreshes);
    }

    @Test
    void aWriterOnTcpSendsNothingUntilItsReceiverHasReadEverything() {
        rx.sent = BOUND;
        rx.read = BOUND - 1;
        rx.onTcp = true;
        long before = engine.retryNanos();
        assertEquals(CreditEngine.Retry.WAIT, engine.retry());
        assertEquals(before * 2, engine.retryNanos(), "and backs off");
        rx.read = BOUND;
        assertEquals(CreditEngine.Retry.DRAIN, engine.retry(), "all read: it may send again");
    }

    @Test
    void retriesBackOffToTheLongestWaitAndAreSoonAgainAfterProgress() {
        List<Long> delays = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            delays.add(engine.retryNanos());
            engine.retried(false);
        }
        assertEquals(List.of(50_000L, 100_000L, 200_000L, 400_000L, 800_000L, CreditEngine.MAX_WAIT_NANOS,
                CreditEngine.MAX_WAIT_NANOS, CreditEngine.MAX_WAIT_NANOS), delays);
        engine.retried(true);
        assertEquals(50_000L, engine.retryNanos());
    }

    @Test
    void aStalledReceiverIsDrainedToAndEverythingGoesOnceRetriesAreAtTheirLongest() {
        rx.sent = BOUND;
        assertFalse(engine.admit(1000, true));
        now[0] += CreditEngine.STALLED_RECEIVER_NANOS / 2;
        assertEquals(CreditEngine.Retry.DRAIN, engine.retry(), "not stalled yet: what the credit covers");
        for (int i = 0; i < 5; i++) {
            engine.retried(false);
            now[0] += 10 * MS;
            engine.retry();
        }
        long stallFrom = now[0];
        CreditEngine.Retry r;
        do {
            now[0] += 10 * MS; // retries of a running event loop: no pause of its own
            r = engine.retry();
        } while (r == CreditEngine.Retry.DRAIN && now[0] - stallFrom < 10 * CreditEngine.STALLED_RECEIVER_NANOS);
        assertEquals(CreditEngine.Retry.DRAIN_ALL, r, "stalled, retries at 1 ms: everything");
        assertTrue(now[0] - stallFrom <= CreditEngine.STALLED_RECEIVER_NANOS, "within the stall time of its "
                + "start (it began 150 ms before): " + (now[0] - stallFrom) / MS + " ms");
        assertTrue(engine.admit(5000, true), "released: the next message goes until the receiver reads");
        rx.read = 1;
        rx.sent = BOUND + 1;
        assertFalse(engine.admit(5000, true), "it read: holding again");
    }

    @Test
    void aHeldEventLoopWriterHoldsOnForAReceiverThatSendsAndIsReleasedOnceItFallsSilent() {
        rx.sent = BOUND;
        rx.heard = 0;
        assertFalse(engine.admit(1000, true));
        while (engine.retryNanos() < CreditEngine.MAX_WAIT_NANOS) {
            engine.retried(false);
        }
        for (int i = 0; i < 5 * CreditEngine.STALLED_RECEIVER_MILLIS / 10; i++) {
            now[0] += 10 * MS;
            rx.heard += 4096; // its event loop writes replies, busy before it reads again
            assertEquals(CreditEngine.Retry.DRAIN, engine.retry(), "+" + i * 10 + " ms: still held");
            assertEquals(0, engine.next(1000, true, false), "nothing goes past the bound");
        }
        long silentFrom = now[0];
        CreditEngine.Retry r;
        do {
            now[0] += 10 * MS;
            r = engine.retry();
        } while (r == CreditEngine.Retry.DRAIN && now[0] - silentFrom < 10 * CreditEngine.STALLED_RECEIVER_NANOS);
        assertEquals(CreditEngine.Retry.DRAIN_ALL, r, "silent both ways: everything goes");
        assertTrue(now[0] - silentFrom > CreditEngine.STALLED_RECEIVER_NANOS
                && now[0] - silentFrom <= CreditEngine.STALLED_RECEIVER_NANOS + 10 * MS,
                "released the stall time after its last send: " + (now[0] - silentFrom) / MS + " ms");
    }

    @Test
    void aGoneReceiverGetsEverythingOnlyOnceRetriesAreAtTheirLongest() {
        rx.sent = BOUND;
        rx.gone = true;
        assertFalse(engine.admit(1000, true));
        assertEquals(CreditEngine.Retry.DRAIN, engine.retry(), "retries still short");
        while (engine.retryNanos() < CreditEngine.MAX_WAIT_NANOS) {
            engine.retried(false);
        }
        assertEquals(CreditEngine.Retry.DRAIN_ALL, engine.retry());
    }

    @Test
    void aHoldIsCountedFromItsBeginningToItsEnd() {
        rx.sent = BOUND;
        assertFalse(engine.admit(1000, true));
        now[0] += 3 * MS;
        engine.drained();
        assertEquals(List.of(3 * MS), rx.waits);
    }

    // ---- A channel's write (ChannelCredit): non-blocking, then blocking ----

    @Test
    void enoughCreditIsAnsweredFromSharedMemory() {
        assertEquals(BOUND, engine.await(1000, true, () -> true));
        assertEquals(0, rx.refreshes);
        assertEquals(0, idle.parks);
    }

    @Test
    void aNonBlockingWriteWithoutCreditLooksOnceAndGetsNothing() {
        rx.sent = BOUND;
        assertEquals(0, engine.await(1000, false, () -> true));
        assertEquals(1, rx.refreshes);
        assertEquals(0, idle.parks, "it does not wait");
        rx.read = 2000;
        assertEquals(2000, engine.await(1000, false, () -> true), "the receiver read: credit");
    }

    @Test
    void aBlockingWriteWaitsUntilTheReceiverReadsAndCountsTheWait() {
        rx.sent = BOUND;
        idle.onPark = () -> {
            if (idle.parks == 5) {
                rx.read = 50_000;
            }
        };
        long start = now[0];
        assertEquals(50_000, engine.await(100_000, true, () -> true), "a part worth sending");
        assertEquals(List.of(now[0] - start), rx.waits);
        assertEquals(5, idle.parks);
    }

    @Test
    void aBlockingWriteStopsWaitingForAReceiverThatReadsNothingAndStaysReleased() {
        rx.sent = BOUND;
        long start = now[0];
        assertEquals(CreditEngine.UNLIMITED, engine.await(1000, true, () -> true));
        assertTrue(now[0] - start > CreditEngine.STALLED_RECEIVER_NANOS, "after the stall time: "
                + (now[0] - start) / MS + " ms");
        int refreshes = rx.refreshes;
        assertEquals(CreditEngine.UNLIMITED, engine.await(1000, true, () -> true), "still reading nothing");
        assertEquals(refreshes, rx.refreshes, "released without asking the kernel");
        rx.read = 1;
        rx.sent = BOUND + 1;
        assertEquals(0, engine.await(1000, false, () -> true), "it read: held again");
    }

    @Test
    void aBlockingWriteStopsWaitingForAGoneReceiverOncePausesAreLongest() {
        rx.sent = BOUND;
        idle.onPark = () -> rx.gone = idle.parks >= 2;
        assertEquals(CreditEngine.UNLIMITED, engine.await(1000, true, () -> true));
        assertTrue(idle.waitedLongest(), "only looked at with pauses at their longest");
    }

    @Test
    void aBlockingWriteOfAChannelThatClosesEndsWithNothing() {
        rx.sent = BOUND;
        boolean[] open = {true};
        idle.onPark = () -> open[0] = idle.parks < 3;
        assertEquals(0, engine.await(1000, true, () -> open[0]));
        assertEquals(List.of(), rx.waits, "no wait counted for a closed channel");
    }

    @Test
    void aSelectorLetsAHeldWriterGoWhenCreditIsWorthASendOrTheReceiverIsGone() {
        rx.sent = BOUND;
        assertFalse(engine.mayWriteAgain());
        rx.read = CreditEngine.MIN_SEND;
        assertTrue(engine.mayWriteAgain());
        rx.read = 0;
        rx.gone = true;
        assertTrue(engine.mayWriteAgain());
    }

    @Test
    void aBlockingWaitSpinsYieldsThenParksDoublingToTheLongestPause() {
        List<Long> parks = new ArrayList<>();
        BackoffIdle backoff = new BackoffIdle(parks::add);
        int steps = 0;
        while (!backoff.waitedLongest()) {
            boolean parked = backoff.idle();
            steps++;
            assertEquals(steps > BackoffIdle.SPINS + BackoffIdle.YIELDS, parked, "step " + steps);
            assertTrue(steps < 1000, "reaches its longest pause");
        }
        assertEquals(BackoffIdle.MIN_PARK_NANOS, parks.get(0));
        for (int i = 1; i < parks.size(); i++) {
            assertEquals(Math.min(parks.get(i - 1) * 2, CreditEngine.MAX_WAIT_NANOS), parks.get(i));
        }
        assertTrue(parks.get(parks.size() - 1) <= CreditEngine.MAX_WAIT_NANOS);
        backoff.reset();
        assertFalse(backoff.waitedLongest(), "a new wait starts short");
        assertFalse(backoff.idle(), "and spins first");
    }
}
