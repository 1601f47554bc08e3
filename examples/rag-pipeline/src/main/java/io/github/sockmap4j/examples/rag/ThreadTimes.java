package io.github.sockmap4j.examples.rag;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;

/**
 * The threads of one process at one moment, by thread id: each one's name (its {@code comm}),
 * CPU time and time spent runnable but waiting for a CPU so far (the first two fields of
 * /proc/PID/task/TID/schedstat). What a phase cost is {@link #since} a reading before it, thread
 * by thread: a thread that ended meanwhile takes out only what it used in the phase, never its
 * whole life (gRPC's executor and the JIT end idle threads, which a sum over the live threads
 * would subtract).
 */
final class ThreadTimes {
    /**
     * One thread's reading; {@code startTicks} is when it began (field 22 of its stat), so that a
     * thread id the kernel gave again to a new thread is not taken for the old one; {@code sleeps}
     * its voluntary context switches (/proc/PID/task/TID/status): each time it blocked and so
     * had to be woken again, the wake-ups a hand-off between threads costs.
     */
    record Sample(String name, long startTicks, long cpuNanos, long waitNanos, long sleeps) {
        Sample(String name, long startTicks, long cpuNanos, long waitNanos) {
            this(name, startTicks, cpuNanos, waitNanos, 0);
        }
    }

    /** No reading: the stage shares this JVM, or the kernel keeps no schedstat. */
    static final ThreadTimes UNKNOWN = new ThreadTimes(Map.of(), false);

    private final Map<Long, Sample> threads;
    private final boolean known;

    ThreadTimes(Map<Long, Sample> threads, boolean known) {
        this.threads = threads;
        this.known = known;
    }

    /** Reads every thread under {@code tasks} (a /proc/PID/task directory); {@link #UNKNOWN} where it cannot. */
    static ThreadTimes read(Path tasks) {
        Map<Long, Sample> out = new HashMap<>();
        try (var ts = Files.list(tasks)) {
            for (Path t : (Iterable<Path>) ts::iterator) {
                try {
                    String stat = Files.readString(t.resolve("stat"));
                    String name = stat.substring(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
                    // The fields after the name (which may hold spaces) begin with the state, field 3.
                    long start = Long.parseLong(stat.substring(stat.lastIndexOf(')') + 2).split(" ")[19]);
                    String[] f = Files.readString(t.resolve("schedstat")).trim().split(" ");
                    out.put(Long.parseLong(t.getFileName().toString()),
                            new Sample(name, start, Long.parseLong(f[0]), Long.parseLong(f[1]),
                                    voluntarySwitches(Files.readString(t.resolve("status")))));
                } catch (NoSuchFileException gone) {
                    // the thread ended meanwhile
                }
            }
        } catch (IOException | RuntimeException unknown) {
            return UNKNOWN;
        }
        return new ThreadTimes(out, true);
    }

    /** The {@code voluntary_ctxt_switches} of a /proc status file; 0 where it has none. */
    static long voluntarySwitches(String status) {
        int at = status.indexOf("\nvoluntary_ctxt_switches:");
        if (at < 0) {
            return 0;
        }
        int from = at + "\nvoluntary_ctxt_switches:".length();
        int end = status.indexOf('\n', from);
        return Long.parseLong(status.substring(from, end < 0 ? status.length() : end).trim());
    }

    boolean known() {
        return known;
    }

    Map<Long, Sample> threads() {
        return threads;
    }

    /**
     * What each thread alive now used since {@code before}: a thread that began meanwhile counts
     * whole, one that ended meanwhile not at all.
     */
    ThreadTimes since(ThreadTimes before) {
        if (!known || !before.known) {
            return UNKNOWN;
        }
        Map<Long, Sample> out = new HashMap<>();
        threads.forEach((tid, now) -> {
            Sample then = before.threads.get(tid);
            out.put(tid, then == null || then.startTicks() != now.startTicks() ? now
                    : new Sample(now.name(), now.startTicks(), now.cpuNanos() - then.cpuNanos(),
                            now.waitNanos() - then.waitNanos(), now.sleeps() - then.sleeps()));
        });
        return new ThreadTimes(out, true);
    }

    /**
     * This use and {@code other} together, thread by thread: what the same threads used over two
     * phases (a demo's measured slices), each phase a {@link #since} of its own.
     */
    ThreadTimes plus(ThreadTimes other) {
        if (!known || !other.known) {
            return UNKNOWN;
        }
        Map<Long, Sample> out = new HashMap<>(threads);
        other.threads.forEach((tid, b) -> {
            long key = tid;
            Sample a;
            // A thread id the kernel gave again to a new thread: the new one under a key of its own.
            while ((a = out.get(key)) != null && a.startTicks() != b.startTicks()) {
                key += 1L << 32;
            }
            out.put(key, a == null ? b
                    : new Sample(b.name(), b.startTicks(), a.cpuNanos() + b.cpuNanos(), a.waitNanos() + b.waitNanos(),
                            a.sleeps() + b.sleeps()));
        });
        return new ThreadTimes(out, true);
    }

    /** CPU nanoseconds by what the threads are for. */
    Map<ThreadKind, Long> cpuByKind() {
        Map<ThreadKind, Long> out = new EnumMap<>(ThreadKind.class);
        threads.values().forEach(s -> out.merge(ThreadKind.of(s.name()), s.cpuNanos(), Long::sum));
        return out;
    }

    /** Voluntary context switches (sleeps, each a later wake-up) by what the threads are for. */
    Map<ThreadKind, Long> sleepsByKind() {
        Map<ThreadKind, Long> out = new EnumMap<>(ThreadKind.class);
        threads.values().forEach(s -> out.merge(ThreadKind.of(s.name()), s.sleeps(), Long::sum));
        return out;
    }

    /** CPU nanoseconds by thread name, its digits replaced by N ("rag-io-N-N"). */
    Map<String, Long> cpuByName() {
        Map<String, Long> out = new TreeMap<>();
        threads.values().forEach(s -> out.merge(s.name().replaceAll("[0-9]+", "N"), s.cpuNanos(), Long::sum));
        return out;
    }

    /**
     * Nanoseconds the threads but the JVM's own (JIT compilers, GC, the VM thread: {@link
     * ThreadKind#JIT}, {@link ThreadKind#GC_VM}) waited runnable for a CPU; -1 when unknown.
     */
    long applicationWaitNanos() {
        if (!known) {
            return -1;
        }
        return threads.values().stream().filter(s -> {
            ThreadKind k = ThreadKind.of(s.name());
            return k != ThreadKind.JIT && k != ThreadKind.GC_VM;
        }).mapToLong(Sample::waitNanos).sum();
    }
}
