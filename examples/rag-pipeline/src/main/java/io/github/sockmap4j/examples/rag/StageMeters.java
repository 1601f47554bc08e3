package io.github.sockmap4j.examples.rag;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapStats;
import java.lang.management.ManagementFactory;
import java.util.Locale;
import java.util.Map;

/** What the demo reads off its stages and the kernel between phases: CPU times, threads, counters. */
final class StageMeters {
    private StageMeters() {
    }

    /** Bytes redirected and bytes passed to TCP by opted-in sockets so far (zeros on the plain path). */
    static long[] counters(boolean fast, Sockmap sockmap) {
        if (!fast || sockmap == null) {
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

    /** Every stage's threads' CPU time, summed by role and thread name ("search/rag-io-N-N"). */
    static Map<String, Long> threadNanos(Map<RagService.Role, Stage> stages) {
        Map<String, Long> out = new java.util.TreeMap<>();
        for (Stage s : stages.values()) {
            s.threadNanos().forEach((n, t) -> out.merge(s.role.name().toLowerCase(Locale.ROOT) + "/" + n, t, Long::sum));
        }
        return out;
    }

    /** The JIT compilers' CPU time so far in all stages, or -1 when a stage shares this JVM. */
    static long jitNanos(Map<RagService.Role, Stage> stages) {
        long sum = 0;
        for (Stage s : stages.values()) {
            if (s.pid() < 0) {
                return -1;
            }
            sum += s.kindNanos().getOrDefault(ThreadKind.JIT, 0L);
        }
        return sum;
    }

    /** Where each stage's calls have spent their time so far. */
    static Map<RagService.Role, StageClock.Times> times(Map<RagService.Role, Stage> stages) {
        Map<RagService.Role, StageClock.Times> out = new java.util.EnumMap<>(RagService.Role.class);
        stages.forEach((role, s) -> out.put(role, s.times()));
        return out;
    }

    /** Each stage's threads' run-queue nanoseconds so far (-1 where unknown). */
    static Map<RagService.Role, Long> runQueueByStage(Map<RagService.Role, Stage> stages) {
        Map<RagService.Role, Long> out = new java.util.EnumMap<>(RagService.Role.class);
        stages.forEach((role, s) -> out.put(role, s.runQueueNanos()));
        return out;
    }

    /** Each stage's times between two readings of {@link #times}. */
    static Map<RagService.Role, StageClock.Times> since(Map<RagService.Role, StageClock.Times> before,
            Map<RagService.Role, StageClock.Times> after) {
        Map<RagService.Role, StageClock.Times> out = new java.util.EnumMap<>(RagService.Role.class);
        after.forEach((role, t) -> out.put(role, t.minus(before.getOrDefault(role, StageClock.Times.NONE))));
        return out;
    }

    /** Each stage's run-queue nanoseconds between two readings of {@link #runQueueByStage}; -1 where either is unknown. */
    static Map<RagService.Role, Long> waitedSince(Map<RagService.Role, Long> before, Map<RagService.Role, Long> after) {
        Map<RagService.Role, Long> out = new java.util.EnumMap<>(RagService.Role.class);
        after.forEach((role, n) -> {
            long b = before.getOrDefault(role, -1L);
            out.put(role, n < 0 || b < 0 ? -1 : n - b);
        });
        return out;
    }

    /** Every stage's threads' CPU time so far, by stage and by what the threads are for. */
    static Map<RagService.Role, Map<ThreadKind, Long>> kindNanos(Map<RagService.Role, Stage> stages) {
        Map<RagService.Role, Map<ThreadKind, Long>> out = new java.util.EnumMap<>(RagService.Role.class);
        stages.forEach((role, s) -> out.put(role, s.kindNanos()));
        return out;
    }

    /**
     * CPU microseconds a request of each stage's thread kinds between two readings of
     * {@link #kindNanos}; a kind whose threads ended between them counts what the rest used, never
     * less than 0.
     */
    static Map<RagService.Role, Map<ThreadKind, Double>> microsPerRequest(Map<RagService.Role, Map<ThreadKind, Long>> before,
            Map<RagService.Role, Map<ThreadKind, Long>> after, long requests) {
        Map<RagService.Role, Map<ThreadKind, Double>> out = new java.util.EnumMap<>(RagService.Role.class);
        after.forEach((role, kinds) -> {
            Map<ThreadKind, Double> m = new java.util.EnumMap<>(ThreadKind.class);
            for (ThreadKind k : ThreadKind.values()) {
                long d = kinds.getOrDefault(k, 0L) - before.getOrDefault(role, Map.of()).getOrDefault(k, 0L);
                m.put(k, Math.max(0, d) / 1e3 / requests);
            }
            out.put(role, m);
        });
        return out;
    }

    /**
     * Nanoseconds all stages' threads and this JVM's (the load generator's) have so far waited
     * runnable for a CPU, or -1 when a stage shares this JVM or the kernel keeps no schedstat.
     */
    static long runQueueNanos(Map<RagService.Role, Stage> stages) {
        long sum = Stage.runQueueNanos(java.nio.file.Path.of("/proc/self/task"));
        for (Stage s : stages.values()) {
            long v = s.runQueueNanos();
            if (v < 0 || sum < 0) {
                return -1;
            }
            sum += v;
        }
        return sum;
    }

    static long[] cpu(Map<RagService.Role, Stage> stages) {
        long[] c = new long[RagService.Role.values().length];
        for (RagService.Role r : RagService.Role.values()) {
            c[r.ordinal()] = stages.get(r).cpuNanos();
        }
        return c;
    }

    static long selfCpuNanos() {
        java.lang.management.OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
        return os instanceof com.sun.management.OperatingSystemMXBean sun ? sun.getProcessCpuTime() : -1;
    }
}
