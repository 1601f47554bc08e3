package io.github.sockmap4j.examples.rag;

import io.github.sockmap4j.plots.Plots;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.ToDoubleFunction;

/**
 * The demo's load curve: both paths measured, paired, at fixed fractions of plain TCP's maximum
 * throughput (measured closed-loop in the same round), so that where the fast path pays shows
 * against the load a node carries rather than at one rate. A user's service at light load and the
 * same service near its knee see different things: at light load a request's time is mostly
 * wake-ups that any socket costs; near the knee the CPU the fast path saves is queueing avoided.
 */
final class LoadCurve {
    /** The fractions of plain TCP's maximum offered by default. */
    static final List<Double> DEFAULT_LOADS = List.of(0.10, 0.40, 0.70, 0.85);

    /** One load of one round: the fraction of plain TCP's maximum, the rate offered, and each path's run. */
    record Point(double load, double rate, RagReport.Run plain, RagReport.Run fast) {
    }

    private LoadCurve() {
    }

    /**
     * The loads of {@code --loads}, checked: each above 0 and at most 2 (twice plain TCP's maximum).
     *
     * @throws IllegalArgumentException naming the value that is not a load
     */
    static List<Double> parse(List<String> loads) {
        List<Double> out = new ArrayList<>();
        for (String s : loads) {
            double f;
            try {
                f = Double.parseDouble(s.trim());
            } catch (NumberFormatException e) {
                f = Double.NaN;
            }
            if (!(f > 0 && f <= 2)) {
                throw new IllegalArgumentException("--loads are fractions of plain TCP's maximum throughput, above 0 "
                        + "and at most 2 (0.4 for 40%), not '" + s + "'");
            }
            out.add(f);
        }
        if (out.isEmpty()) {
            throw new IllegalArgumentException("--loads needs at least one fraction");
        }
        return out;
    }

    /** The CPU of every stage, with their pods' sidecar proxies on a meshed node. */
    static double allStagesCpu(RagReport.Run r) {
        return r.allPodsCpuPercent();
    }

    /**
     * {@link #allStagesCpu} less the share of the stages' JIT compilers in it: what a service long
     * past its warm-up spends at this load. The compilers' part is a one-off cost of young JVMs
     * that lands on one path's slices or the other's; NaN where the thread kinds were not read.
     */
    static double allStagesCpuButJit(RagReport.Run r) {
        double all = RagReport.allStages(r.cpuMicrosByKind(), null);
        double butJit = RagReport.allStages(r.cpuMicrosByKind(), ThreadKind.JIT);
        double proxies = Math.max(0, r.proxyCpuPercent());
        return all > 0 ? (allStagesCpu(r) - proxies) * butJit / all + proxies : Double.NaN;
    }

    /** The curve's table: by load, the median over {@code rounds} of each path's figure, and fast/plain. */
    static void print(PrintStream out, List<List<Point>> rounds) {
        int rows = rounds.get(0).size();
        String title = rounds.size() > 1 ? " (median of " + rounds.size() + " rounds)" : "";
        boolean meshed = rounds.get(0).get(0).plain().proxyCpuPercent() >= 0;
        out.println("| offered load" + title + " | requests/s | P50 ms, plain / fast (fast/plain) | P99 ms | P99.9 ms "
                + (meshed ? "| CPU % of all pods (stages and sidecars) " : "| CPU % of all stages ")
                + "| the same but their JIT compilers | failed, plain / fast |");
        out.println("|---|---:|---:|---:|---:|---:|---:|---:|");
        for (int k = 0; k < rows; k++) {
            List<RagReport.Run> plain = new ArrayList<>();
            List<RagReport.Run> fast = new ArrayList<>();
            double[] rate = new double[rounds.size()];
            for (int r = 0; r < rounds.size(); r++) {
                Point p = rounds.get(r).get(k);
                plain.add(p.plain());
                fast.add(p.fast());
                rate[r] = p.rate();
            }
            java.util.Arrays.sort(rate);
            out.printf(Locale.ROOT, "| %.0f%% of plain TCP's maximum | %.0f | %s | %s | %s | %s | %s | %d / %d |%n",
                    100 * rounds.get(0).get(k).load(), RagReport.quantile(rate, 0.5),
                    cell(plain, fast, r -> millis(r, 50), "%.2f"), cell(plain, fast, r -> millis(r, 99), "%.2f"),
                    cell(plain, fast, r -> millis(r, 99.9), "%.2f"), cell(plain, fast, LoadCurve::allStagesCpu, "%.1f"),
                    cell(plain, fast, LoadCurve::allStagesCpuButJit, "%.1f"),
                    plain.stream().mapToLong(RagReport.Run::failed).sum(), fast.stream().mapToLong(RagReport.Run::failed).sum());
        }
    }

