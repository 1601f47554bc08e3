package io.github.sockmap4j;

import io.github.sockmap4j.internal.bpf.InFlightMaps;
import io.github.sockmap4j.internal.bpf.KernelSockmap;
import io.github.sockmap4j.internal.bpf.PolicyKeyLayout;
import io.github.sockmap4j.internal.bpf.ReadSlotLayout;
import io.github.sockmap4j.internal.bpf.SockKeyLayout;
import io.github.sockmap4j.internal.bpf.SockStateLayout;
import io.github.sockmap4j.internal.bpf.WatchLayout;
import io.github.sockmap4j.internal.net.Sockets;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.util.concurrent.atomic.LongAdder;

/**
 * {@link WriteCredit} of one connected socket: its receiver's key, found once, and what was
 * sent. The receiver's slot is looked up in {@code sm4j_rx} when first needed and again when its
 * cookie no longer owns it; without one, the watcher's entry in {@code sm4j_watch} (or the first
 * bound the verdict would give) stands in, as it does for the verdict.
 */
final class PeerCredit implements WriteCredit {
    /** Sends smaller than this (unless they are all that is left) wait for more credit. */
    static final long MIN_SEND = 16 * 1024;
    private static final LongAdder WAITS = new LongAdder();
    private static final LongAdder WAIT_NANOS = new LongAdder();

    private final KernelSockmap kernel;
    private final InFlightMaps maps;
    private final int fd;
    /** The receiver's key, and scratch for the lookups: made once per connection. */
    private final MemorySegment peerKey;
    private final MemorySegment rxScratch;
    private final MemorySegment watchScratch;
    private InFlightMaps.PeerSlot slot;
    private long sent;
    private long watchRead;
    private long watchBound = -1;
    /** The bound last seen, for {@link #worthSending}. */
    private long lastBound = MIN_SEND * 4;
    private long lastRead;

    private PeerCredit(KernelSockmap kernel, int fd, MemorySegment peerKey, Arena arena) {
        this.kernel = kernel;
        this.maps = kernel.inFlight();
        this.fd = fd;
        this.peerKey = peerKey;
        this.rxScratch = arena.allocate(ReadSlotLayout.RX);
        this.watchScratch = arena.allocate(WatchLayout.WATCH);
    }

    /**
     * The credit of a connected socket, or null when nothing holds its writes: it or its peer is
     * not on the fast path, or the port's bound is off.
     */
    static PeerCredit resolve(KernelSockmap kernel, int fd, boolean serverSide) throws IOException {
        InetSocketAddress local = Sockets.localAddress(fd);
        InetSocketAddress remote = Sockets.remoteAddress(fd);
        long netns = Sockets.netnsCookie(fd);
        if (kernel.lookupSocket(local.getAddress(), local.getPort(), remote.getAddress(), remote.getPort(), netns)
                != Sockets.cookie(fd)) {
            return null;
        }
        InetSocketAddress server = serverSide ? local : remote;
        boolean unbounded = kernel.policyBound(server.getAddress(), server.getPort()).orElse(0)
                == PolicyKeyLayout.UNBOUNDED;
        return of(kernel, fd, local, remote, netns, unbounded);
    }

    private static PeerCredit of(KernelSockmap kernel, int fd, InetSocketAddress local, InetSocketAddress remote,
                         long netns, boolean unbounded) {
        if (unbounded) {
            return null;
        }
        Arena arena = Arena.ofAuto();
        MemorySegment key = arena.allocate(SockKeyLayout.LAYOUT);
        SockKeyLayout.fill(key, remote.getAddress(), remote.getPort(), local.getAddress(), local.getPort(), netns);
        if (!kernel.isRegistered(key, arena.allocate(ValueLayout.JAVA_LONG))) {
            return null;
        }
        return new PeerCredit(kernel, fd, key, arena);
    }

    static FlowStats stats() {
        return new FlowStats(WAITS.sum(), WAIT_NANOS.sum());
    }

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
            watchBound = Integer.toUnsignedLong(maps.firstWatchBound(fd));
        }
        return available();
    }

    @Override
    public String toString() {
        return "PeerCredit[sent=" + sent + ", slot=" + slot + ", watchRead=" + watchRead + ", watchBound=" + watchBound
                + ", lastBound=" + lastBound + "]";
    }

    @Override
    public long worthSending(long remaining) {
        return Math.max(1, Math.min(remaining, Math.min(MIN_SEND, lastBound / 4)));
    }

    @Override
    public long bound() {
        return lastBound;
    }

    @Override
    public long receiverRead() {
        return lastRead;
    }

    @Override
    public boolean onTcp() {
        try {
            return (maps.socketFlags(fd) & SockStateLayout.TCP) != 0;
        } catch (IllegalStateException closed) {
            return false;
        }
    }

    @Override
    public void sent(long bytes) {
        sent += bytes;
    }

    @Override
    public boolean receiverGone() {
        return maps.isClosed() || !kernel.isRegistered(peerKey, rxScratch);
    }

    @Override
    public void waited(long nanos) {
        WAITS.increment();
        WAIT_NANOS.add(nanos);
    }
}
