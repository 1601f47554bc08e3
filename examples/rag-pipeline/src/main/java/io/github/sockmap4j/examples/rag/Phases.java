package io.github.sockmap4j.examples.rag;

import java.io.PrintStream;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.function.LongSupplier;

/**
 * The phases of a round of the demo, one job: bringing pipelines to a measured state and
 * measuring them. A warm-up (closed loop, then at the rate until the median settles and the
 * stages' JIT compilers are quiet), the closed-loop throughput, the settling at a load of the
 * curve, and the measured slices of both paths in the order ABBA. {@link RagDemo} reads the
 * command line, starts the pipelines and reports; this class drives them.
 */
final class Phases {
    private final PrintStream out;
    private final double rate;
    private final int inFlight;
    private final double warmupSeconds;
    private final double maxWarmupSeconds;
    private final double throughputSeconds;
    private final int slices;

    /** The demo's settings of the phases: its --rate, --in-flight, --warmup, --max-warmup, --throughput-seconds, --slices. */
    Phases(PrintStream out, double rate, int inFlight, double warmupSeconds, double maxWarmupSeconds,
            double throughputSeconds, int slices) {
        this.out = out;
        this.rate = rate;
        this.inFlight = inFlight;
        this.warmupSeconds = warmupSeconds;
        this.maxWarmupSeconds = maxWarmupSeconds;
        this.throughputSeconds = throughputSeconds;
        this.slices = slices;
    }

    /**
     * The measured phase of both paths at {@code at} requests a second: {@code --slices} slices of
     * {@code perSlice} requests a path, in the order ABBA ABBA... from {@code first}, each after a
     * second at the rate that is not counted, into each pipeline's meter.
     */
    void measureSlices(Pipeline plain, Pipeline fast, Pipeline first, Pipeline second, double at, int perSlice)
            throws InterruptedException {
        for (int k = 0; k < 2 * slices; k++) {
            Pipeline p = (k + 1) / 2 % 2 == 0 ? first : second;
            p.load().fixedRate(Math.max(1, (int) at), at, "lead-in", null);
            PathMeter.Mark m = p.meter.mark();
            PathMeter.Slice sl = p.meter.add(m, p.load().fixedRate(perSlice, at, p.label, null));
            out.printf(Locale.ROOT, "  %-18s slice %d of %d: p50 %.2f ms, CPU of all stages %.1f%%%n", p.label,
                    p.meter.slices().size(), slices, sl.p50Millis(), sl.cpuPercent());
        }
        double[] p50 = new double[slices];
        double[] cpu = new double[slices];
        for (int i = 0; i < slices; i++) {
            PathMeter.Slice a = plain.meter.slices().get(i);
            PathMeter.Slice b = fast.meter.slices().get(i);
            p50[i] = b.p50Millis() / a.p50Millis();
            cpu[i] = b.cpuPercent() / a.cpuPercent();
        }
        out.println("  fast/plain by slice pair, min / median / max: P50 " + spread(p50) + ", CPU " + spread(cpu));
    }

    /** Warms {@code first}, then {@code second}, each until the JIT compilers of both pipelines are quiet. */
    void warmBoth(Pipeline first, Pipeline second) throws InterruptedException {
        LongSupplier jit = bothJit(first, second);
        warm(first, jit);
        warm(second, jit);
    }

    /**
     * Warm-up: as many requests as the stages take (so the JITs of five JVMs finish sooner), then
     * at the rate until the median settles and {@code jit} (the compilers' CPU since its last
     * call) says they are quiet.
     */
    void warm(Pipeline p, LongSupplier jit) throws InterruptedException {
        double busy = p.load().closedLoop(inFlight, warmupSeconds);
        LoadGenerator.WarmUp w = p.load().warmUp(rate, 5, Math.max(5, maxWarmupSeconds), jit);
        out.printf(Locale.ROOT, "  %-18s warm-up %.0f s at %.0f rps + %.0f s at the rate: %s, %s (p50 %.2f ms)%n", p.label,
                warmupSeconds, busy, w.seconds(), w.settled() ? "the median settled" : "the median did NOT settle",
                w.jitQuiet() ? "the JIT quiet" : "the JIT still compiling", w.lastP50Millis());
    }

    /**
     * Before a load of the curve: both pipelines at {@code at} until the JIT compilers of both are
     * quiet (at most {@link #SETTLE_SECONDS} each, or --max-warmup where shorter), so that what the
     * load before (the closed-loop throughput phase above all) queued for the compilers is not paid
     * in one path's slices.
     */
    void settle(Pipeline first, Pipeline second, double at) throws InterruptedException {
        LongSupplier jit = bothJit(first, second);
        StringBuilder line = new StringBuilder("  settling at the new load until the JIT compilers are quiet:");
        for (Pipeline p : List.of(first, second)) {
            double most = Math.min(SETTLE_SECONDS, Math.max(3, maxWarmupSeconds));
            LoadGenerator.WarmUp w = p.load().untilJitQuiet(at, most, jit);
            line.append(String.format(Locale.ROOT, " %s %.0f s%s", p.label, w.seconds(),
                    w.jitQuiet() ? "" : " (still compiling)"));
        }
        out.println(line);
    }

    /** The most seconds {@link #settle} gives a pipeline at each load. */
    private static final double SETTLE_SECONDS = 20;

    private static LongSupplier bothJit(Pipeline first, Pipeline second) {
        LongSupplier a = StageMeters.jitMeter(first.stages);
        LongSupplier b = StageMeters.jitMeter(second.stages);
        return () -> {
            long x = a.getAsLong();
            long y = b.getAsLong();
            return x < 0 || y < 0 ? -1 : x + y;
        };
    }

    double throughput(Pipeline p) throws InterruptedException {
        return throughputSeconds > 0 ? p.load().closedLoop(inFlight, throughputSeconds) : Double.NaN;
    }

    void reportFailures(Pipeline p) {
        if (p.meter.failed() > 0) {
            out.printf("  %s: %d requests failed; the first: %s%n", p.label, p.meter.failed(), p.meter.firstError());
        }
    }

    private static String spread(double[] v) {
        double[] s = v.clone();
        Arrays.sort(s);
        return String.format(Locale.ROOT, "%.2f / %.2f / %.2f", s[0], RagReport.quantile(s, 0.5), s[s.length - 1]);
    }
}
