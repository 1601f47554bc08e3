package io.github.sockmap4j.colocated;

import java.util.Map;
import java.util.TreeMap;

/**
 * Which bytes of a region's heap are free: first fit over a map of free runs kept in this
 * process's own memory (never in the region, where the peer could write), runs merged with their
 * neighbours when freed. Every place handed out is {@link #ALIGNMENT}-aligned. Thread-safe.
 */
public final class HeapSpace {
    /** Arrow's own buffers are 64-byte aligned; so is every place here. */
    public static final long ALIGNMENT = 64;

    private final long size;
    private final TreeMap<Long, Long> free = new TreeMap<>();
    private long used;

    public HeapSpace(long size) {
        if (size < 0 || size % ALIGNMENT != 0) {
            throw new IllegalArgumentException("a heap of " + size + " bytes: a multiple of " + ALIGNMENT);
        }
        this.size = size;
        if (size > 0) {
            free.put(0L, size);
        }
    }

    public static long round(long bytes) {
        return (bytes + ALIGNMENT - 1) & -ALIGNMENT;
    }

    /** The offset of {@code bytes} (rounded up to the alignment) now taken, or -1 where no free run holds them. */
    public synchronized long take(long bytes) {
        if (bytes <= 0 || bytes > size) {
            return bytes == 0 ? 0 : -1;
        }
        long want = round(bytes);
        for (Map.Entry<Long, Long> run : free.entrySet()) {
            long at = run.getKey();
            long length = run.getValue();
            if (length >= want) {
                free.remove(at);
                if (length > want) {
                    free.put(at + want, length - want);
                }
                used += want;
                return at;
            }
        }
        return -1;
    }

    /** Gives back what {@link #take} handed out at {@code at} for {@code bytes}. */
    public synchronized void give(long at, long bytes) {
        if (bytes == 0) {
            return;
        }
        long length = round(bytes);
        if (at < 0 || at + length > size) {
            throw new IllegalStateException("gave back " + length + " bytes at " + at + " of a heap of " + size);
        }
        Map.Entry<Long, Long> before = free.floorEntry(at);
        if (before != null && before.getKey() + before.getValue() > at) {
            throw new IllegalStateException("gave back " + length + " bytes at " + at + " that were free");
        }
        Map.Entry<Long, Long> after = free.ceilingEntry(at);
        if (after != null && at + length > after.getKey()) {
            throw new IllegalStateException("gave back " + length + " bytes at " + at + " over a free run");
        }
        used -= length;
        long start = at;
        if (before != null && before.getKey() + before.getValue() == at) {
            start = before.getKey();
            length += before.getValue();
            free.remove(start);
        }
        if (after != null && after.getKey() == at + round(bytes)) {
            length += after.getValue();
            free.remove(after.getKey());
        }
        free.put(start, length);
    }

    /** Bytes taken now. */
    public synchronized long used() {
        return used;
    }

    /** The largest run that {@link #take} could hand out now. */
    public synchronized long largestFree() {
        long max = 0;
        for (long length : free.values()) {
            max = Math.max(max, length);
        }
        return max;
    }

    public long size() {
        return size;
    }
}
