package io.github.sockmap4j.examples.rag;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

/** The report's quantiles of slice-pair ratios: the median and quartiles as the demo prints them. */
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
}
