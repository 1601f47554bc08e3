package io.github.sockmap4j.agent.control;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** Trust III, row 11: a flood of refusals costs the log a bounded number of lines a window. */
class BoundedLogTest {
    private final long[] now = {0};
    private final List<String> lines = new ArrayList<>();
    private final BoundedLog log = new BoundedLog("refusals", 10, TimeUnit.SECONDS.toNanos(10), () -> now[0], lines::add);

    @Test
    void aFloodIsLoggedOneByOneUpToTheWindowsShareThenSummedUpByUid() {
        for (int i = 0; i < 52_956; i++) {
            log.log(1000 + i % 3, "Refused a connection of uid {} (pid {}): {}", 1000 + i % 3, i, "at its limit");
        }
        assertEquals(10, lines.size(), "one by one only the window's share");
        assertEquals("Refused a connection of uid 1000 (pid 0): at its limit", lines.getFirst());
        log.flush();
        assertEquals(10, lines.size(), "nothing told before the window has passed");
        now[0] += TimeUnit.SECONDS.toNanos(10);
        log.flush();
        assertEquals(11, lines.size());
        String summary = lines.getLast();
        assertTrue(summary.startsWith("52946 more refusals in 10 s than the 10 logged one by one"), summary);
        assertTrue(summary.contains("uid 1000: 17648") && summary.contains("uid 1001: 17649")
                && summary.contains("uid 1002: 17649"), summary);
        log.flush();
        assertEquals(11, lines.size(), "a window that held nothing tells nothing");
        log.log(7, "again {}", 1);
        assertEquals("again 1", lines.getLast(), "a new window logs one by one again");
    }

    @Test
    void uidsBeyondTheCountedOnesAreSummedTogether() {
        for (int uid = 0; uid < BoundedLog.MAX_UIDS + 500; uid++) {
            log.log(100_000 + uid, "Refused {}", uid);
        }
        now[0] += TimeUnit.SECONDS.toNanos(11);
        log.log(1, "next");
        assertEquals(12, lines.size(), "the window's share, the summary, then the next line");
        String summary = lines.get(10);
        assertTrue(summary.startsWith((BoundedLog.MAX_UIDS + 490) + " more refusals in 11 s"), summary);
        assertTrue(summary.contains("other uid(s)"), summary);
        assertEquals("next", lines.get(11));
    }
}
