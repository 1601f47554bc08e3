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
import java.lang.invoke.MethodHandle;

/**
 * The C library's calls that are not about sockets: files and directories (the pin directory,
 * cgroups, locks), memory maps, namespaces, mounts, interfaces. As in {@link LibC}, a
 * {@code try*} call returns {@code -errno}, a throwing one goes through {@link Errno#ok}.
 *
 * <p><b>Note:</b> this class is threadsafe; errno is captured per thread.
 */
@SuppressWarnings("restricted")
public final class SysCalls {
    private static final SymbolLookup LIBC = Native.LINKER.defaultLookup();

    private static final MethodHandle OPEN = Native.downcall(LIBC, "open",
            FunctionDescriptor.of(C_INT, C_PTR, C_INT, C_INT), Linker.Option.firstVariadicArg(2));
    private static final MethodHandle OPENAT = Native.downcall(LIBC, "openat",
            FunctionDescriptor.of(C_INT, C_INT, C_PTR, C_INT, C_INT), Linker.Option.firstVariadicArg(3));
    private static final MethodHandle MKDIRAT = Native.downcall(LIBC, "mkdirat",
            FunctionDescriptor.of(C_INT, C_INT, C_PTR, C_INT));
    private static final MethodHandle FSTATFS = Native.downcall(LIBC, "fstatfs",
            FunctionDescriptor.of(C_INT, C_INT, C_PTR));
    private static final MethodHandle GETEUID = Native.plain(LIBC, "geteuid",
            FunctionDescriptor.of(C_INT));
    private static final MethodHandle FLOCK = Native.downcall(LIBC, "flock",
            FunctionDescriptor.of(C_INT, C_INT, C_INT));
    private static final MethodHandle MMAP = Native.downcall(LIBC, "mmap",
            FunctionDescriptor.of(C_PTR, C_PTR, C_LONG, C_INT, C_INT, C_INT, C_LONG));
    private static final MethodHandle MUNMAP = Native.downcall(LIBC, "munmap",
            FunctionDescriptor.of(C_INT, C_PTR, C_LONG));

    // Linked when first used, each group by its holder's initialisation: most processes never call these.

    /** Mount: only mounting bpffs. */
    private static final class Mounting {
        static final MethodHandle MOUNT = Native.downcall(LIBC, "mount",
                FunctionDescriptor.of(C_INT, C_PTR, C_PTR, C_PTR, C_LONG, C_PTR));
    }

    /** If_nametoindex: only XDP attachment. */
    private static final class Interfaces {
        static final MethodHandle IF_NAMETOINDEX = Native.downcall(LIBC, "if_nametoindex",
                FunctionDescriptor.of(C_INT, C_PTR));
    }

    /** getdents64: only listing directories with their entries' types (cgroup trees). */
    private static final class Directories {
        static final MethodHandle GETDENTS64 = Native.downcall(LIBC, "getdents64",
                FunctionDescriptor.of(C_LONG, C_INT, C_PTR, C_LONG));
    }

    /** Signal masks: only while the verifier runs (bpf_object__load). */
    private static final class Signals {
        static final MethodHandle SIGFILLSET = Native.plain(LIBC, "sigfillset", FunctionDescriptor.of(C_INT, C_PTR));
        static final MethodHandle SIGDELSET = Native.plain(LIBC, "sigdelset",
                FunctionDescriptor.of(C_INT, C_PTR, C_INT));
        static final MethodHandle PTHREAD_SIGMASK = Native.plain(LIBC, "pthread_sigmask",
                FunctionDescriptor.of(C_INT, C_INT, C_PTR, C_PTR));
        /** sizeof(sigset_t) in glibc: 1,024 bits. */
        static final long SIGSET_SIZE = 128;
        static final int SIG_BLOCK = 0;
        static final int SIG_SETMASK = 2;
        /** What a thread raises itself (a fault, a trap): never blocked. SIGILL, SIGTRAP, SIGBUS, SIGFPE, SIGSEGV, SIGSYS. */
        static final int[] SYNCHRONOUS = {4, 5, 7, 8, 11, 31};
    }

    /** Setns: only entering another network namespace. */
    private static final class Namespaces {
        static final MethodHandle SETNS = Native.downcall(LIBC, "setns",
                FunctionDescriptor.of(C_INT, C_INT, C_INT));
    }

    private SysCalls() {
    }

