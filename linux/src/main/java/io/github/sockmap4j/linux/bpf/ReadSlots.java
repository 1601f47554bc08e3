package io.github.sockmap4j.linux.bpf;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.util.concurrent.ThreadLocalRandom;

/**
 * The mmap-ed {@code sm4j_slots} array, shared by every process of a pin directory and read by
 * the verdict program. A receiver claims a free slot with a compare-and-set of its socket
 * cookie, then publishes with plain (release) stores how many bytes it has read: no syscall per
 * read.
 *
 * <p><b>Note:</b> this class is threadsafe; a slot's {@code read} has one writer, its owner.
 */
public final class ReadSlots {
    private static final VarHandle LONG = ValueLayout.JAVA_LONG.varHandle();
    private static final VarHandle INT = ValueLayout.JAVA_INT.varHandle();
    private static final long SIZE = ReadSlotLayout.SLOT.byteSize();

    private final MemorySegment mem;
    private final int count;

    ReadSlots(MemorySegment mem, int count) {
        if (mem.byteSize() < count * SIZE) {
            throw new IllegalArgumentException("mapping too small: bytes=" + mem.byteSize() + ", slots=" + count);
        }
        this.mem = mem;
        this.count = count;
    }

    /**
     * Slot 0's wake counter: the verdict bumps it when a watch entry is made or set WANTED (a
     * plain acquire load, no syscall); -1 after the pin directory closed.
     */
    public long wake() {
        try {
            return (long) LONG.getAcquire(mem, ReadSlotLayout.SLOT_WAKE);
        } catch (IllegalStateException closed) {
            return -1;
        }
    }

    /** Claims a free slot for {@code cookie} with read 0; -1 when every slot is taken. */
    int claim(long cookie, int bound) {
        int start = ThreadLocalRandom.current().nextInt(count);
        for (int i = 0; i < count; i++) {
            int idx = (start + i) % count;
            long off = idx * SIZE;
            if ((long) LONG.getAcquire(mem, off + ReadSlotLayout.SLOT_COOKIE) == 0L
                    && LONG.compareAndSet(mem, off + ReadSlotLayout.SLOT_COOKIE, 0L, cookie)) {
                LONG.setRelease(mem, off + ReadSlotLayout.SLOT_READ, 0L);
                INT.setRelease(mem, off + ReadSlotLayout.SLOT_BOUND, bound);
                return idx;
            }
        }
        return -1;
    }

    /**
     * Publishes the owner's read count (a release store: the verdict may read it any time).
     * After the pin directory was closed in this process it does nothing.
     */
    public void publishRead(int idx, long read) {
        try {
            LONG.setRelease(mem, idx * SIZE + ReadSlotLayout.SLOT_READ, read);
        } catch (IllegalStateException closed) {
            // The mapping is gone with its Sockmap: nobody reads the slot any more.
        }
    }

    /** Publishes the bound the owner of slot {@code idx} sets; nothing after the pin directory closed. */
    public void setBound(int idx, int bound) {
        try {
            INT.setRelease(mem, idx * SIZE + ReadSlotLayout.SLOT_BOUND, bound);
        } catch (IllegalStateException closed) {
            // The mapping is gone with its Sockmap.
        }
    }

    /** The bound published in slot {@code idx}, or -1 after the pin directory closed. */
    public int bound(int idx) {
        try {
            return (int) INT.getAcquire(mem, idx * SIZE + ReadSlotLayout.SLOT_BOUND);
        } catch (IllegalStateException closed) {
            return -1;
        }
    }

    /** The read count of slot {@code idx} if {@code cookie} owns it, else -1. */
    long read(int idx, long cookie) {
        if (idx < 0 || idx >= count) {
            return -1;
        }
        long off = idx * SIZE;
        long read = (long) LONG.getAcquire(mem, off + ReadSlotLayout.SLOT_READ);
        return (long) LONG.getAcquire(mem, off + ReadSlotLayout.SLOT_COOKIE) == cookie ? read : -1;
    }

    void release(int idx, long cookie) {
        try {
            LONG.compareAndSet(mem, idx * SIZE + ReadSlotLayout.SLOT_COOKIE, cookie, 0L);
        } catch (IllegalStateException closed) {
            // The mapping is gone with its Sockmap.
        }
    }

    int count() {
        return count;
    }
}
