package io.github.sockmap4j.examples.rag;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.LongRange;
import org.junit.jupiter.api.Test;

/** A request's time split by stage: the stages' answers read back, and the budget's sums. */
class TimeBudgetTest {
    @Property
    void aTimesLineReadsBackAsItWas(@ForAll @LongRange(min = 0) long handler, @ForAll @LongRange(min = 0) long calls,
            @ForAll @LongRange(min = 0) long h0, @ForAll @LongRange(min = 0) long h1, @ForAll @LongRange(min = 0) long h2,
            @ForAll @LongRange(min = -1) long lent) {
        StageClock.Times t = new StageClock.Times(handler, calls, h0, h1, h2, lent);
        assertEquals(t, StageClock.Times.parse(t.line()));
    }

    @Test
    void aLineThatIsNotAnAnswerIsRefused() {
        assertThrows(IllegalArgumentException.class, () -> StageClock.Times.parse("READY 7000"));
        assertThrows(IllegalArgumentException.class, () -> StageClock.Times.parse("TIMES 1 2 3"));
    }

    @Test
    void theClockSumsWhatItWasTold() {
        StageClock clock = new StageClock();
        StageClock.Times before = clock.now();
        clock.handled(5_000);
        clock.handled(7_000);
        clock.hop(1, 3_000);
        StageClock.Times d = clock.now().minus(before);
        assertEquals(new StageClock.Times(12_000, 2, 0, 3_000, 0, -1), d);
    }

    @Test
    void theGatewaysOwnWorkIsItsHandlerLessItsCallsAndTheRestIsWhatNoHandlerRan() {
        long n = 100;
        Map<RagService.Role, StageClock.Times> times = Map.of(
                // 10 ms in the gateway's handler a request: 2 + 3 + 4 ms in its three calls.
                RagService.Role.GATEWAY, new StageClock.Times(n * 10_000_000, n, n * 2_000_000, n * 3_000_000, n * 4_000_000, -1),
                RagService.Role.EMBEDDING, new StageClock.Times(n * 1_500_000, n, 0, 0, 0, -1),
                RagService.Role.SEARCH, new StageClock.Times(n * 2_500_000, n, 0, 0, 0, -1),
                RagService.Role.CONTEXT, new StageClock.Times(n * 3_000_000, n, 0, 0, 0, -1));
        TimeBudget b = TimeBudget.of(12.0, times, Map.of(RagService.Role.SEARCH, n * 400_000L), n);
        assertEquals(1.0, b.ownMillis().get(RagService.Role.GATEWAY), 1e-9);
        assertEquals(0.5, b.hopRest(RagService.Role.EMBEDDING), 1e-9);
        assertEquals(0.5, b.hopRest(RagService.Role.SEARCH), 1e-9);
        assertEquals(1.0, b.hopRest(RagService.Role.CONTEXT), 1e-9);
        assertEquals(8.0, b.ownTotal(), 1e-9);
        assertEquals(4.0, b.rest(), 1e-9);
        assertEquals(0.4, b.waitMillis().get(RagService.Role.SEARCH), 1e-9);
        assertTrue(Double.isNaN(b.waitMillis().get(RagService.Role.CONTEXT)), "a stage whose wait is unknown says so");
        assertTrue(Double.isNaN(b.lentPerRequest()), "stages that could not say what they lent");
    }

    @Test
    void messagesLentAreSummedOverTheStagesAndTheRequests() {
        long n = 50;
        Map<RagService.Role, StageClock.Times> times = Map.of(
                RagService.Role.GATEWAY, new StageClock.Times(n, n, 0, 0, 0, n),
                RagService.Role.EMBEDDING, new StageClock.Times(n, n, 0, 0, 0, 0),
                RagService.Role.SEARCH, new StageClock.Times(n, n, 0, 0, 0, n),
                RagService.Role.CONTEXT, new StageClock.Times(n, n, 0, 0, 0, 0));
        assertEquals(2.0, TimeBudget.of(1.0, times, Map.of(), n).lentPerRequest(), 1e-9);
        StageClock.Times before = new StageClock.Times(0, 0, 0, 0, 0, 7);
        assertEquals(-1, new StageClock.Times(0, 0, 0, 0, 0, -1).minus(before).lent(), "unknown stays unknown");
        assertEquals(3, new StageClock.Times(0, 0, 0, 0, 0, 10).minus(before).lent());
    }

    /** The plot's segments add up to the request's time, and they draw as a PNG of both bars. */
    @Test
    void theBudgetsBarsAddUpToTheRequestAndDraw(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir) throws Exception {
        long n = 10;
        Map<RagService.Role, StageClock.Times> times = Map.of(
                RagService.Role.GATEWAY, new StageClock.Times(n * 10_000_000, n, n * 2_000_000, n * 3_000_000, n * 4_000_000, -1),
                RagService.Role.EMBEDDING, new StageClock.Times(n * 1_500_000, n, 0, 0, 0, -1),
                RagService.Role.SEARCH, new StageClock.Times(n * 2_500_000, n, 0, 0, 0, -1),
                RagService.Role.CONTEXT, new StageClock.Times(n * 3_000_000, n, 0, 0, 0, -1));
        TimeBudget b = TimeBudget.of(12.0, times, Map.of(), n);
        Map<String, Double> seg = BudgetPlot.segments(b);
        assertEquals(7, seg.size(), "work and rest of three hops, and what is outside them: " + seg);
        assertEquals(12.0, seg.values().stream().mapToDouble(Double::doubleValue).sum(), 1e-9);
        assertEquals(3.0, seg.get("outside the hops"), 1e-9);
        java.nio.file.Path png = BudgetPlot.fileFor(dir.resolve("rag.png"));
        assertEquals("rag-budget.png", png.getFileName().toString());
        Map<String, Map<String, Double>> bars = new java.util.LinkedHashMap<>();
        bars.put("plain TCP", seg);
        bars.put("sockmap fast path", seg);
        io.github.sockmap4j.plots.Plots.stackedBars(png, "t", "ms", bars);
        java.awt.image.BufferedImage img = javax.imageio.ImageIO.read(png.toFile());
        assertTrue(img != null && img.getWidth() > 0, "a PNG was written");
    }

    @Test
    void aStageThatCouldNotSayLeavesItsFiguresUnknown() {
        TimeBudget b = TimeBudget.of(5.0, Map.of(), Map.of(), 10);
        assertTrue(Double.isNaN(b.ownTotal()));
        assertTrue(Double.isNaN(b.hopRest(RagService.Role.SEARCH)));
    }
}