    /** open(2) with O_CLOEXEC: the fd, or {@code -errno}. */
    public static int tryOpen(String path, int flags, int mode) {
        MemorySegment st = Native.callState();
        try (Arena arena = Arena.ofConfined()) {
            return LibC.result((int) OPEN.invokeExact(st, arena.allocateFrom(path), flags | Linux.O_CLOEXEC, mode), st);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public static int open(String path, int flags, int mode) throws NativeIOException {
        return Errno.ok("open", tryOpen(path, flags, mode), path);
    }

    /** openat(2) of one path component below {@code dirFd}: the fd, or {@code -errno}. */
    public static int tryOpenat(int dirFd, String name, int flags) {
        MemorySegment st = Native.callState();
        try (Arena arena = Arena.ofConfined()) {
            return LibC.result((int) OPENAT.invokeExact(st, dirFd, arena.allocateFrom(name), flags | Linux.O_CLOEXEC, 0),
                    st);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** mkdirat(2): 0, or {@code -errno}. */
    public static int tryMkdirat(int dirFd, String name, int mode) {
        MemorySegment st = Native.callState();
        try (Arena arena = Arena.ofConfined()) {
            return Math.min(0, LibC.result((int) MKDIRAT.invokeExact(st, dirFd, arena.allocateFrom(name), mode), st));
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /**
     * The file system type ({@code f_type}) of what {@code fd} refers to. {@code f_type} is the
     * first field of {@code struct statfs}, a long, on every 64-bit Linux architecture; the struct
     * is 120 bytes on x86_64 and aarch64.
     */
    public static long fstatfsType(int fd) throws NativeIOException {
        MemorySegment st = Native.callState();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment buf = arena.allocate(256, 8);
            Errno.ok("fstatfs", LibC.result((int) FSTATFS.invokeExact(st, fd, buf), st));
            return buf.get(ValueLayout.JAVA_LONG, 0) & 0xffffffffL;
        } catch (NativeIOException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /**
     * setns(2): moves the calling thread (only it) into the namespace {@code fd} refers to
     * (a {@code /proc/PID/ns/net} file). Needs CAP_SYS_ADMIN over that namespace.
     */
    public static void setns(int fd, int nstype) throws NativeIOException {
        MemorySegment st = Native.callState();
        int res;
        try {
            res = LibC.result((int) Namespaces.SETNS.invokeExact(st, fd, nstype), st);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
        Errno.ok("setns", res);
    }

    /** This process's effective user id. */
    public static int geteuid() {
        try {
            return (int) GETEUID.invokeExact();
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** flock; 0, or {@code -errno} (EAGAIN when LOCK_NB and held elsewhere). */
    public static int tryFlock(int fd, int op) {
        MemorySegment st = Native.callState();
        try {
            return Math.min(0, LibC.result((int) FLOCK.invokeExact(st, fd, op), st));
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /**
     * mmap(NULL, length, prot, MAP_SHARED, fd, 0), as a segment of that length owned by
     * {@code arena}: closing the arena unmaps it.
     */
    public static MemorySegment mmapShared(int fd, long length, int prot, Arena arena) throws NativeIOException {
        MemorySegment st = Native.callState();
        try {
            MemorySegment p = (MemorySegment) MMAP.invokeExact(st, MemorySegment.NULL, length, prot,
                    Linux.MAP_SHARED, fd, 0L);
            return Errno.okPointer("mmap", p, -1L, st, length + " bytes of fd " + fd)
                    .reinterpret(length, arena, SysCalls::munmap);
        } catch (NativeIOException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public static void munmap(MemorySegment mapping) {
        MemorySegment st = Native.callState();
        try {
            int r = (int) MUNMAP.invokeExact(st, mapping, mapping.byteSize());
            assert r == 0 : "munmap failed";
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** The interface's index in this network namespace, 0 when there is no such interface. */
    public static int ifNameToIndex(String name) {
        MemorySegment st = Native.callState();
        try (Arena arena = Arena.ofConfined()) {
            return (int) Interfaces.IF_NAMETOINDEX.invokeExact(st, arena.allocateFrom(name));
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public static void mount(String source, String target, String fstype) throws NativeIOException {
        MemorySegment st = Native.callState();
        int res;
        try (Arena arena = Arena.ofConfined()) {
            res = LibC.result((int) Mounting.MOUNT.invokeExact(st, arena.allocateFrom(source),
                    arena.allocateFrom(target), arena.allocateFrom(fstype), 0L, MemorySegment.NULL), st);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
        Errno.ok("mount -t " + fstype, res, target);
    }

    /** A directory entry's type as getdents64 gives it: DT_DIR. */
    public static final int DT_DIR = 4;
    /** ... and DT_UNKNOWN, where the file system does not say (the caller must stat). */
    public static final int DT_UNKNOWN = 0;

    /** An entry of a directory: its name and type ({@link #DT_DIR}, {@link #DT_UNKNOWN}, or another). */
    public record DirEntry(String name, int type) {
    }

    /**
     * The entries of directory {@code path} but "." and "..", with the types the file system
     * gives them (getdents64): no stat per entry, as {@code Files.walk} makes. A cgroup directory
     * of a node's pods has a few dozen interface files for each child cgroup.
     *
     * @throws NativeIOException naming the path (ENOENT: gone; ENOTDIR: not a directory)
     */
    public static java.util.List<DirEntry> listDirectory(String path) throws NativeIOException {
        int fd = open(path, Linux.O_RDONLY, 0);
        java.util.List<DirEntry> out = new java.util.ArrayList<>();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment buf = arena.allocate(32 * 1024, 8);
            MemorySegment st = Native.callState();
            while (true) {
                long n;
                try {
                    n = LibC.result((long) Directories.GETDENTS64.invokeExact(st, fd, buf, buf.byteSize()), st);
                } catch (Throwable t) {
                    throw Native.rethrow(t);
                }
                if (n == 0) {
                    return out;
                }
                if (n < 0) {
                    throw Errno.error("getdents64", n, path);
                }
                // struct linux_dirent64 { u64 d_ino; s64 d_off; u16 d_reclen; u8 d_type; char d_name[]; }
                for (long at = 0; at < n; ) {
                    int reclen = Short.toUnsignedInt(buf.get(ValueLayout.JAVA_SHORT_UNALIGNED, at + 16));
                    int type = Byte.toUnsignedInt(buf.get(ValueLayout.JAVA_BYTE, at + 18));
                    String name = buf.asSlice(at + 19, reclen - 19).getString(0);
                    if (!name.equals(".") && !name.equals("..")) {
                        out.add(new DirEntry(name, type));
                    }
                    at += reclen;
                }
            }
        } finally {
            LibC.close(fd);
        }
    }

    /** Undoes {@link #blockAsyncSignals()}: the thread's mask as it was. */
    public interface SignalMask extends AutoCloseable {
        @Override
        void close();
    }

    /**
     * Blocks, on the calling thread, every signal another thread or process may send it, until the
     * returned mask is closed (on the same thread): signals that arrive meanwhile are delivered
     * then. The verifier gives up with EAGAIN when a signal is pending for the loading thread, and
     * a JVM's own (JFR's and profilers' thread sampling, a thread dump) come every few
     * milliseconds while a program is verified: measured, async-profiler sampling every
     * millisecond failed every load of the sockmap4j programs. Signals a thread raises itself
     * (SIGSEGV and the like, which the JVM uses) stay deliverable.
     */
    public static SignalMask blockAsyncSignals() {
        Arena arena = Arena.ofConfined();
        try {
            MemorySegment set = arena.allocate(Signals.SIGSET_SIZE, 8);
            MemorySegment old = arena.allocate(Signals.SIGSET_SIZE, 8);
            int r = (int) Signals.SIGFILLSET.invokeExact(set);
            for (int sig : Signals.SYNCHRONOUS) {
                r |= (int) Signals.SIGDELSET.invokeExact(set, sig);
            }
            if (r != 0 || (int) Signals.PTHREAD_SIGMASK.invokeExact(Signals.SIG_BLOCK, set, old) != 0) {
                arena.close();
                return () -> { };
            }
            Thread owner = Thread.currentThread();
            return () -> {
                if (Thread.currentThread() != owner) {
                    throw new IllegalStateException("a signal mask is restored on the thread that set it");
                }
                try {
                    int ignored = (int) Signals.PTHREAD_SIGMASK.invokeExact(Signals.SIG_SETMASK, old, MemorySegment.NULL);
                } catch (Throwable t) {
                    throw Native.rethrow(t);
                } finally {
                    arena.close();
                }
            };
        } catch (Throwable t) {
            arena.close();
            throw Native.rethrow(t);
        }
    }
}
