package io.github.sockmap4j.linux.ffi;

import static io.github.sockmap4j.linux.ffi.Native.C_INT;
import static io.github.sockmap4j.linux.ffi.Native.C_LONG;
import static io.github.sockmap4j.linux.ffi.Native.C_PTR;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * The part of libbpf 1.x ({@code libbpf.so.1}) sockmap4j uses. libbpf 1.x returns
 * {@code -errno} from int-returning calls and NULL with errno set from pointer-returning
 * ones; both become a {@link NativeIOException} naming the call.
 *
 * <p>Load with {@link #load()}: it fails with a readable cause when libbpf is missing, which
 * the availability probe reports.
 */
@SuppressWarnings("restricted")
public final class Libbpf {
    public static final int BPF_MAP_TYPE_SOCKHASH = 18;
    public static final int BPF_MAP_TYPE_SK_STORAGE = 24;
    public static final int BPF_PROG_TYPE_SOCK_OPS = 13;
    public static final int BPF_PROG_TYPE_SK_MSG = 16;
    public static final int BPF_CGROUP_SOCK_OPS = 3;
    public static final int BPF_CGROUP_INET4_CONNECT = 10;
    public static final int BPF_CGROUP_INET6_CONNECT = 11;
    public static final int BPF_CGROUP_GETSOCKOPT = 21;
    public static final int BPF_CGROUP_INET4_GETPEERNAME = 29;
    public static final int BPF_CGROUP_INET6_GETPEERNAME = 30;
    public static final int BPF_SK_MSG_VERDICT = 7;
    public static final int BPF_XDP = 37;
    public static final long BPF_ANY = 0;
    public static final long BPF_NOEXIST = 1;
    public static final long BPF_EXIST = 2;

    private static volatile Libbpf instance;

    private final MethodHandle objGet;
    private final MethodHandle mapUpdate;
    private final MethodHandle mapLookup;
    private final MethodHandle mapDelete;
    private final MethodHandle mapNextKey;
    private final MethodHandle probeMapType;
    private final MethodHandle probeProgType;
    private final MethodHandle numPossibleCpus;
    private final MethodHandle objGetInfo;
    private final MethodHandle enableStats;

    private final SymbolLookup lib;
    /** What only loading, pinning and attaching use, linked when first needed. */
    private volatile Loader loader;

    private Libbpf(SymbolLookup lib) {
        this.lib = lib;
        objGet = Native.plain(lib, "bpf_obj_get", FunctionDescriptor.of(C_INT, C_PTR));
        mapUpdate = Native.plain(lib, "bpf_map_update_elem",
                FunctionDescriptor.of(C_INT, C_INT, C_PTR, C_PTR, C_LONG));
        mapLookup = Native.plain(lib, "bpf_map_lookup_elem",
                FunctionDescriptor.of(C_INT, C_INT, C_PTR, C_PTR));
        mapDelete = Native.plain(lib, "bpf_map_delete_elem",
                FunctionDescriptor.of(C_INT, C_INT, C_PTR));
        mapNextKey = Native.plain(lib, "bpf_map_get_next_key",
                FunctionDescriptor.of(C_INT, C_INT, C_PTR, C_PTR));
        probeMapType = Native.plain(lib, "libbpf_probe_bpf_map_type",
                FunctionDescriptor.of(C_INT, C_INT, C_PTR));
        probeProgType = Native.plain(lib, "libbpf_probe_bpf_prog_type",
                FunctionDescriptor.of(C_INT, C_INT, C_PTR));
        numPossibleCpus = Native.plain(lib, "libbpf_num_possible_cpus", FunctionDescriptor.of(C_INT));
        objGetInfo = Native.plain(lib, "bpf_obj_get_info_by_fd", FunctionDescriptor.of(C_INT, C_INT, C_PTR, C_PTR));
        enableStats = Native.plain(lib, "bpf_enable_stats", FunctionDescriptor.of(C_INT, C_INT));
    }

    /**
     * libbpf's loading, pinning and attaching functions, and the callback its messages take:
     * a process that only opens pins and uses maps (an application under an agent) never links
     * them. Each linked downcall of a new shape costs the JVM about a MiB of memory.
     */
    private static final class Loader {
        final MethodHandle objectOpenMem;
        final MethodHandle objectFindMap;
        final MethodHandle mapSetMaxEntries;
        final MethodHandle mapSetInitialValue;
        final MethodHandle objectLoad;
        final MethodHandle objectFindProgram;
        final MethodHandle programFd;
        final MethodHandle mapFd;
        final MethodHandle objectClose;
        final MethodHandle objPin;
        final MethodHandle progAttach;
        final MethodHandle progDetach2;
        final MethodHandle linkCreate;
        final MethodHandle progTestRun;

        Loader(SymbolLookup lib) {
            objectOpenMem = Native.downcall(lib, "bpf_object__open_mem",
                    FunctionDescriptor.of(C_PTR, C_PTR, C_LONG, C_PTR));
            objectFindMap = Native.plain(lib, "bpf_object__find_map_by_name",
                    FunctionDescriptor.of(C_PTR, C_PTR, C_PTR));
            mapSetMaxEntries = Native.plain(lib, "bpf_map__set_max_entries",
                    FunctionDescriptor.of(C_INT, C_PTR, C_INT));
            mapSetInitialValue = Native.plain(lib, "bpf_map__set_initial_value",
                    FunctionDescriptor.of(C_INT, C_PTR, C_PTR, C_LONG));
            objectLoad = Native.plain(lib, "bpf_object__load", FunctionDescriptor.of(C_INT, C_PTR));
            objectFindProgram = Native.plain(lib, "bpf_object__find_program_by_name",
                    FunctionDescriptor.of(C_PTR, C_PTR, C_PTR));
            programFd = Native.plain(lib, "bpf_program__fd", FunctionDescriptor.of(C_INT, C_PTR));
            mapFd = Native.plain(lib, "bpf_map__fd", FunctionDescriptor.of(C_INT, C_PTR));
            objectClose = Native.plain(lib, "bpf_object__close", FunctionDescriptor.ofVoid(C_PTR));
            objPin = Native.plain(lib, "bpf_obj_pin", FunctionDescriptor.of(C_INT, C_INT, C_PTR));
            progAttach = Native.plain(lib, "bpf_prog_attach",
                    FunctionDescriptor.of(C_INT, C_INT, C_INT, C_INT, C_INT));
            progDetach2 = Native.plain(lib, "bpf_prog_detach2",
                    FunctionDescriptor.of(C_INT, C_INT, C_INT, C_INT));
            linkCreate = Native.plain(lib, "bpf_link_create",
                    FunctionDescriptor.of(C_INT, C_INT, C_INT, C_INT, C_PTR));
            progTestRun = Native.plain(lib, "bpf_prog_test_run_opts", FunctionDescriptor.of(C_INT, C_INT, C_PTR));
            LibbpfLog.install(lib);
        }
    }

    private Loader loader() {
        Loader l = loader;
        if (l == null) {
            synchronized (this) {
                l = loader;
                if (l == null) {
                    l = new Loader(lib);
                    loader = l;
                }
            }
        }
        return l;
    }

    /**
     * libbpf.so.1, loaded once.
     *
     * @throws UnsatisfiedLinkError naming what to install when it is missing
     */
    public static Libbpf load() {
        Libbpf l = instance;
        if (l == null) {
            synchronized (Libbpf.class) {
                l = instance;
                if (l == null) {
                    SymbolLookup lib;
                    try {
                        lib = SymbolLookup.libraryLookup("libbpf.so.1", Arena.global());
                    } catch (IllegalArgumentException e) {
                        UnsatisfiedLinkError err = new UnsatisfiedLinkError(
                                "libbpf.so.1 not found: install libbpf 1.x (Debian/Ubuntu: apt-get install libbpf1)");
                        err.initCause(e);
                        throw err;
                    }
                    l = new Libbpf(lib);
                    instance = l;
                }
            }
        }
        return l;
    }

    /**
     * {@link #load()} for callers that report failures as {@link IOException}s (the command line,
     * the node's tools): a missing libbpf is one more reason a command cannot run.
     *
     * @throws IOException naming what to install when libbpf is missing
     */
    public static Libbpf loadOrThrow() throws IOException {
        try {
            return load();
        } catch (UnsatisfiedLinkError e) {
            throw new IOException(e.getMessage(), e);
        }
    }

    /** libbpf's symbols, for the downcalls other classes of this package link (ProgQuery). */
    SymbolLookup symbols() {
        return lib;
    }

    /** A libbpf call returning an int or {@code -errno}. */
    @FunctionalInterface
    private interface IntCall {
        int call() throws Throwable;
    }

    /** Runs a call that is not on a hot path (load, attach, info) through {@link Errno#ok}. */
    private static int call(String op, IntCall c) throws NativeIOException {
        int res;
        try {
            res = c.call();
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
        return Errno.ok(op, res);
    }

    /** Opens an ELF object from memory (not yet loaded into the kernel). */
    public MemorySegment openObject(MemorySegment elf) throws NativeIOException {
        MemorySegment st = Native.callState();
        try {
            MemorySegment obj = (MemorySegment) loader().objectOpenMem.invokeExact(st, elf, elf.byteSize(),
                    MemorySegment.NULL);
            return Errno.okPointer("bpf_object__open_mem", obj, 0L, st, null);
        } catch (NativeIOException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public MemorySegment findMap(MemorySegment obj, String name) throws NativeIOException {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment m = (MemorySegment) loader().objectFindMap.invokeExact(obj, arena.allocateFrom(name));
            if (m.equals(MemorySegment.NULL)) {
                throw Errno.error("bpf_object__find_map_by_name", -Errno.ENOENT, name);
            }
            return m;
        } catch (NativeIOException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public MemorySegment findProgram(MemorySegment obj, String name) throws NativeIOException {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment p = (MemorySegment) loader().objectFindProgram.invokeExact(obj, arena.allocateFrom(name));
            if (p.equals(MemorySegment.NULL)) {
                throw Errno.error("bpf_object__find_program_by_name", -Errno.ENOENT, name);
            }
            return p;
        } catch (NativeIOException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public void setMaxEntries(MemorySegment map, int n) throws NativeIOException {
        call("bpf_map__set_max_entries", () -> (int) loader().mapSetMaxEntries.invokeExact(map, n));
    }

    /**
     * Sets what a map of a global data section ({@code .rodata}) holds when the object loads; its
     * size must be the section's.
     */
    public void setInitialValue(MemorySegment map, MemorySegment data) throws NativeIOException {
        call("bpf_map__set_initial_value", () -> (int) loader().mapSetInitialValue.invokeExact(map, data, data.byteSize()));
    }

    /**
     * Loads every program and creates every map; the verifier's log goes to the debug logger. The
     * calling thread's signals are blocked meanwhile
     * ({@link SysCalls#blockAsyncSignals}): a signal pending while the verifier runs makes it give
     * up with EAGAIN.
     */
    @SuppressWarnings("try") // the mask is held for the block's length
    public void loadObject(MemorySegment obj) throws NativeIOException {
        try (SysCalls.SignalMask masked = SysCalls.blockAsyncSignals()) {
            Errno.ok("bpf_object__load", (int) loader().objectLoad.invokeExact(obj));
        } catch (NativeIOException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        } finally {
            Native.trimMalloc(); // the kernel BTF the load parsed and freed
        }
    }

    public int programFd(MemorySegment prog) throws NativeIOException {
        return call("bpf_program__fd", () -> (int) loader().programFd.invokeExact(prog));
    }

    public int mapFd(MemorySegment map) throws NativeIOException {
        return call("bpf_map__fd", () -> (int) loader().mapFd.invokeExact(map));
    }

    /** Frees libbpf's object; fds already taken with dup semantics stay with their owner. */
    public void closeObject(MemorySegment obj) {
        try {
            loader().objectClose.invokeExact(obj);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public void pin(int fd, String path) throws NativeIOException {
        try (Arena arena = Arena.ofConfined()) {
            int res = (int) loader().objPin.invokeExact(fd, arena.allocateFrom(path));
            if (res < 0) {
                throw Errno.error("bpf_obj_pin", res, path);
            }
        } catch (NativeIOException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** Opens a pinned object; {@code -errno} (ENOENT when absent). */
    public int tryGetPinned(String path) {
        try (Arena arena = Arena.ofConfined()) {
            return (int) objGet.invokeExact(arena.allocateFrom(path));
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public void progAttach(int progFd, int targetFd, int attachType) throws NativeIOException {
        call("bpf_prog_attach", () -> (int) loader().progAttach.invokeExact(progFd, targetFd, attachType, 0));
    }

    public int tryProgDetach(int progFd, int targetFd, int attachType) {
        try {
            return (int) loader().progDetach2.invokeExact(progFd, targetFd, attachType);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** A BPF link with link_create flags (XDP modes); {@code -errno} on failure. */
    public int tryLinkCreate(int progFd, int targetFd, int attachType, int flags) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment opts = arena.allocate(NativeLayouts.LINK_CREATE_OPTS);
            opts.set(ValueLayout.JAVA_LONG, NativeLayouts.LINK_OPTS_SZ, opts.byteSize());
            opts.set(ValueLayout.JAVA_INT, NativeLayouts.LINK_OPTS_FLAGS, flags);
            return (int) loader().linkCreate.invokeExact(progFd, targetFd, attachType, opts);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /**
     * {@code BPF_PROG_TEST_RUN}: runs a loaded program once on {@code data} (for XDP, a frame from
     * its Ethernet header on) without attaching it anywhere, and returns what it returned (an XDP
     * action). Needs CAP_BPF (or CAP_SYS_ADMIN).
     */
    public int progTestRun(int progFd, byte[] data) throws NativeIOException {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment in = arena.allocate(Math.max(1, data.length));
            MemorySegment.copy(data, 0, in, ValueLayout.JAVA_BYTE, 0, data.length);
            MemorySegment opts = arena.allocate(NativeLayouts.TEST_RUN_OPTS);
            opts.set(ValueLayout.JAVA_LONG, NativeLayouts.TEST_RUN_SZ, opts.byteSize());
            opts.set(ValueLayout.ADDRESS, NativeLayouts.TEST_RUN_DATA_IN, in);
            opts.set(ValueLayout.JAVA_INT, NativeLayouts.TEST_RUN_DATA_SIZE_IN, data.length);
            opts.set(ValueLayout.JAVA_INT, NativeLayouts.TEST_RUN_REPEAT, 1);
            Errno.ok("bpf_prog_test_run_opts", (int) loader().progTestRun.invokeExact(progFd, opts));
            return opts.get(ValueLayout.JAVA_INT, NativeLayouts.TEST_RUN_RETVAL);
        } catch (NativeIOException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** A BPF link: the attachment lives as long as the link fd or its pin. */
    public int linkCreate(int progFd, int targetFd, int attachType) throws NativeIOException {
        return call("bpf_link_create",
                () -> (int) loader().linkCreate.invokeExact(progFd, targetFd, attachType, MemorySegment.NULL));
    }

    /** Update; 0 or {@code -errno} (E2BIG/ENOSPC when full, EEXIST with BPF_NOEXIST). */
    public int tryMapUpdate(int fd, MemorySegment key, MemorySegment value, long flags) {
        try {
            return (int) mapUpdate.invokeExact(fd, key, value, flags);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** Lookup; 0 or {@code -errno} (ENOENT when absent). */
    public int tryMapLookup(int fd, MemorySegment key, MemorySegment value) {
        try {
            return (int) mapLookup.invokeExact(fd, key, value);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** Delete; 0 or {@code -errno} (ENOENT when absent). */
    public int tryMapDelete(int fd, MemorySegment key) {
        try {
            return (int) mapDelete.invokeExact(fd, key);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** Next key after {@code key} (NULL for the first); 0 or {@code -errno} (ENOENT at the end). */
    public int tryMapNextKey(int fd, MemorySegment key, MemorySegment next) {
        try {
            return (int) mapNextKey.invokeExact(fd, key, next);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** 1 when the kernel supports the map type, 0 when not, {@code -errno} when the probe failed. */
    public int probeMapType(int type) {
        try {
            return (int) probeMapType.invokeExact(type, MemorySegment.NULL);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public int probeProgType(int type) {
        try {
            return (int) probeProgType.invokeExact(type, MemorySegment.NULL);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** A map's geometry, from {@code struct bpf_map_info}. */
    public record MapInfo(int type, int keySize, int valueSize, int maxEntries, int flags) {
    }

    public MapInfo mapInfo(int mapFd) throws NativeIOException {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment info = arena.allocate(NativeLayouts.BPF_MAP_INFO);
            MemorySegment len = arena.allocateFrom(ValueLayout.JAVA_INT, (int) info.byteSize());
            Errno.ok("bpf_obj_get_info_by_fd", (int) objGetInfo.invokeExact(mapFd, info, len));
            return new MapInfo(info.get(ValueLayout.JAVA_INT, NativeLayouts.MAP_INFO_TYPE),
                    info.get(ValueLayout.JAVA_INT, NativeLayouts.MAP_INFO_KEY_SIZE),
                    info.get(ValueLayout.JAVA_INT, NativeLayouts.MAP_INFO_VALUE_SIZE),
                    info.get(ValueLayout.JAVA_INT, NativeLayouts.MAP_INFO_MAX_ENTRIES),
                    info.get(ValueLayout.JAVA_INT, NativeLayouts.MAP_INFO_FLAGS));
        } catch (NativeIOException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** A program's run statistics, from {@code struct bpf_prog_info}: counted while BPF stats are on. */
    public record ProgRuns(long runCount, long runTimeNanos) {
    }

    public ProgRuns progRuns(int progFd) throws NativeIOException {
        try (Arena arena = Arena.ofConfined()) {
            // The kernel fills at most what we pass and says how much it knows: a kernel whose
            // struct ends before run_cnt has no run statistics.
            MemorySegment info = arena.allocate(NativeLayouts.BPF_PROG_INFO);
            MemorySegment len = arena.allocateFrom(ValueLayout.JAVA_INT, (int) info.byteSize());
            Errno.ok("bpf_obj_get_info_by_fd", (int) objGetInfo.invokeExact(progFd, info, len));
            if (len.get(ValueLayout.JAVA_INT, 0) < info.byteSize()) {
                return new ProgRuns(-1, -1);
            }
            return new ProgRuns(info.get(ValueLayout.JAVA_LONG, NativeLayouts.PROG_INFO_RUN_CNT),
                    info.get(ValueLayout.JAVA_LONG, NativeLayouts.PROG_INFO_RUN_TIME_NS));
        } catch (NativeIOException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /**
     * {@code BPF_ENABLE_STATS(BPF_STATS_RUN_TIME)}: the kernel counts every program's runs and run
     * time while the returned fd is open (needs CAP_SYS_ADMIN).
     */
    public int enableRunStats() throws NativeIOException {
        return call("bpf_enable_stats", () -> (int) enableStats.invokeExact(0));
    }

    public int possibleCpus() throws NativeIOException {
        return call("libbpf_num_possible_cpus", () -> (int) numPossibleCpus.invokeExact());
    }
}
