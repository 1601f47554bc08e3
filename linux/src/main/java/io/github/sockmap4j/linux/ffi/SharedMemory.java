package io.github.sockmap4j.linux.ffi;

import static io.github.sockmap4j.linux.ffi.Native.C_INT;
import static io.github.sockmap4j.linux.ffi.Native.C_LONG;
import static io.github.sockmap4j.linux.ffi.Native.C_PTR;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.io.IOException;
import java.lang.invoke.MethodHandle;
import java.util.concurrent.TimeUnit;

/**
 * Memory two processes share: an anonymous file ({@code memfd_create}) of a fixed size, sealed
 * so that neither side can shrink or grow it once made, mapped {@code MAP_SHARED}; and the
 * futex waits and wakes on a 32-bit word in it that let a reader sleep without a thread per
 * message or a file descriptor of its own.
 *
 * <p>Why the seals: a mapping whose file the other process truncates faults (SIGBUS) on the next
 * access past the new end, which would kill the JVM. A file sealed against shrinking cannot be
 * truncated by anyone, so {@link #openSealed} refuses any descriptor that lacks the seals and
 * maps the size the file has, which it can then never lose.
 */
@SuppressWarnings("restricted")
public final class SharedMemory {
    private static final SymbolLookup LIBC = Native.LINKER.defaultLookup();
    private static final MethodHandle MEMFD_CREATE = Native.downcall(LIBC, "memfd_create",
            FunctionDescriptor.of(C_INT, C_PTR, C_INT));
    private static final MethodHandle FTRUNCATE = Native.downcall(LIBC, "ftruncate",
            FunctionDescriptor.of(C_INT, C_INT, C_LONG));
    private static final MethodHandle FCNTL_INT = Native.downcall(LIBC, "fcntl",
            FunctionDescriptor.of(C_INT, C_INT, C_INT, C_INT), Linker.Option.firstVariadicArg(2));
    private static final MethodHandle LSEEK = Native.downcall(LIBC, "lseek",
            FunctionDescriptor.of(C_LONG, C_INT, C_LONG, C_INT));
    private static final MethodHandle SYSCALL_FUTEX = Native.downcall(LIBC, "syscall",
            FunctionDescriptor.of(C_LONG, C_LONG, C_PTR, C_INT, C_INT, C_PTR, C_PTR, C_INT),
            Linker.Option.firstVariadicArg(1));

    /** The seals a shared region must carry: it cannot shrink, grow, or lose those seals. */
    public static final int SEALS = Linux.F_SEAL_SHRINK | Linux.F_SEAL_GROW | Linux.F_SEAL_SEAL;

    private SharedMemory() {
    }

    /**
     * A new anonymous file of {@code size} bytes (zeroed), sealed with {@link #SEALS}, close-on-exec.
     * {@code name} shows in {@code /proc/PID/fd} as {@code memfd:NAME}. The caller owns the
     * descriptor.
     */
    public static int createSealed(String name, long size) throws NativeIOException {
        return create(name, size, SEALS);
    }