    private static double millis(RagReport.Run r, double percentile) {
        return r.latency().getTotalCount() == 0 ? Double.NaN : r.latency().getValueAtPercentile(percentile) / 1000.0;
    }

    private static String cell(List<RagReport.Run> plain, List<RagReport.Run> fast, ToDoubleFunction<RagReport.Run> f,
            String fmt) {
        double p = RagReport.median(plain, f);
        double q = RagReport.median(fast, f);
        String ratio = p > 0 && q >= 0 ? String.format(Locale.ROOT, " (%.2f)", q / p) : "";
        return String.format(Locale.ROOT, fmt + " / " + fmt, p, q) + ratio;
    }

    /** Where {@link #plot} writes the CPU plot beside {@code latency}: NAME-cpu.png. */
    static Path cpuFileFor(Path latency) {
        String name = latency.getFileName().toString();
        String base = name.endsWith(".png") ? name.substring(0, name.length() - 4) : name;
        return latency.resolveSibling(base + "-cpu.png");
    }

    /**
     * Writes P50, P99 and P99.9 against the offered load to {@code latency}, and the CPU of all
     * stages against the offered load to {@link #cpuFileFor}: at each load the median over the
     * rounds, as the table has it.
     */
    static void plot(Path latency, List<List<Point>> rounds) throws IOException {
        Map<String, List<double[]>> lat = new LinkedHashMap<>();
        Map<String, List<double[]>> cpu = new LinkedHashMap<>();
        for (boolean fast : new boolean[] {false, true}) {
            String path = fast ? "sockmap fast path" : "plain TCP";
            for (double pct : new double[] {50, 99, 99.9}) {
                lat.put(path + ", P" + (pct == 99.9 ? "99.9" : Integer.toString((int) pct)),
                        medians(rounds, fast, r -> millis(r, pct)));
            }
            cpu.put(path, medians(rounds, fast, LoadCurve::allStagesCpu));
            cpu.put(path + ", but the JIT compilers", medians(rounds, fast, LoadCurve::allStagesCpuButJit));
        }
        Plots.lines(latency, "RAG pipeline: request latency against offered load (from each request's scheduled start)",
                "offered load (requests/s)", "latency (ms, log scale)", lat, true);
        Plots.lines(cpuFileFor(latency), "RAG pipeline: CPU of all stages against offered load",
                "offered load (requests/s)", "CPU % of all stages (100 = one CPU)", cpu, false);
    }

    /** For each load: {the median rate offered, the median of {@code f} over the rounds} for one path. */
    private static List<double[]> medians(List<List<Point>> rounds, boolean fast, ToDoubleFunction<RagReport.Run> f) {
        List<double[]> out = new ArrayList<>();
        for (int k = 0; k < rounds.get(0).size(); k++) {
            double[] rate = new double[rounds.size()];
            List<RagReport.Run> runs = new ArrayList<>();
            for (int r = 0; r < rounds.size(); r++) {
                rate[r] = rounds.get(r).get(k).rate();
                runs.add(fast ? rounds.get(r).get(k).fast() : rounds.get(r).get(k).plain());
            }
            java.util.Arrays.sort(rate);
            out.add(new double[] {RagReport.quantile(rate, 0.5), RagReport.median(runs, f)});
        }
        return out;
    }
}
