package io.github.sockmap4j.internal.flow;

import io.github.sockmap4j.linux.bpf.InFlightMaps;
import io.github.sockmap4j.linux.bpf.ReadSlots;
import java.net.InetSocketAddress;

/**
 * A receiving channel's side of the in-flight bound (docs/in-flight-bound.md): after every read
 * it publishes, with one store into memory the verdict program reads, how many bytes the
 * channel has read; the sender's verdict redirects only while what it sent minus that stays
 * under the published bound.
 *
 * <p>The bound follows the reader as TCP's receive-buffer autotuning does: it starts at the
 * socket's SO_RCVBUF and grows, never shrinks, to twice what the reader took in the last
 * {@value #WINDOW_MILLIS} ms, up to net.ipv4.tcp_rmem's maximum. A reader that keeps up gets
 * room to stream; a slow one keeps the bound near SO_RCVBUF. A bound fixed by the application
 * (SO_RCVBUF set on the channel or its server channel, or a bound on the port's opt-in) stays
 * as set.
 *
 * <p><b>Note:</b> {@link #onRead} is called under the channel's read lock only; the limits may
 * change from other threads ({@link #fix}, {@link #unfix}).
 */
public final class ReadPublisher {
    static final long WINDOW_MILLIS = 10;
    private static final long WINDOW_NANOS = WINDOW_MILLIS * 1_000_000L;
    private static final long STALE_WINDOW_NANOS = 4 * WINDOW_NANOS;

    private final ReadSlotRegistry registry;
    private final InFlightMaps.ReadSlot slot;
    /** Where the slot's read count is stored: one release store per read, nothing in between. */
    private final ReadSlots slots;
    private final int index;
    private final InetSocketAddress server;
    private final int autoFloor;
    private final int autoCeiling;
    private volatile int floor;
    private volatile int ceiling;
    private int current;
    private long readTotal;
    private long windowStart = System.nanoTime();
    private long windowRead;

    ReadPublisher(ReadSlotRegistry registry, ReadSlots slots, InFlightMaps.ReadSlot slot, InetSocketAddress server,
                  int floor, int ceiling, int initial) {
        this.registry = registry;
        this.slots = slots;
        this.slot = slot;
        this.index = slot.index();
        this.server = server;
        this.autoFloor = floor;
        this.autoCeiling = ceiling;
        this.floor = floor;
        this.ceiling = ceiling;
        this.current = initial;
    }

    InFlightMaps.ReadSlot slot() {
        return slot;
    }

    InetSocketAddress server() {
        return server;
    }

    /** After a read of {@code n > 0} bytes. */
    public void onRead(int n) {
        readTotal += n;
        slots.publishRead(index, readTotal);
        int ceil = ceiling;
        // The clock is read only once the window's bytes could grow the bound: small reads (a
        // request, a reply) cost one store, nothing more.
        if (current >= ceil || 2 * (readTotal - windowRead) <= current) {
            return;
        }
        long now = System.nanoTime();
        long elapsed = now - windowStart;
        if (elapsed >= WINDOW_NANOS) {
            // Bytes read over a window much longer than WINDOW_MILLIS say nothing of the rate now.
            if (elapsed < STALE_WINDOW_NANOS) {
                long want = Math.min(ceil, Math.max(floor, 2 * (readTotal - windowRead)));
                if (want > current) {
                    current = (int) want;
                    slots.setBound(index, current);
                }
            }
            windowStart = now;
            windowRead = readTotal;
        }
    }

    /** The bound this receiver publishes now, or -1 once the fast path has closed. */
    public int bound() {
        return slots.bound(index);
    }

    /** The socket closed: its slot is free again. */
    public void close() {
        registry.release(this);
    }

    /** A bound fixed at {@code bytes} (the port's opt-in bound). */
    synchronized void fix(int bytes) {
        floor = bytes;
        ceiling = bytes;
        current = bytes;
        slots.setBound(index, bytes);
    }

    /** Back to the automatic bound. */
    synchronized void unfix() {
        floor = autoFloor;
        ceiling = autoCeiling;
        current = autoFloor;
        slots.setBound(index, autoFloor);
    }
}
