package io.github.sockmap4j.netty;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.LongRange;
import net.jqwik.api.constraints.Size;
import org.junit.jupiter.api.Test;

/** The poll window's rule, without a loop: grows on short blocks, ends on long ones, never past its cap. */
class PollWindowTest {
    static final long MAX = 50_000;
    static final long START = 5_000;

    @Test
    void startsClosedAndOpensByDoublingAfterShortBlocks() {
        PollWindow w = new PollWindow(MAX, START);
        assertEquals(0, w.nanos(), "a new loop polls not at all");
        w.blocked(20_000);
        assertEquals(START, w.nanos());
        w.blocked(20_000);
        assertEquals(2 * START, w.nanos());
        w.blocked(20_000);
        assertEquals(4 * START, w.nanos());
        w.blocked(20_000);
        assertEquals(4 * START, w.nanos(), "a window longer than the blocks grows no more");
    }

    @Test
    void closesByHalvingAfterBlocksLongerThanTheCap() {
        PollWindow w = new PollWindow(MAX, START);
        for (int i = 0; i < 10; i++) {
            w.blocked(MAX);
        }
        assertEquals(MAX, w.nanos());
        w.blocked(MAX + 1);
        assertEquals(MAX / 2, w.nanos());
        w.blocked(10 * MAX);
        w.blocked(10 * MAX);
        assertEquals(MAX / 8, w.nanos());
        w.blocked(10 * MAX);
        assertEquals(0, w.nanos(), "below the first window it closes");
    }

    @Test
    void aCapOfZeroNeverPolls() {
        PollWindow w = new PollWindow(0, START);
        w.blocked(1);
        w.blocked(0);
        assertEquals(0, w.nanos());
        assertThrows(IllegalArgumentException.class, () -> new PollWindow(-1, START));
        assertThrows(IllegalArgumentException.class, () -> new PollWindow(MAX, 0));
    }

    @Property
    void theWindowStaysWithinItsCapAndIsZeroOrAtLeastTheFirstWindow(
            @ForAll @Size(max = 200) java.util.List<@LongRange(min = 0, max = 1_000_000) Long> blocks) {
        PollWindow w = new PollWindow(MAX, START);
        for (long b : blocks) {
            w.blocked(b);
            assertTrue(w.nanos() == 0 || w.nanos() >= START && w.nanos() <= MAX, "window " + w.nanos());
        }
    }

    @Test
    void aPollThatFoundWorkDoublesAnOpenWindowOnly() {
        PollWindow w = new PollWindow(MAX, START);
        w.found();
        assertEquals(0, w.nanos(), "a closed window is opened by short blocks, not by reports");
        w.blocked(1_000);
        w.found();
        assertEquals(2 * START, w.nanos());
        for (int i = 0; i < 10; i++) {
            w.found();
        }
        assertEquals(MAX, w.nanos());
        w.blocked(MAX + 1);
        w.found();
        assertEquals(MAX, w.nanos(), "one long sleep among polls that pay leaves the window open");
    }

    @Property
    void withReportsTheWindowStaysWithinItsCapAndIdleClosesIt(
            @ForAll @Size(max = 200) java.util.List<@LongRange(min = -1, max = 1_000_000) Long> events) {
        PollWindow w = new PollWindow(MAX, START);
        for (long e : events) {
            if (e < 0) {
                w.found(); // -1: a poll found work
            } else {
                w.blocked(e);
            }
            assertTrue(w.nanos() == 0 || w.nanos() >= START && w.nanos() <= MAX, "window " + w.nanos());
        }
        for (int i = 0; i < 5; i++) {
            w.blocked(MAX + 1);
        }
        assertEquals(0, w.nanos(), "after any history, five sleeps longer than the cap close the window");
    }

    @Property
    void anIdleLoopStopsPollingWithinFiveLongBlocks(@ForAll @Size(max = 100) java.util.List<@LongRange(min = 0,
            max = 1_000_000) Long> before) {
        PollWindow w = new PollWindow(MAX, START);
        before.forEach(w::blocked);
        for (int i = 0; i < 5; i++) {
            w.blocked(MAX + 1);
        }
        assertEquals(0, w.nanos(), "after any history, five blocks longer than the cap close the window");
    }
}
