package io.github.sockmap4j.internal.flow;

import io.github.sockmap4j.linux.bpf.InFlightMaps;
import io.github.sockmap4j.linux.bpf.KernelSockmap;
import io.github.sockmap4j.linux.bpf.PolicyKeyLayout;
import io.github.sockmap4j.linux.bpf.ReadSlotLayout;
import io.github.sockmap4j.linux.bpf.SockKeyLayout;
import io.github.sockmap4j.linux.bpf.SockStateLayout;
import io.github.sockmap4j.linux.bpf.WatchLayout;
import io.github.sockmap4j.linux.net.NativeSocket;
import io.github.sockmap4j.linux.net.SocketIdentity;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.util.concurrent.atomic.LongAdder;

/**
 * The write credit of one connected socket (docs/in-flight-bound.md): what it may send now that
 * its receiver has not read, from the receiver's published read count or the watcher's estimate.
 * It holds its receiver's key, found once, and what was sent. The receiver's slot is looked up in {@code sm4j_rx} when first needed and again when its
 * cookie no longer owns it; without one, the watcher's entry in {@code sm4j_watch} (or the first
 * bound the verdict would give) stands in, as it does for the verdict. The socket's own slot,
 * where it publishes what it reads of its receiver, is looked up when a hold first asks whether
 * the receiver still sends, and while it is not found (or its cookie no longer owns it) again at
 * most every {@value #OWN_LOOK_MILLIS} ms: a socket may begin to publish after its first hold (a
 * Netty handler that writes as it is added, before the channel is active).
 *
 * <p><b>Note:</b> not threadsafe: one writer thread at a time, as for the socket's writes.
 */
public final class PeerCredit implements CreditEngine.Receiver {
    /** Credit when nothing holds the writer (the receiver has gone, or sets no bound). */
    public static final long UNLIMITED = Long.MAX_VALUE;
    private static final LongAdder WAITS = new LongAdder();
    private static final LongAdder WAIT_NANOS = new LongAdder();

    private final KernelSockmap kernel;
    private final InFlightMaps maps;
    private final NativeSocket socket;
    /** The receiver's key, and scratch for the lookups: made once per connection. */
    private final MemorySegment peerKey;
    /** This socket's own key, for its own read slot. */
    private final MemorySegment ownKey;
    private InFlightMaps.PeerSlot ownSlot;
    static final long OWN_LOOK_MILLIS = 10;
    private static final long OWN_LOOK_NANOS = OWN_LOOK_MILLIS * 1_000_000L;
    /** When the own slot was last looked up ({@link System#nanoTime()}); valid once {@link #ownLooked}. */
    private long ownLookedAt;
    private boolean ownLooked;
    private final MemorySegment rxScratch;
    private final MemorySegment watchScratch;
    private InFlightMaps.PeerSlot slot;
    private long sent;
    private long watchRead;
    private long watchBound = -1;
    /** The bound last seen, for {@link #worthSending}. */
    private long lastBound = CreditEngine.MIN_SEND * 4;
    private long lastRead;

    private PeerCredit(KernelSockmap kernel, NativeSocket socket, MemorySegment peerKey, MemorySegment ownKey,
            Arena arena) {
        this.kernel = kernel;
        this.maps = kernel.inFlight();
        this.socket = socket;
        this.peerKey = peerKey;
        this.ownKey = ownKey;
        this.rxScratch = arena.allocate(ReadSlotLayout.RX);
        this.watchScratch = arena.allocate(WatchLayout.WATCH);
    }

    /**
     * The credit of a connected socket, or null when nothing holds its writes: it or its peer is
     * not on the fast path, or the port's bound is off.
     */
    static PeerCredit resolve(KernelSockmap kernel, NativeSocket socket, SocketIdentity id, boolean serverSide)
            throws IOException {
        if (!kernel.holds(id)) {
            return null;
        }
        InetSocketAddress server = id.server(serverSide);
        if (kernel.policyBound(server.getAddress(), server.getPort()).orElse(0) == PolicyKeyLayout.UNBOUNDED) {
            return null;
        }
        Arena arena = Arena.ofAuto();
        MemorySegment key = arena.allocate(SockKeyLayout.LAYOUT);
        SockKeyLayout.fill(key, id.remote().getAddress(), id.remote().getPort(), id.local().getAddress(),
                id.local().getPort(), id.netns());
        if (!kernel.isRegistered(key, arena.allocate(ValueLayout.JAVA_LONG))) {
            return null;
        }
        MemorySegment own = arena.allocate(SockKeyLayout.LAYOUT);
        SockKeyLayout.fill(own, id.local().getAddress(), id.local().getPort(), id.remote().getAddress(),
                id.remote().getPort(), id.netns());
        return new PeerCredit(kernel, socket, key, own, arena);
    }

