package io.github.sockmap4j.examples.rag;

import java.io.PrintStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.HdrHistogram.Histogram;

/**
 * The demo's table: for each metric the median over the rounds of each path, plain TCP and the
 * fast path, and their ratio where the two are comparable; then the failed requests and the
 * threads that used the most CPU while idle.
 */
final class RagReport {
    /** What one path measured in one round. */
    record Run(boolean fast, Histogram latency, double offeredRps, double achievedRps, long failed, double maxRps,
            Map<RagService.Role, Double> cpuPercent, Map<RagService.Role, Long> rss, double loadGenCpuPercent,
            double systemCpuPercent,
            long verdictRuns, long bytesRedirected, long bytesPassed, long boundHits,
            Map<RagService.Role, Double> idleCpuPercent, Map<String, Double> idleThreads,
            double runQueueMillisPerRequest, Map<RagService.Role, Map<ThreadKind, Double>> cpuMicrosByKind,
            Map<RagService.Role, Map<ThreadKind, Double>> wakeupsByKind, TimeBudget budget, List<PathMeter.Slice> slices,
            double proxyCpuPercent) {
        /** The CPU % of every stage, with their pods' sidecar proxies on a meshed node; NaN where one is unknown. */
        double allPodsCpuPercent() {
            double sum = proxyCpuPercent > 0 ? proxyCpuPercent : 0;
            for (double c : cpuPercent.values()) {
                if (c < 0) {
                    return Double.NaN;
                }
                sum += c;
            }
            return sum;
        }
    }

    private final PrintStream out;
    private final int rounds;
    private final double rate;
    private final double throughputSeconds;
    private final int inFlight;
    private final boolean inProcess;
    private final double idleSeconds;

    RagReport(PrintStream out, int rounds, double rate, double throughputSeconds, int inFlight, boolean inProcess,
              double idleSeconds) {
        this.out = out;
        this.rounds = rounds;
        this.rate = rate;
        this.throughputSeconds = throughputSeconds;
        this.inFlight = inFlight;
        this.inProcess = inProcess;
        this.idleSeconds = idleSeconds;
    }

