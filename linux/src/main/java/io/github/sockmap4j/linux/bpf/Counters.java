package io.github.sockmap4j.linux.bpf;

import io.github.sockmap4j.linux.ffi.Libbpf;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/** Reads the per-CPU counter array ({@code sm4j_counters}, indexed by {@link Counter}). */
final class Counters {
    private Counters() {
    }

    /** Each counter summed over {@code cpus} CPUs, in {@link Counter} order. */
    static long[] read(Libbpf bpf, int countersFd, int cpus) {
        long[] out = new long[Counter.values().length];
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment key = arena.allocate(ValueLayout.JAVA_INT);
            MemorySegment val = arena.allocate(8L * cpus, 8);
            for (Counter c : Counter.values()) {
                key.set(ValueLayout.JAVA_INT, 0, c.index());
                if (bpf.tryMapLookup(countersFd, key, val) == 0) {
                    long sum = 0;
                    for (int cpu = 0; cpu < cpus; cpu++) {
                        sum += val.getAtIndex(ValueLayout.JAVA_LONG, cpu);
                    }
                    out[c.ordinal()] = sum;
                }
            }
        }
        return out;
    }
}
