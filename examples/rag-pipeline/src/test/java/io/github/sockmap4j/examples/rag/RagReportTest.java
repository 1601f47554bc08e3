package io.github.sockmap4j.examples.rag;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.EnumMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The report's sums and quantiles, as the demo prints them. */
class RagReportTest {
    @Test
    void quantilesInterpolateBetweenNeighbours() {
        double[] five = {0.8, 0.9, 1.0, 1.1, 1.2};
        assertEquals(0.8, RagReport.quantile(five, 0), 1e-12);
        assertEquals(0.9, RagReport.quantile(five, 0.25), 1e-12);
        assertEquals(1.0, RagReport.quantile(five, 0.5), 1e-12);
        assertEquals(1.2, RagReport.quantile(five, 1), 1e-12);
        assertEquals(1.5, RagReport.quantile(new double[] {1, 2}, 0.5), 1e-12, "an even count: between the middle two");
        assertEquals(3.25, RagReport.quantile(new double[] {1, 2, 3, 4}, 0.75), 1e-12);
        assertEquals(7, RagReport.quantile(new double[] {7}, 0.25), 1e-12);
    }

    @Test
    void allStagesSumsEveryKindOfEveryStageAndLeavesOutOneKind() {
        Map<RagService.Role, Map<ThreadKind, Double>> byKind = new EnumMap<>(RagService.Role.class);
        byKind.put(RagService.Role.GATEWAY, Map.of(ThreadKind.JIT, 50.0, ThreadKind.HANDLERS, 400.0));
        byKind.put(RagService.Role.SEARCH, Map.of(ThreadKind.JIT, 20.0, ThreadKind.EVENT_LOOPS, 300.0,
                ThreadKind.HANDLERS, Double.NaN));
        byKind.put(RagService.Role.CONTEXT, Map.of());
        assertEquals(770, RagReport.allStages(byKind, null), 1e-9, "a kind nobody measured (NaN) adds nothing");
        assertEquals(700, RagReport.allStages(byKind, ThreadKind.JIT), 1e-9);
        assertEquals(0, RagReport.allStages(Map.of(), ThreadKind.JIT), 1e-9);
    }
}
