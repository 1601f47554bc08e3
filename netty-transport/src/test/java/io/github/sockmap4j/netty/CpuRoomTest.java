package io.github.sockmap4j.netty;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The polling gate's rule under readings it is given: when it closes, when it opens again. */
class CpuRoomTest {
    private static final long PERIOD = 50_000_000;

    /** A rule fed one period a reading, each period with {@code percent}% of it waited. */
    private static boolean feed(CpuRoom.Rule rule, long[] clock, int percent) {
        clock[0] += PERIOD;
        clock[1] += PERIOD / 1000 * percent / 100;
        return rule.update(clock[0], clock[1]);
    }

    @Test
    void closesAboveTheBusyShareAndOpensOnlyBelowTheRoomyOne() {
        CpuRoom.Rule rule = new CpuRoom.Rule();
        long[] clock = {1_000_000_000, 5_000};
        assertTrue(rule.update(clock[0], clock[1]), "the first reading only sets the base");
        assertTrue(feed(rule, clock, CpuRoom.BUSY_PERCENT - 1), "under the busy share: room");
        assertFalse(feed(rule, clock, CpuRoom.BUSY_PERCENT + 5), "over it: none");
        assertFalse(feed(rule, clock, (CpuRoom.BUSY_PERCENT + CpuRoom.ROOMY_PERCENT) / 2), "between the two: still none");
        assertTrue(feed(rule, clock, CpuRoom.ROOMY_PERCENT - 2), "under the roomy share: room again");
        assertTrue(feed(rule, clock, (CpuRoom.BUSY_PERCENT + CpuRoom.ROOMY_PERCENT) / 2), "between the two: still room");
    }

    @Test
    void aReadingAtTheSameTimeChangesNothingAndATotalThatRanBackCountsAsNoWait() {
        CpuRoom.Rule rule = new CpuRoom.Rule();
        long[] clock = {0, 0};
        rule.update(clock[0], clock[1]);
        assertFalse(feed(rule, clock, 100));
        assertFalse(rule.update(clock[0], clock[1] + 1_000_000), "no time passed: the same answer");
        assertTrue(rule.update(clock[0] + PERIOD, 0), "a total that ran back counts as no wait");
    }

    /** Whatever the readings, the gate changes only across its shares: closes above busy, opens below roomy. */
    @Property
    void theGateMovesOnlyAcrossItsShares(@ForAll @Size(min = 1, max = 60) List<@IntRange(min = 0, max = 100) Integer> percents) {
        CpuRoom.Rule rule = new CpuRoom.Rule();
        long[] clock = {0, 0};
        boolean room = rule.update(clock[0], clock[1]);
        for (int p : percents) {
            boolean now = feed(rule, clock, p);
            if (room && !now) {
                assertTrue(p > CpuRoom.BUSY_PERCENT, "closed at " + p + "%");
            } else if (!room && now) {
                assertTrue(p < CpuRoom.ROOMY_PERCENT, "opened at " + p + "%");
            } else if (room) {
                assertTrue(p <= CpuRoom.BUSY_PERCENT, "stayed open at " + p + "%");
            } else {
                assertTrue(p >= CpuRoom.ROOMY_PERCENT, "stayed shut at " + p + "%");
            }
            room = now;
        }
    }

    @Test
    void aGateWithNoPressureNeverCloses() {
        for (int i = 0; i < 1000; i++) {
            assertTrue(CpuRoom.ALWAYS.hasRoom());
        }
    }
}
