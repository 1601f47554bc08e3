package io.github.sockmap4j.examples.rag;

import io.github.sockmap4j.Sockmap;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import org.HdrHistogram.Histogram;

/**
 * One path's fixed-rate phase, summed over the slices it was measured in: the requests'
 * latencies in one histogram, and every stage's CPU, threads, clocks and the kernel's counters as
 * the sums of each slice's readings after less before. A phase in one piece is one slice.
 */
final class PathMeter {
    /** Every reading taken at a slice's start and end. */
    record Mark(long[] cpu, long systemCpu, long selfCpu, ThreadTimes selfThreads, Map<RagService.Role, ThreadTimes> threads,
            Map<RagService.Role, StageClock.Times> times, long[] counters, long verdictRuns, long proxyCpu) {
    }

    /** One slice's own figures, for the spread between slices: its median latency and its stages' CPU %. */
    record Slice(double p50Millis, double cpuPercent) {
    }

    private final boolean fast;
    private final Map<RagService.Role, Stage> stages;
    private final Sockmap sockmap;
    /** The pods' sidecar proxies on a meshed node, empty elsewhere. */
    private final List<Long> proxies;
    private final Histogram latency = new Histogram(60_000_000L, 3);
    private final long[] cpu = new long[RagService.Role.values().length];
    private final long[] counters = new long[3];
    private final List<Slice> slices = new ArrayList<>();
    private long ok;
    private long failed;
    private String firstError;
    private double seconds;
    private long systemCpu;
    private long selfCpu;
    private long verdictRuns;
    private long proxyCpu;
    private ThreadTimes selfUsed = new ThreadTimes(Map.of(), true);
    private Map<RagService.Role, ThreadTimes> used = new EnumMap<>(RagService.Role.class);
    private Map<RagService.Role, StageClock.Times> times = new EnumMap<>(RagService.Role.class);

    PathMeter(boolean fast, Map<RagService.Role, Stage> stages, Sockmap sockmap, List<Long> proxies) {
        this.fast = fast;
        this.stages = stages;
        this.sockmap = sockmap;
        this.proxies = List.copyOf(proxies);
    }

    Mark mark() {
        return new Mark(StageMeters.cpu(stages), StageMeters.systemCpu(stages), StageMeters.selfCpuNanos(),
                StageMeters.self(), StageMeters.threads(stages), StageMeters.times(stages),
                StageMeters.counters(sockmap), sockmap != null ? sockmap.verdictRunCount() : 0,
                StageMeters.processCpu(proxies));
    }

    /** Adds the slice that began at {@code before} and whose requests {@code res} measured; it ends now. */
    Slice add(Mark before, LoadGenerator.Result res) {
        Mark after = mark();
        long sliceCpu = 0;
        for (int i = 0; i < cpu.length; i++) {
            boolean known = before.cpu[i] >= 0 && after.cpu[i] >= 0 && cpu[i] >= 0;
            cpu[i] = known ? cpu[i] + after.cpu[i] - before.cpu[i] : -1;
            sliceCpu = known && sliceCpu >= 0 ? sliceCpu + after.cpu[i] - before.cpu[i] : -1;
        }
        systemCpu = before.systemCpu < 0 || after.systemCpu < 0 || systemCpu < 0 ? -1
                : systemCpu + after.systemCpu - before.systemCpu;
        selfCpu += after.selfCpu - before.selfCpu;
        selfUsed = selfUsed.plus(after.selfThreads.since(before.selfThreads));
        Map<RagService.Role, ThreadTimes> u = StageMeters.since(before.threads, after.threads);
        u.forEach((role, t) -> used.merge(role, t, ThreadTimes::plus));
        StageMeters.timesSince(before.times, after.times).forEach((role, t) -> times.merge(role, t, StageClock.Times::plus));
        for (int i = 0; i < counters.length; i++) {
            counters[i] += after.counters[i] - before.counters[i];
        }
        verdictRuns += after.verdictRuns - before.verdictRuns;
        proxyCpu = before.proxyCpu < 0 || after.proxyCpu < 0 || proxyCpu < 0 ? -1 : proxyCpu + after.proxyCpu - before.proxyCpu;
        latency.add(res.latencyMicros());
        ok += res.ok();
        failed += res.failed();
        firstError = firstError != null ? firstError : res.firstError();
        seconds += res.seconds();
        Slice s = new Slice(res.latencyMicros().getTotalCount() == 0 ? Double.NaN
                : res.latencyMicros().getValueAtPercentile(50) / 1000.0,
                sliceCpu < 0 ? Double.NaN : 100.0 * sliceCpu / (res.seconds() * 1e9));
        slices.add(s);
        return s;
    }

    List<Slice> slices() {
        return slices;
    }

    long failed() {
        return failed;
    }

    String firstError() {
        return firstError;
    }

    /**
     * The phase as the report reads it, with what was measured around it: the closed-loop
     * throughput ({@code maxRps}) and the stages' idle CPU.
     */
    RagReport.Run run(double rate, double maxRps, Map<RagService.Role, Double> idle, Map<String, Double> idleThreads) {
        long requests = ok + failed;
        Map<RagService.Role, Double> cpuPct = new EnumMap<>(RagService.Role.class);
        Map<RagService.Role, Long> rss = new EnumMap<>(RagService.Role.class);
        for (RagService.Role role : RagService.Role.values()) {
            long c = cpu[role.ordinal()];
            cpuPct.put(role, c < 0 ? -1 : 100.0 * c / (seconds * 1e9));
            rss.put(role, stages.get(role).rssBytes());
        }
        long waited = StageMeters.runQueueNanos(used, selfUsed);
        TimeBudget budget = TimeBudget.of(latency.getMean() / 1000, times, StageMeters.waits(used), requests);
        return new RagReport.Run(fast, latency, rate, ok / seconds, failed, maxRps, cpuPct, rss,
                100.0 * selfCpu / (seconds * 1e9), systemCpu < 0 ? -1 : 100.0 * systemCpu / (seconds * 1e9),
                verdictRuns, counters[0], counters[1], counters[2], idle, idleThreads,
                waited < 0 ? -1 : waited / 1e6 / requests, StageMeters.microsPerRequest(used, requests),
                StageMeters.wakeupsPerRequest(used, requests), budget,
                List.copyOf(slices), proxies.isEmpty() || proxyCpu < 0 ? -1 : 100.0 * proxyCpu / (seconds * 1e9));
    }
}
