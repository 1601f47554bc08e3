package io.github.sockmap4j.examples.rag;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapStats;
import java.lang.management.ManagementFactory;
import java.util.EnumMap;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.LongSupplier;

/** What the demo reads off its stages and the kernel between phases: CPU times, threads, counters. */
final class StageMeters {
    private StageMeters() {
    }

    /**
     * Bytes redirected, bytes passed to TCP by opted-in sockets and in-flight bound hits so far
     * (zeros without a fast path): read on both paths, so that the plain path's rows say what
     * the kernel moved while it ran, nothing.
     */
    static long[] counters(Sockmap sockmap) {
        if (sockmap == null) {
            return new long[3];
        }
        SockmapStats st = sockmap.stats();
        return new long[] {st.bytesRedirected(), st.bytesPassed(), st.boundHits()};
    }

    /** Kernel CPU time of all stages so far, or -1 when they share this JVM. */
    static long systemCpu(Map<RagService.Role, Stage> stages) {
        long sum = 0;
        for (Stage s : stages.values()) {
            long v = s.systemCpuNanos();
            if (v < 0) {
                return -1;
            }
            sum += v;
        }
        return sum;
    }

    /** Every stage's threads now. */
    static Map<RagService.Role, ThreadTimes> threads(Map<RagService.Role, Stage> stages) {
        Map<RagService.Role, ThreadTimes> out = new EnumMap<>(RagService.Role.class);
        stages.forEach((role, s) -> out.put(role, s.threads()));
        return out;
    }

    /** Each stage's threads' use between two readings of {@link #threads}, thread by thread. */
    static Map<RagService.Role, ThreadTimes> since(Map<RagService.Role, ThreadTimes> before,
            Map<RagService.Role, ThreadTimes> after) {
        Map<RagService.Role, ThreadTimes> out = new EnumMap<>(RagService.Role.class);
        after.forEach((role, t) -> out.put(role, t.since(before.getOrDefault(role, ThreadTimes.UNKNOWN))));
        return out;
    }

    /** CPU nanoseconds by stage and thread name ("search/rag-io-N-N"). */
    static Map<String, Long> cpuByName(Map<RagService.Role, ThreadTimes> used) {
        Map<String, Long> out = new TreeMap<>();
        used.forEach((role, t) -> t.cpuByName().forEach(
                (n, v) -> out.merge(role.name().toLowerCase(Locale.ROOT) + "/" + n, v, Long::sum)));
        return out;
    }

    /**
     * The JIT compilers' CPU in all stages since the previous call (the first call: since the
     * meter was made), thread by thread, or -1 when a stage shares this JVM.
     */
    static LongSupplier jitMeter(Map<RagService.Role, Stage> stages) {
        Map<RagService.Role, ThreadTimes> last = new EnumMap<>(RagService.Role.class);
        last.putAll(threads(stages));
        return () -> {
            Map<RagService.Role, ThreadTimes> now = threads(stages);
            long sum = 0;
            for (ThreadTimes t : since(last, now).values()) {
                if (!t.known()) {
                    return -1;
                }
                sum += t.cpuByKind().getOrDefault(ThreadKind.JIT, 0L);
            }
            last.putAll(now);
            return sum;
        };
    }

    /** CPU microseconds a request of each stage's thread kinds, from their use over the phase. */
    static Map<RagService.Role, Map<ThreadKind, Double>> microsPerRequest(Map<RagService.Role, ThreadTimes> used,
            long requests) {
        return perRequest(used, ThreadTimes::cpuByKind, requests * 1e3);
    }

    /** Wake-ups (voluntary context switches) a request of each stage's thread kinds, over the phase. */
    static Map<RagService.Role, Map<ThreadKind, Double>> wakeupsPerRequest(Map<RagService.Role, ThreadTimes> used,
            long requests) {
        return perRequest(used, ThreadTimes::sleepsByKind, requests);
    }

    /** Each stage's {@code byKind} of its use over the phase, divided by {@code per}; NaN where unknown. */
    private static Map<RagService.Role, Map<ThreadKind, Double>> perRequest(Map<RagService.Role, ThreadTimes> used,
            java.util.function.Function<ThreadTimes, Map<ThreadKind, Long>> byKind, double per) {
        Map<RagService.Role, Map<ThreadKind, Double>> out = new EnumMap<>(RagService.Role.class);
        used.forEach((role, t) -> {
            Map<ThreadKind, Double> m = new EnumMap<>(ThreadKind.class);
            Map<ThreadKind, Long> kinds = byKind.apply(t);
            for (ThreadKind k : ThreadKind.values()) {
                m.put(k, t.known() ? kinds.getOrDefault(k, 0L) / per : Double.NaN);
            }
            out.put(role, m);
        });
        return out;
    }

    /** Each stage's threads' waits for a CPU over the phase (the JVM's own threads left out; -1 where unknown). */
    static Map<RagService.Role, Long> waits(Map<RagService.Role, ThreadTimes> used) {
        Map<RagService.Role, Long> out = new EnumMap<>(RagService.Role.class);
        used.forEach((role, t) -> out.put(role, t.applicationWaitNanos()));
        return out;
    }

    /**
     * Nanoseconds all stages' threads and the load generator's ({@code self}: this JVM's use over
     * the phase) waited runnable for a CPU, the JVMs' own threads left out; -1 when any is unknown.
     */
    static long runQueueNanos(Map<RagService.Role, ThreadTimes> used, ThreadTimes self) {
        long sum = self.applicationWaitNanos();
        for (ThreadTimes t : used.values()) {
            long v = t.applicationWaitNanos();
            if (v < 0 || sum < 0) {
                return -1;
            }
            sum += v;
        }
        return sum;
    }

    /** This JVM's (the load generator's) threads now. */
    static ThreadTimes self() {
        return ThreadTimes.read(java.nio.file.Path.of("/proc/self/task"));
    }

    /** Where each stage's calls have spent their time so far. */
    static Map<RagService.Role, StageClock.Times> times(Map<RagService.Role, Stage> stages) {
        Map<RagService.Role, StageClock.Times> out = new EnumMap<>(RagService.Role.class);
        stages.forEach((role, s) -> out.put(role, s.times()));
        return out;
    }

    /** Each stage's times between two readings of {@link #times}. */
    static Map<RagService.Role, StageClock.Times> timesSince(Map<RagService.Role, StageClock.Times> before,
            Map<RagService.Role, StageClock.Times> after) {
        Map<RagService.Role, StageClock.Times> out = new EnumMap<>(RagService.Role.class);
        after.forEach((role, t) -> out.put(role, t.minus(before.getOrDefault(role, StageClock.Times.NONE))));
        return out;
    }

    static long[] cpu(Map<RagService.Role, Stage> stages) {
        long[] c = new long[RagService.Role.values().length];
        for (RagService.Role r : RagService.Role.values()) {
            c[r.ordinal()] = stages.get(r).cpuNanos();
        }
        return c;
    }

    /** CPU time {@code pids} have used so far, all their threads; 0 for none, -1 when one is gone or unreadable. */
    static long processCpu(java.util.List<Long> pids) {
        long sum = 0;
        for (long pid : pids) {
            java.util.Optional<java.time.Duration> d = ProcessHandle.of(pid).flatMap(h -> h.info().totalCpuDuration());
            if (d.isEmpty()) {
                return -1;
            }
            sum += d.get().toNanos();
        }
        return sum;
    }

    static long selfCpuNanos() {
        java.lang.management.OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
        return os instanceof com.sun.management.OperatingSystemMXBean sun ? sun.getProcessCpuTime() : -1;
    }
}