    void print(List<Run> plain, List<Run> fast) {
        boolean both = !plain.isEmpty() && !fast.isEmpty();
        String title = rounds > 1 ? " (median of " + rounds + " rounds)" : "";
        out.println("| metric" + title + " | plain TCP | sockmap fast path | fast/plain |");
        out.println("|---|---:|---:|---:|");
        row("P50 latency (ms)", plain, fast, r -> r.latency().getValueAtPercentile(50) / 1000.0, "%.2f", both);
        row("P99 latency (ms)", plain, fast, r -> r.latency().getValueAtPercentile(99) / 1000.0, "%.2f", both);
        row("P99.9 latency (ms)", plain, fast, r -> r.latency().getValueAtPercentile(99.9) / 1000.0, "%.2f", both);
        row(String.format(Locale.ROOT, "throughput at %.0f rps offered", rate), plain, fast, Run::achievedRps, "%.1f", both);
        if (throughputSeconds > 0) {
            row("max throughput (rps, " + inFlight + " in flight)", plain, fast, Run::maxRps, "%.1f", both);
        }
        for (RagService.Role role : RagService.Role.values()) {
            if (!inProcess) {
                row("CPU % " + role.name().toLowerCase(Locale.ROOT), plain, fast, r -> r.cpuPercent().get(role), "%.1f", both);
            }
        }
        if (!inProcess) {
            row("CPU % all stages", plain, fast,
                    r -> r.cpuPercent().values().stream().mapToDouble(Double::doubleValue).sum(), "%.1f", both);
            row("  of which in the kernel", plain, fast, Run::systemCpuPercent, "%.1f", both);
            if (plain.stream().anyMatch(r -> r.proxyCpuPercent() >= 0)) {
                row("CPU % sidecar proxies (every pod's)", plain, fast, Run::proxyCpuPercent, "%.1f", both);
                row("CPU % all pods (stages + proxies)", plain, fast, Run::allPodsCpuPercent, "%.1f", both);
            }
        }
        row("ms a request waiting for a CPU (stages' and load's threads)", plain, fast, Run::runQueueMillisPerRequest, "%.2f", both);
        row(inProcess ? "CPU % (this JVM: stages + load)" : "CPU % load generator", plain, fast, Run::loadGenCpuPercent, "%.1f", both);
        if (!inProcess && idleSeconds > 0) {
            row(String.format(Locale.ROOT, "CPU %% all stages idle (%.0f s, no traffic)", idleSeconds), plain, fast,
                    r -> r.idleCpuPercent().values().stream().mapToDouble(Double::doubleValue).sum(), "%.3f", false);
            row("  of which sockmap4j's threads (sockmap4j-*)", plain, fast,
                    r -> r.idleThreads().entrySet().stream().filter(e -> e.getKey().contains("/sockmap"))
                            .mapToDouble(Map.Entry::getValue).sum(), "%.3f", false);
        }
        if (!inProcess) {
            for (RagService.Role role : RagService.Role.values()) {
                row("RSS MiB " + role.name().toLowerCase(Locale.ROOT), plain, fast, r -> r.rss().get(role) / 1048576.0, "%.0f", both);
            }
        }
        row("sk_msg runs (kernel run_cnt)", plain, fast, r -> (double) r.verdictRuns(), "%,.0f", false);
        row("MiB redirected (opted-in sockets)", plain, fast, r -> r.bytesRedirected() / 1048576.0, "%.1f", false);
        row("MiB sent by TCP from opted-in sockets", plain, fast, r -> r.bytesPassed() / 1048576.0, "%.1f", false);
        row("in-flight bound hits", plain, fast, r -> (double) r.boundHits(), "%,.0f", false);
        printSlicePairs(plain, fast);
        printBudget(plain, fast, both);
        if (!inProcess) {
            printByKind(plain, fast, both);
        }
        out.printf(Locale.ROOT, "%nfailed requests: plain %d, fast %d. CPU %%: 100 = one CPU, over the fixed-rate phase. "
                + "Latency counts from each request's scheduled start. Waiting for a CPU: the time the stages' and "
                + "the load generator's threads (not the JVMs' JIT compilers, GC and VM threads) were runnable but "
                + "not running (schedstat), summed, per request of the fixed-rate phase.%n",
                plain.stream().mapToLong(Run::failed).sum(), fast.stream().mapToLong(Run::failed).sum());
        for (List<Run> runs : List.of(plain, fast)) {
            if (!runs.isEmpty() && !runs.get(runs.size() - 1).idleThreads().isEmpty()) {
                Run last = runs.get(runs.size() - 1);
                StringBuilder b = new StringBuilder();
                last.idleThreads().entrySet().stream().sorted((x, y) -> Double.compare(y.getValue(), x.getValue()))
                        .limit(6).forEach(e -> b.append(b.length() == 0 ? "" : ", ")
                                .append(String.format(Locale.ROOT, "%s %.3f%%", e.getKey(), e.getValue())));
                out.println("idle threads, " + (last.fast() ? "fast path" : "plain TCP") + " (last round, % of a CPU): " + b);
            }
        }
    }

    /**
     * CPU a request by stage and thread kind, where either path spent at least 1 µs a request in
     * it (which of a stage's threads the fast path makes cheaper or dearer), then the wake-ups a
     * request of the event loops and the handlers (what the hand-offs between them cost).
     */
    private void printByKind(List<Run> plain, List<Run> fast, boolean both) {
        table("CPU µs a request, by stage and thread kind", List.of(ThreadKind.values()), Run::cpuMicrosByKind, 1,
                "%.0f", plain, fast, both);
        row("all stages: all threads but the JIT compilers", plain, fast,
                r -> allStages(r.cpuMicrosByKind(), ThreadKind.JIT), "%.0f", both);
        table("wake-ups a request (voluntary context switches), by stage and thread kind",
                List.of(ThreadKind.EVENT_LOOPS, ThreadKind.HANDLERS), Run::wakeupsByKind, 0.05, "%.2f", plain, fast, both);
    }

