package io.github.sockmap4j.linux.ffi;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;

/**
 * Downcall plumbing shared by {@link LibC} and {@link Libbpf}: every handle captures errno,
 * read back per thread from a confined call-state segment.
 */
@SuppressWarnings("restricted")
final class Native {
    static final Linker LINKER = Linker.nativeLinker();
    static final StructLayout CALL_STATE = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO =
            CALL_STATE.varHandle(MemoryLayout.PathElement.groupElement("errno"));
    private static final Linker.Option CAPTURE_ERRNO = Linker.Option.captureCallState("errno");

    /**
     * One call-state segment per thread, allocated once: an Arena per call would cost an
     * allocation on every send and receive.
     */
    private static final ThreadLocal<MemorySegment> STATE =
            ThreadLocal.withInitial(() -> Arena.ofAuto().allocate(CALL_STATE));

    /**
     * A small per-thread scratch for out-parameters (an int, a pollfd, an epoll_event), for the
     * same reason: the calls that use it run per event, and none holds it across another call.
     */
    static final long SCRATCH_BYTES = 64;
    private static final ThreadLocal<MemorySegment> SCRATCH =
            ThreadLocal.withInitial(() -> Arena.ofAuto().allocate(SCRATCH_BYTES, 8));

    private Native() {
    }

    /** This thread's scratch, zeroed. */
    static MemorySegment scratch() {
        return SCRATCH.get().fill((byte) 0);
    }

    static MemorySegment callState() {
        return STATE.get();
    }

    static int errno(MemorySegment state) {
        return (int) ERRNO.get(state, 0L);
    }

    /**
     * glibc's malloc_trim, absent from other C libraries. libbpf parses the kernel's BTF (several
     * MiB) to relocate a program and frees it after the load; glibc keeps the freed memory in the
     * process unless asked to give it back (measured: 4 to 9 MiB of RSS after a load, returned).
     */
    private static final MethodHandle MALLOC_TRIM = LINKER.defaultLookup().find("malloc_trim")
            .map(sym -> LINKER.downcallHandle(sym, FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG)))
            .orElse(null);

    /** Returns the C heap's free memory to the kernel where the C library can. */
    static void trimMalloc() {
        if (MALLOC_TRIM != null) {
            try {
                int ignored = (int) MALLOC_TRIM.invokeExact(0L);
            } catch (Throwable t) {
                throw rethrow(t);
            }
        }
    }

    /** A handle whose first argument is the call-state segment. */
    static MethodHandle downcall(SymbolLookup lookup, String name, FunctionDescriptor fd,
                                 Linker.Option... extra) {
        MemorySegment symbol = lookup.find(name)
                .orElseThrow(() -> new UnsatisfiedLinkError("symbol not found: " + name));
        Linker.Option[] options = new Linker.Option[extra.length + 1];
        options[0] = CAPTURE_ERRNO;
        System.arraycopy(extra, 0, options, 1, extra.length);
        return LINKER.downcallHandle(symbol, fd, options);
    }

    /** A handle without errno capture. */
    static MethodHandle plain(SymbolLookup lookup, String name, FunctionDescriptor fd) {
        MemorySegment symbol = lookup.find(name)
                .orElseThrow(() -> new UnsatisfiedLinkError("symbol not found: " + name));
        return LINKER.downcallHandle(symbol, fd);
    }

    static final ValueLayout.OfInt C_INT = ValueLayout.JAVA_INT;
    static final ValueLayout.OfLong C_LONG = ValueLayout.JAVA_LONG;
    static final ValueLayout C_PTR = ValueLayout.ADDRESS;

    static RuntimeException rethrow(Throwable t) {
        if (t instanceof RuntimeException re) {
            return re;
        }
        if (t instanceof Error e) {
            throw e;
        }
        return new IllegalStateException(t);
    }
}
