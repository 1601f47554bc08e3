package io.github.sockmap4j.examples.rag;

import io.github.sockmap4j.plots.Plots;
import java.io.IOException;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * A request's time budget as a picture: one bar per path, a request's mean time stacked hop by
 * hop, each hop split into the called stage's own work and the rest (network, hand-offs, waits),
 * then what is outside the three hops (the gateway's own work and the load generator's hop). The
 * medians over the rounds, as the demo's table prints them.
 */
final class BudgetPlot {
    private BudgetPlot() {
    }

    /** The budget's segments in drawing order; they add up to the request's time. */
    static Map<String, Double> segments(TimeBudget b) {
        Map<String, Double> seg = new LinkedHashMap<>();
        double hops = 0;
        for (RagService.Role hop : TimeBudget.HOPS) {
            String s = hop.name().toLowerCase(Locale.ROOT);
            seg.put(s + "'s work", b.ownMillis().getOrDefault(hop, Double.NaN));
            seg.put(s + " hop: the rest", b.hopRest(hop));
            hops += b.hopMillis().getOrDefault(hop, Double.NaN);
        }
        seg.put("outside the hops", b.requestMillis() - hops);
        return seg;
    }

    /** The PNG next to {@code latencyPlot}: "rag.png" gives "rag-budget.png". */
    static Path fileFor(Path latencyPlot) {
        String name = latencyPlot.getFileName().toString();
        int dot = name.lastIndexOf('.');
        return latencyPlot.resolveSibling((dot > 0 ? name.substring(0, dot) : name) + "-budget.png");
    }

    static void write(Path file, List<RagReport.Run> plain, List<RagReport.Run> fast, double rate) throws IOException {
        Map<String, Map<String, Double>> bars = new LinkedHashMap<>();
        if (!plain.isEmpty()) {
            bars.put("plain TCP", medians(plain));
        }
        if (!fast.isEmpty()) {
            bars.put("sockmap fast path", medians(fast));
        }
        Plots.stackedBars(file, String.format(Locale.ROOT,
                "Where a request's time goes, %.0f requests/s (means a request, median of the rounds)", rate),
                "ms a request", bars);
    }

    private static Map<String, Double> medians(List<RagReport.Run> runs) {
        Map<String, double[]> all = new LinkedHashMap<>();
        for (int i = 0; i < runs.size(); i++) {
            int at = i;
            segments(runs.get(i).budget()).forEach((k, v) -> all.computeIfAbsent(k, x -> new double[runs.size()])[at] = v);
        }
        Map<String, Double> out = new LinkedHashMap<>();
        all.forEach((k, v) -> {
            double[] s = v.clone();
            java.util.Arrays.sort(s);
            out.put(k, s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2);
        });
        return out;
    }
}