    /** As {@link #createSealed}, with {@code seals} (0: none) in place of {@link #SEALS}. */
    public static int create(String name, long size, int seals) throws NativeIOException {
        MemorySegment st = Native.callState();
        int fd;
        try (Arena a = Arena.ofConfined()) {
            fd = (int) MEMFD_CREATE.invokeExact(st, a.allocateFrom(name), Linux.MFD_CLOEXEC | Linux.MFD_ALLOW_SEALING);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
        Errno.ok("memfd_create", LibC.result(fd, st), name);
        try {
            int r = (int) FTRUNCATE.invokeExact(st, fd, size);
            Errno.ok("ftruncate", LibC.result(r, st), size + " bytes");
            if (seals != 0) {
                r = (int) FCNTL_INT.invokeExact(st, fd, Linux.F_ADD_SEALS, seals);
                Errno.ok("fcntl(F_ADD_SEALS)", LibC.result(r, st), name);
            }
            return fd;
        } catch (NativeIOException e) {
            LibC.close(fd);
            throw e;
        } catch (Throwable t) {
            LibC.close(fd);
            throw Native.rethrow(t);
        }
    }

    /** A copy of {@code fd} (close-on-exec), which the caller owns ({@code F_DUPFD_CLOEXEC}). */
    public static int dupCloexec(int fd) throws NativeIOException {
        MemorySegment st = Native.callState();
        try {
            int r = (int) FCNTL_INT.invokeExact(st, fd, Linux.F_DUPFD_CLOEXEC, 0);
            return Errno.ok("fcntl(F_DUPFD_CLOEXEC)", LibC.result(r, st), "fd " + fd);
        } catch (NativeIOException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** The seals {@code fd} carries ({@code F_GET_SEALS}); fails on a descriptor that is not a memfd. */
    public static int seals(int fd) throws NativeIOException {
        MemorySegment st = Native.callState();
        try {
            int r = (int) FCNTL_INT.invokeExact(st, fd, Linux.F_GET_SEALS, 0);
            return Errno.ok("fcntl(F_GET_SEALS)", LibC.result(r, st), "fd " + fd);
        } catch (NativeIOException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** The size of the file behind {@code fd}. */
    public static long size(int fd) throws NativeIOException {
        MemorySegment st = Native.callState();
        try {
            long r = (long) LSEEK.invokeExact(st, fd, 0L, Linux.SEEK_END);
            return Errno.ok("lseek", LibC.result(r, st));
        } catch (NativeIOException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /**
     * Maps {@code fd} (read and write, shared) after checking that it carries {@link #SEALS} and
     * is exactly {@code expectedSize} bytes: a descriptor a peer handed over that could still
     * shrink, or of another size, is refused with what was wrong. Closing {@code arena} unmaps it.
     */
    public static MemorySegment openSealed(int fd, long expectedSize, Arena arena) throws IOException {
        int seals = seals(fd);
        if ((seals & SEALS) != SEALS) {
            throw new IOException("the shared region's file is not sealed against resizing (seals 0x"
                    + Integer.toHexString(seals) + ", wanted 0x" + Integer.toHexString(SEALS)
                    + "): refused, as a peer could truncate it under the mapping");
        }
        long size = size(fd);
        if (size != expectedSize) {
            throw new IOException("the shared region is " + size + " bytes, not the " + expectedSize
                    + " agreed: refused");
        }
        return SysCalls.mmapShared(fd, size, Linux.PROT_READ | Linux.PROT_WRITE, arena);
    }

    /**
     * Sleeps while the 32-bit word at {@code word} (4-byte aligned, in a shared mapping) holds
     * {@code expected}, at most {@code timeoutNanos}: 0 when woken, {@link Errno#EAGAIN} when the
     * word held another value already, {@link Errno#ETIMEDOUT}, or {@link Errno#EINTR}. Not the
     * private futex: the word is shared between processes.
     */
    public static int futexWait(MemorySegment word, int expected, long timeoutNanos) {
        MemorySegment st = Native.callState();
        MemorySegment ts = Native.scratch();
        ts.set(ValueLayout.JAVA_LONG, 0, timeoutNanos / TimeUnit.SECONDS.toNanos(1));
        ts.set(ValueLayout.JAVA_LONG, 8, timeoutNanos % TimeUnit.SECONDS.toNanos(1));
        try {
            long r = (long) SYSCALL_FUTEX.invokeExact(st, Platform.current().sysFutex(), word, Linux.FUTEX_WAIT,
                    expected, ts, MemorySegment.NULL, 0);
            return r == 0 ? 0 : Native.errno(st);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** Wakes up to {@code count} sleepers on {@code word}; how many were woken. */
    public static int futexWake(MemorySegment word, int count) {
        MemorySegment st = Native.callState();
        try {
            long r = (long) SYSCALL_FUTEX.invokeExact(st, Platform.current().sysFutex(), word, Linux.FUTEX_WAKE,
                    count, MemorySegment.NULL, MemorySegment.NULL, 0);
            return (int) Math.max(r, 0);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }
}
