package io.github.sockmap4j.linux.bpf;

import io.github.sockmap4j.linux.ffi.Errno;
import io.github.sockmap4j.linux.ffi.LibC;
import io.github.sockmap4j.linux.ffi.Libbpf;
import io.github.sockmap4j.linux.ffi.NativeIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.function.Consumer;

/**
 * A BPF map by its descriptor: its name (for errors), the size of its keys, and the calls on it,
 * each one system call, with its error said in one place ({@code bpf_map_update_elem(NAME)} and
 * what was written). The map wrappers ({@link PolicyMap}, {@link ServiceMap},
 * {@link LocalPeersMap}) hold one and say only what their keys and values mean.
 *
 * <p><b>Note:</b> calls are threadsafe as the kernel makes each one; {@link #close} is not, with
 * calls in flight.
 */
final class BpfMap implements AutoCloseable {
    private final Libbpf bpf;
    private final String name;
    private final long keySize;
    private volatile int fd;

    private BpfMap(Libbpf bpf, String name, int fd, long keySize) {
        this.bpf = bpf;
        this.name = name;
        this.fd = fd;
        this.keySize = keySize;
    }

    /** The map of descriptor {@code fd}, which this object then closes. */
    static BpfMap of(Libbpf bpf, String name, int fd, long keySize) {
        return new BpfMap(bpf, name, fd, keySize);
    }

    /** {@code pin} of {@code pinDir}; throws naming the pin when the directory has none. */
    static BpfMap open(Libbpf bpf, Pin pin, Path pinDir, long keySize) throws NativeIOException {
        return new BpfMap(bpf, pin.fileName, pin.open(bpf, pinDir), keySize);
    }

    int fd() {
        return fd;
    }

    /** Update; 0 or {@code -errno} (E2BIG/ENOSPC when full, EEXIST with BPF_NOEXIST, EBADF once closed). */
    int tryUpdate(MemorySegment key, MemorySegment value, long flags) {
        int f = fd;
        return f < 0 ? -Errno.EBADF : bpf.tryMapUpdate(f, key, value, flags);
    }

    /** Update, or throw naming this map and {@code what} (null: nothing more). */
    void update(MemorySegment key, MemorySegment value, long flags, String what) throws NativeIOException {
        int r = tryUpdate(key, value, flags);
        if (r < 0) {
            throw error("bpf_map_update_elem", r, what);
        }
    }

    /** Looks {@code key} up into {@code value}: whether it was there. */
    boolean lookup(MemorySegment key, MemorySegment value) {
        int f = fd;
        return f >= 0 && bpf.tryMapLookup(f, key, value) == 0;
    }

    /** Delete; 0 or {@code -errno} (ENOENT when absent, EBADF once closed). */
    int tryDelete(MemorySegment key) {
        int f = fd;
        return f < 0 ? -Errno.EBADF : bpf.tryMapDelete(f, key);
    }

    /** Delete: whether it was there; throws, naming {@code what}, on any error but its absence. */
    boolean delete(MemorySegment key, String what) throws NativeIOException {
        int r = tryDelete(key);
        if (r < 0 && -r != Errno.ENOENT) {
            throw error("bpf_map_delete_elem", r, what);
        }
        return r == 0;
    }

    /**
     * Calls {@code each} with every key, in the kernel's order; the segment is valid during the
     * call only. A key removed meanwhile may end the walk early or be seen: the kernel's walk.
     */
    void forEachKey(Consumer<MemorySegment> each) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment prev = arena.allocate(keySize, 8);
            MemorySegment next = arena.allocate(keySize, 8);
            MemorySegment from = MemorySegment.NULL;
            int f = fd;
            while (f >= 0 && bpf.tryMapNextKey(f, from, next) == 0) {
                MemorySegment.copy(next, 0, prev, 0, keySize);
                from = prev;
                each.accept(prev);
            }
        }
    }

    /** How many keys the map holds now. */
    int count() {
        int[] n = {0};
        forEachKey(k -> n[0]++);
        return n[0];
    }

    private NativeIOException error(String call, int r, String what) {
        return what == null ? Errno.error(call + "(" + name + ")", r)
                : Errno.error(call + "(" + name + ")", r, what);
    }

    @Override
    public void close() {
        int f = fd;
        fd = -1;
        if (f >= 0) {
            LibC.close(f);
        }
    }
}
