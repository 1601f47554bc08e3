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

/** The credit rule as a pure policy: time is a number the test advances; nothing sleeps. */
class CreditRuleTest {
    private static final long MS = 1_000_000L;

    @Property
    void aWorthwhileSendIsNeverEmptyNorMoreThanIsLeft(@ForAll @LongRange(min = 1, max = 1L << 40) long remaining,
                                                      @ForAll @LongRange(min = 0, max = 1L << 30) long bound) {
        long w = CreditRule.worthSending(remaining, bound);
        assertTrue(w >= 1 && w <= remaining, "worth " + w + " of " + remaining);
        assertTrue(w <= CreditRule.MIN_SEND, "a worthwhile part asks no more than " + CreditRule.MIN_SEND);
    }

    @Test
    void whatGoesNow() {
        long bound = 256 * 1024;
        assertTrue(CreditRule.fits(1000, false, 1000, bound), "a message that fits goes whole");
        assertFalse(CreditRule.fits(1000, false, 999, bound), "an unsplittable message waits for all of it");
        assertTrue(CreditRule.fits(1 << 20, true, CreditRule.MIN_SEND, bound), "a splittable one goes in a part");
        assertFalse(CreditRule.fits(1 << 20, true, CreditRule.MIN_SEND - 1, bound), "but not in a tiny part");
        assertTrue(CreditRule.fits(1 << 20, false, bound, bound),
                "one larger than the bound goes once the receiver has read everything");
        assertFalse(CreditRule.fits(1 << 20, false, bound - 1, bound));
    }

    @Test
    void aReceiverThatReadsNothingForTheStallTimeIsNoLongerWaitedFor() {
        CreditRule rule = new CreditRule();
        long t = 1_000 * MS;
        rule.begin(7, t);
        for (long at = t; at <= t + CreditRule.STALLED_RECEIVER_NANOS; at += 10 * MS) {
            assertFalse(rule.watch(7, at), "not stalled yet at +" + (at - t) / MS + " ms");
        }
        assertTrue(rule.watch(7, t + CreditRule.STALLED_RECEIVER_NANOS + 10 * MS), "stalled");
        assertTrue(rule.released(7), "released while it still reads nothing");
        assertFalse(rule.released(8), "a read ends the release");
        assertFalse(rule.released(8), "and it stays ended");
    }

    @Test
    void aReceiverThatReadsIsNeverStalled() {
        CreditRule rule = new CreditRule();
        rule.begin(0, 0);
        for (long i = 1; i <= 100; i++) {
            assertFalse(rule.watch(i, i * 10 * MS), "it read at +" + i * 10 + " ms");
        }
    }

    @Test
    void timeTheWriterDidNotRunIsNotCountedAgainstTheReceiver() {
        CreditRule rule = new CreditRule();
        rule.begin(3, 0);
        assertFalse(rule.watch(3, 10 * MS));
        // The writer was paused (a collection, a busy loop) for far longer than the stall time.
        long resumed = 10 * MS + 5 * CreditRule.STALLED_RECEIVER_NANOS;
        assertFalse(rule.watch(3, resumed), "a pause of its own is not the receiver's");
        long at = resumed;
        while (at + 10 * MS - resumed <= CreditRule.STALLED_RECEIVER_NANOS - 10 * MS) {
            at += 10 * MS;
            assertFalse(rule.watch(3, at), "+" + (at - resumed) / MS + " ms of its own running");
        }
        at += 30 * MS;
        assertTrue(rule.watch(3, at), "stalled once it ran the stall time itself: +" + (at - resumed) / MS + " ms");
    }

    @Test
    void anEventLoopRetriesSoonThenBacksOffToTheLongestWaitAndSoonAgainAfterProgress() {
        CreditRule rule = new CreditRule();
        List<Long> delays = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            delays.add(rule.nextRetryNanos());
        }
        assertEquals(List.of(50_000L, 100_000L, 200_000L, 400_000L, 800_000L, CreditRule.MAX_WAIT_NANOS,
                CreditRule.MAX_WAIT_NANOS, CreditRule.MAX_WAIT_NANOS), delays);
        rule.progressed();
        assertEquals(50_000L, rule.retryNanos());
    }

    @Test
    void aBlockingWaitSpinsYieldsThenParksDoublingToTheLongestPause() {
        List<Long> parks = new ArrayList<>();
        BackoffIdle idle = new BackoffIdle(parks::add);
        int steps = 0;
        while (!idle.waitedLongest()) {
            boolean parked = idle.idle();
            steps++;
            assertEquals(steps > BackoffIdle.SPINS + BackoffIdle.YIELDS, parked, "step " + steps);
            assertTrue(steps < 1000, "reaches its longest pause");
        }
        assertEquals(BackoffIdle.MIN_PARK_NANOS, parks.get(0));
        for (int i = 1; i < parks.size(); i++) {
            assertEquals(Math.min(parks.get(i - 1) * 2, CreditRule.MAX_WAIT_NANOS), parks.get(i));
        }
        assertTrue(parks.get(parks.size() - 1) <= CreditRule.MAX_WAIT_NANOS);
        idle.reset();
        assertFalse(idle.waitedLongest(), "a new wait starts short");
        assertFalse(idle.idle(), "and spins first");
    }
}