    /**
     * A table of {@code metric} by stage: a row for each of {@code kinds} where either path has at
     * least {@code least}, a stage's all threads, and all stages' all threads last.
     */
    private void table(String title, List<ThreadKind> kinds,
            java.util.function.Function<Run, Map<RagService.Role, Map<ThreadKind, Double>>> metric, double least,
            String fmt, List<Run> plain, List<Run> fast, boolean both) {
        out.println();
        out.println("| " + title + " | plain TCP | sockmap fast path | fast/plain |");
        out.println("|---|---:|---:|---:|");
        for (RagService.Role role : RagService.Role.values()) {
            String stage = role.name().toLowerCase(Locale.ROOT);
            for (ThreadKind k : kinds) {
                java.util.function.ToDoubleFunction<Run> f = r -> metric.apply(r).getOrDefault(role, Map.of())
                        .getOrDefault(k, Double.NaN);
                if (Math.max(nanToZero(median(plain, f)), nanToZero(median(fast, f))) >= least) {
                    row(stage + ": " + k.label, plain, fast, f, fmt, both);
                }
            }
            row(stage + ": all threads", plain, fast,
                    r -> allStages(Map.of(role, metric.apply(r).getOrDefault(role, Map.of())), null), fmt, both);
        }
        row("all stages: all threads", plain, fast, r -> allStages(metric.apply(r), null), fmt, both);
    }

    /**
     * A round's CPU a request summed over the stages of {@code byKind} and their thread kinds, less
     * {@code leftOut}'s (null: none); a kind nobody measured (NaN) adds nothing. Without the JIT
     * compilers it is what a service long past its warm-up spends, and what the transport can move:
     * a compile burst in the measured phase lands on one path or the other.
     */
    static double allStages(Map<RagService.Role, Map<ThreadKind, Double>> byKind, ThreadKind leftOut) {
        double sum = 0;
        for (Map<ThreadKind, Double> kinds : byKind.values()) {
            for (Map.Entry<ThreadKind, Double> e : kinds.entrySet()) {
                if (e.getKey() != leftOut && !Double.isNaN(e.getValue())) {
                    sum += e.getValue();
                }
            }
        }
        return sum;
    }

    /**
     * A request's time, mean over the fixed-rate phase: each stage's own work, each hop and its
     * part outside the called stage, the waits for a CPU; the ratio of "the rest" rows is what the
     * fast path leaves of it.
     */
    private void printBudget(List<Run> plain, List<Run> fast, boolean both) {
        out.println();
        out.println("| a request's time, mean (ms) | plain TCP | sockmap fast path | fast/plain |");
        out.println("|---|---:|---:|---:|");
        row("the request, as the load generator saw it", plain, fast, r -> r.budget().requestMillis(), "%.2f", both);
        row("  the stages' own work (handlers)", plain, fast, r -> r.budget().ownTotal(), "%.2f", both);
        row("  the rest: network, hand-offs, waits", plain, fast, r -> r.budget().rest(), "%.2f", both);
        row("gateway: own work (handler less its calls)", plain, fast,
                r -> r.budget().ownMillis().getOrDefault(RagService.Role.GATEWAY, Double.NaN), "%.2f", both);
        for (RagService.Role hop : TimeBudget.HOPS) {
            String s = hop.name().toLowerCase(Locale.ROOT);
            row("gateway -> " + s + ": the call", plain, fast, r -> r.budget().hopMillis().getOrDefault(hop, Double.NaN),
                    "%.2f", both);
            row("  " + s + "'s own work (handler)", plain, fast, r -> r.budget().ownMillis().getOrDefault(hop, Double.NaN),
                    "%.2f", both);
            row("  the rest of the hop: network, hand-offs, waits", plain, fast, r -> r.budget().hopRest(hop), "%.2f", both);
        }
        if (fast.stream().anyMatch(r -> !Double.isNaN(r.budget().lentPerRequest()))) {
            row("messages lent a request (bodies left in shared memory, all stages)", plain, fast,
                    r -> r.budget().lentPerRequest(), "%.2f", both);
        }
        for (RagService.Role role : RagService.Role.values()) {
            row(role.name().toLowerCase(Locale.ROOT) + "'s threads waiting for a CPU (summed)", plain, fast,
                    r -> r.budget().waitMillis().getOrDefault(role, Double.NaN), "%.2f", both);
        }
    }