    /** Waits for credit counted in this process so far. */
    public static long waits() {
        return WAITS.sum();
    }

    /** The time those waits took, summed. */
    public static long waitNanos() {
        return WAIT_NANOS.sum();
    }

    /** Bytes that may be sent now; no system call for a receiver that publishes its reads. */
    @Override
    public long available() {
        InFlightMaps.PeerSlot s = slot;
        if (s != null) {
            try {
                long read = maps.slotRead(s);
                if (read >= 0) {
                    return credit(Integer.toUnsignedLong(maps.slotBound(s)), read);
                }
            } catch (IllegalStateException closed) {
                return UNLIMITED; // the Sockmap closed under the writer: nothing is redirected any more
            }
            slot = null; // the slot changed hands: look again on refresh
        }
        return watchBound < 0 ? 0 : credit(watchBound, watchRead);
    }

    private long credit(long bound, long read) {
        lastBound = bound;
        lastRead = read;
        return Math.max(0, bound - (sent - read));
    }

    /**
     * As {@link #available()}, after looking again at what the kernel holds (the receiver's slot,
     * which it may claim late, or the watcher's estimate): one or two system calls.
     */
    @Override
    public long refresh() {
        if (maps.isClosed()) {
            return UNLIMITED;
        }
        if (slot == null) {
            slot = maps.peerSlot(peerKey, rxScratch);
        }
        if (slot != null && maps.slotRead(slot) >= 0) {
            return available();
        }
        slot = null;
        if (maps.watchEntry(peerKey, watchScratch)) {
            watchRead = watchScratch.get(ValueLayout.JAVA_LONG, WatchLayout.READ);
            watchBound = Integer.toUnsignedLong(watchScratch.get(ValueLayout.JAVA_INT, WatchLayout.BOUND));
        } else {
            // No send has reached the verdict yet: it will give the first bound.
            watchRead = 0;
            watchBound = Integer.toUnsignedLong(maps.firstWatchBound(socket.intValue()));
        }
        return available();
    }

    @Override
    public String toString() {
        return "PeerCredit[sent=" + sent + ", slot=" + slot + ", watchRead=" + watchRead + ", watchBound=" + watchBound
                + ", lastBound=" + lastBound + "]";
    }

    /** The receiver's bound as last seen. */
    @Override
    public long bound() {
        return lastBound;
    }

    /** What the receiver has read as last seen. */
    @Override
    public long receiverRead() {
        return lastRead;
    }

    /**
     * What this socket has read of its receiver, from its own read slot (no system call once
     * found; while not found, a lookup at most every {@value #OWN_LOOK_MILLIS} ms); -1 when it
     * publishes nothing.
     */
    @Override
    public long readFromReceiver() {
        try {
            long read = ownSlot == null ? -1 : maps.slotRead(ownSlot);
            if (read < 0) {
                long now = System.nanoTime();
                if (!ownLooked || now - ownLookedAt >= OWN_LOOK_NANOS) {
                    ownLooked = true;
                    ownLookedAt = now;
                    ownSlot = maps.peerSlot(ownKey, rxScratch);
                    read = ownSlot == null ? -1 : maps.slotRead(ownSlot);
                }
            }
            return read;
        } catch (IllegalStateException closed) {
            return -1;
        }
    }

    /**
     * Whether the kernel sends this socket by TCP now (after a bound hit): it comes back to the
     * redirect at a send once its receiver has read everything sent. A system call.
     */
    @Override
    public boolean onTcp() {
        try {
            return (maps.socketFlags(socket.intValue()) & SockStateLayout.TCP) != 0;
        } catch (IllegalStateException closed) {
            return false;
        }
    }

    /** After {@code bytes > 0} were sent. */
    @Override
    public void sent(long bytes) {
        sent += bytes;
    }

    /** Whether the receiver has closed or died (its socket left the socket map). A system call. */
    @Override
    public boolean receiverGone() {
        return maps.isClosed() || !kernel.isRegistered(peerKey, rxScratch);
    }

    /** Counts a wait of {@code nanos} for credit in this process's statistics. */
    @Override
    public void waited(long nanos) {
        WAITS.increment();
        WAIT_NANOS.add(nanos);
    }
}
