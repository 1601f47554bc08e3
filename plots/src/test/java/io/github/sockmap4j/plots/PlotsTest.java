package io.github.sockmap4j.plots;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.HdrHistogram.Histogram;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** How series are told apart, and a plot written for real (headless). */
class PlotsTest {
    @Test
    void roundsOfOnePathShareAColourAndDifferInDash() {
        int[][] s = Plots.styles(List.of("plain TCP #1", "sockmap fast path #1", "sockmap fast path #2", "plain TCP #2",
                "plain TCP #3"));
        assertArrayEquals(new int[][] {{0, 0}, {1, 0}, {1, 1}, {0, 1}, {0, 2}}, s);
    }

    @Test
    void namesWithoutARoundEachTakeAColourPastThePaletteADash() {
        int[][] s = Plots.styles(List.of("a", "b", "c", "d", "e", "f", "g", "h"));
        for (int i = 0; i < 6; i++) {
            assertArrayEquals(new int[] {i, 0}, s[i], "series " + i);
        }
        assertArrayEquals(new int[] {0, 1}, s[6], "the seventh: the first colour, dashed");
        assertArrayEquals(new int[] {1, 1}, s[7]);
    }

    @Test
    void writesAPng(@TempDir Path dir) throws IOException {
        Map<String, Histogram> series = Plots.series();
        for (String name : List.of("plain TCP #1", "plain TCP #2", "fast #1")) {
            Histogram h = new Histogram(3);
            for (int v = 1; v <= 1000; v++) {
                h.recordValue(v);
            }
            series.put(name, h);
        }
        Path png = dir.resolve("p.png");
        Plots.percentiles(png, "test", series, 1000, true);
        byte[] head = Files.readAllBytes(png);
        assertTrue(head.length > 8 && head[1] == 'P' && head[2] == 'N' && head[3] == 'G', "a PNG");
    }

    @Test
    void writesLinesAgainstLoadLeavingOutNaNs(@TempDir Path dir) throws IOException {
        Map<String, List<double[]>> series = new java.util.LinkedHashMap<>();
        series.put("plain TCP, P50", List.of(new double[] {100, 3.1}, new double[] {400, 3.4}, new double[] {700, Double.NaN}));
        series.put("plain TCP, P99", List.of(new double[] {100, 9.0}, new double[] {400, 12.0}));
        series.put("fast, P50", List.of(new double[] {100, 2.9}, new double[] {400, 3.0}));
        Path png = dir.resolve("curve.png");
        Plots.lines(png, "test", "offered load (requests/s)", "latency (ms)", series, true);
        byte[] head = Files.readAllBytes(png);
        assertTrue(head.length > 8 && head[1] == 'P' && head[2] == 'N' && head[3] == 'G', "a PNG");
    }
}