    /**
     * With both paths measured in slices: fast/plain of each slice and its pair's (the i-th of each
     * path in a round), over every round, as min, quartiles and max. Unlike the medians over rounds
     * above, a slice that a stall of the machine hit moves one pair of many.
     */
    private void printSlicePairs(List<Run> plain, List<Run> fast) {
        List<double[]> pairs = new ArrayList<>();
        for (int r = 0; r < Math.min(plain.size(), fast.size()); r++) {
            List<PathMeter.Slice> a = plain.get(r).slices();
            List<PathMeter.Slice> b = fast.get(r).slices();
            for (int i = 0; i < Math.min(a.size(), b.size()) && a.size() > 1; i++) {
                pairs.add(new double[] {b.get(i).p50Millis() / a.get(i).p50Millis(),
                    b.get(i).cpuPercent() / a.get(i).cpuPercent()});
            }
        }
        if (pairs.isEmpty()) {
            return;
        }
        out.printf(Locale.ROOT, "%nfast/plain by slice pair (%d pairs), min / lower quartile / median / upper quartile / max: "
                + "P50 %s; CPU of all stages %s%n", pairs.size(), quartiles(pairs, 0), quartiles(pairs, 1));
    }

    private static String quartiles(List<double[]> pairs, int at) {
        double[] v = pairs.stream().mapToDouble(p -> p[at]).filter(x -> !Double.isNaN(x)).sorted().toArray();
        if (v.length == 0) {
            return "-";
        }
        return String.format(Locale.ROOT, "%.2f / %.2f / %.2f / %.2f / %.2f", v[0], quantile(v, 0.25), quantile(v, 0.5),
                quantile(v, 0.75), v[v.length - 1]);
    }

    /** The {@code q}-quantile of sorted {@code v}, interpolated between neighbours. */
    static double quantile(double[] v, double q) {
        double at = q * (v.length - 1);
        int lo = (int) Math.floor(at);
        int hi = Math.min(lo + 1, v.length - 1);
        return v[lo] + (at - lo) * (v[hi] - v[lo]);
    }

    private static double nanToZero(double v) {
        return Double.isNaN(v) ? 0 : v;
    }

    private void row(String name, List<Run> plain, List<Run> fast, java.util.function.ToDoubleFunction<Run> f,
            String fmt, boolean ratio) {
        double p = median(plain, f);
        double q = median(fast, f);
        out.printf(Locale.ROOT, "| %s | %s | %s | %s |%n", name, cell(p, fmt), cell(q, fmt),
                ratio && p > 0 && q >= 0 && !Double.isNaN(p) && !Double.isNaN(q) ? String.format(Locale.ROOT, "%.2f", q / p) : "");
    }

    private static String cell(double v, String fmt) {
        return Double.isNaN(v) || v < 0 ? "-" : String.format(Locale.ROOT, fmt, v);
    }

    static double median(List<Run> runs, java.util.function.ToDoubleFunction<Run> f) {
        if (runs.isEmpty()) {
            return Double.NaN;
        }
        double[] v = runs.stream().mapToDouble(f).sorted().toArray();
        return v.length % 2 == 1 ? v[v.length / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
    }

    /**
     * Nothing went through the redirect: a failure, but where the stages may agree on co-located
     * connections (the default; -Dsockmap4j.colocated=false turns it off), whose calls go over shared rings the redirect's
     * counters do not see.
     */
    static int nothingRedirected(PrintStream out) {
        if (io.github.sockmap4j.colocated.grpc.ColocatedGrpc.enabled()) {
            out.println("\nThe fast path's redirect carried nothing: with the co-located transport on its stages' calls "
                    + "go over co-located connections where they agree (shared rings; docs/colocated.md), which the "
                    + "redirect's counters do not see; the stages' co-located threads (sockmap4j-coloc) above show "
                    + "where they did");
            return 0;
        }
        out.println("\nWARNING: nothing went through the redirect; see the log lines above for why");
        return 1;
    }
}
