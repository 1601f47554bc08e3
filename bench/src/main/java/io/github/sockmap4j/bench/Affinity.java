package io.github.sockmap4j.bench;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * Pins the calling thread to one CPU (sched_setaffinity on the thread itself). On two vCPUs
 * the cost of waking a peer differs by which CPU it sleeps on, more than the paths differ:
 * pinning makes the placement a stated parameter of a run instead of the scheduler's whim.
 */
@SuppressWarnings("restricted")
final class Affinity {
    private static final MethodHandle SCHED_SETAFFINITY = Linker.nativeLinker().downcallHandle(
            Linker.nativeLinker().defaultLookup().find("sched_setaffinity").orElseThrow(),
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG,
                    ValueLayout.ADDRESS));

    private Affinity() {
    }

    /** Pins the current thread to {@code cpu}; a negative cpu leaves it to the scheduler. */
    static void pin(int cpu) {
        if (cpu < 0) {
            return;
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment mask = arena.allocate(128);
            mask.set(ValueLayout.JAVA_BYTE, cpu / 8, (byte) (1 << (cpu % 8)));
            int r = (int) SCHED_SETAFFINITY.invokeExact(0, 128L, mask);
            if (r != 0) {
                throw new IllegalStateException("sched_setaffinity(cpu " + cpu + ") failed");
            }
        } catch (Throwable t) {
            throw t instanceof RuntimeException re ? re : new IllegalStateException(t);
        }
    }

    /** Back to every CPU. */
    static void unpin() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment mask = arena.allocate(128);
            mask.fill((byte) 0xff);
            int r = (int) SCHED_SETAFFINITY.invokeExact(0, 128L, mask);
            assert r == 0;
        } catch (Throwable t) {
            throw t instanceof RuntimeException re ? re : new IllegalStateException(t);
        }
    }
}
