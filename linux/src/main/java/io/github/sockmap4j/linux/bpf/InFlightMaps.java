package io.github.sockmap4j.linux.bpf;

import io.github.sockmap4j.linux.ffi.Errno;
import io.github.sockmap4j.linux.ffi.Libbpf;
import io.github.sockmap4j.linux.ffi.Linux;
import io.github.sockmap4j.linux.ffi.SysCalls;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.util.ArrayList;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The maps of the in-flight bound (docs/in-flight-bound.md): {@code sm4j_rx} and the mmap-ed
 * {@code sm4j_slots} for receivers that publish their reads, {@code sm4j_watch} for receivers
 * that do not, and {@code sm4j_sockstate}, what each registered socket has sent.
 *
 * <p><b>Note:</b> this class is threadsafe. After {@link #close()} lookups answer "nothing" and
 * updates do nothing: a channel closing late must not fail for it.
 */
public final class InFlightMaps implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(InFlightMaps.class);

    private final Libbpf bpf;
    private final int rxFd;
    private final int watchFd;
    private final int stateFd;
    private final int configFd;
    /*
     * A shared arena owns the mapping: closing it waits until no thread is inside an access
     * and makes later ones throw, where a bare munmap would let a late read crash the JVM.
     */
    private final Arena slotsArena = Arena.ofShared();
    private final ReadSlots slots;
    private boolean closed;

    InFlightMaps(Libbpf bpf, PinnedObjects fds) throws IOException {
        this.bpf = bpf;
        this.rxFd = fds.rx();
        this.watchFd = fds.watch();
        this.stateFd = fds.sockState();
        this.configFd = fds.config();
        Libbpf.MapInfo info = bpf.mapInfo(fds.slots());
        long bytes = (long) info.valueSize() * info.maxEntries();
        long length = (bytes + 4095) & ~4095L;
        MemorySegment mapping = SysCalls.mmapShared(fds.slots(), length, Linux.PROT_READ | Linux.PROT_WRITE, slotsArena);
        this.slots = new ReadSlots(mapping, info.maxEntries());
    }

    /** A receiving socket's claim on a read slot; see {@link #claimReadSlot}. */
    public record ReadSlot(int index, long cookie, byte[] key) {
    }

    /** One receiver that publishes nothing, as the sender's verdict left it. */
    public record Watched(byte[] key, long sent, long read, int bound, int flags) {
    }

    /**
     * Claims a read slot for a receiving socket of this process and maps its key to it, so
     * that senders to it keep what they redirect unread under {@code bound}. Null when no slot
     * is free (the socket then receives without a bound, as before this mechanism).
     */
    public synchronized ReadSlot claimReadSlot(long cookie, InetAddress local, int localPort, InetAddress remote,
                                               int remotePort, long netns, int bound) throws IOException {
        ensureOpen();
        int idx = slots.claim(cookie, bound);
        if (idx < 0) {
            LOG.warn("No free read slot among {}: a connection receives without an in-flight bound", slots.count());
            return null;
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment key = arena.allocate(SockKeyLayout.LAYOUT);
            SockKeyLayout.fill(key, local, localPort, remote, remotePort, netns);
            MemorySegment val = arena.allocate(ReadSlotLayout.RX);
            val.set(ValueLayout.JAVA_INT, ReadSlotLayout.RX_SLOT, idx);
            val.set(ValueLayout.JAVA_LONG, ReadSlotLayout.RX_COOKIE, cookie);
            int r = bpf.tryMapUpdate(rxFd, key, val, Libbpf.BPF_ANY);
            if (r < 0) {
                slots.release(idx, cookie);
                throw Errno.error("bpf_map_update_elem(rx)", r);
            }
            return new ReadSlot(idx, cookie, key.toArray(ValueLayout.JAVA_BYTE));
        }
    }

    /** The mapped read slots, where receivers publish with plain stores. */
    public ReadSlots slots() {
        return slots;
    }

    public synchronized void releaseReadSlot(ReadSlot slot) {
        if (closed) {
            return; // the maps and the mapping are gone; the kernel's state callback dropped the entry
        }
        try (Arena arena = Arena.ofConfined()) {
            int r = bpf.tryMapDelete(rxFd, arena.allocateFrom(ValueLayout.JAVA_BYTE, slot.key()));
            assert r == 0 || -r == Errno.ENOENT : "rx delete: " + r;
        }
        slots.release(slot.index(), slot.cookie());
    }

    /**
     * What the receiving socket under this key published as read, or -1 when it publishes
     * nothing (no slot, or the slot changed hands), as the verdict program decides it.
     */
    public synchronized long publishedRead(InetAddress local, int localPort, InetAddress remote, int remotePort,
                                           long netns) {
        if (closed) {
            return -1;
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment key = arena.allocate(SockKeyLayout.LAYOUT);
            SockKeyLayout.fill(key, local, localPort, remote, remotePort, netns);
            MemorySegment rx = arena.allocate(ReadSlotLayout.RX);
            if (bpf.tryMapLookup(rxFd, key, rx) != 0) {
                return -1;
            }
            return slots.read(rx.get(ValueLayout.JAVA_INT, ReadSlotLayout.RX_SLOT),
                    rx.get(ValueLayout.JAVA_LONG, ReadSlotLayout.RX_COOKIE));
        }
    }

    /** The bytes a socket of this process had sent, redirected or by TCP, as of its last verdict. */
    public long socketSent(int socketFd) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment key = arena.allocateFrom(ValueLayout.JAVA_INT, socketFd);
            MemorySegment val = arena.allocate(SockStateLayout.LAYOUT);
            return bpf.tryMapLookup(stateFd, key, val) == 0
                    ? val.get(ValueLayout.JAVA_LONG, SockStateLayout.REDIRECTED)
                    + val.get(ValueLayout.JAVA_LONG, SockStateLayout.TCP_BYTES) : 0;
        }
    }

    /** The sm4j_sock_state flags of a socket of this process (0 when it has none). */
    public int socketFlags(int socketFd) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment key = arena.allocateFrom(ValueLayout.JAVA_INT, socketFd);
            MemorySegment val = arena.allocate(SockStateLayout.LAYOUT);
            return bpf.tryMapLookup(stateFd, key, val) == 0 ? val.get(ValueLayout.JAVA_INT, SockStateLayout.FLAGS) : 0;
        }
    }

    /** Where a receiving socket publishes its reads: its slot and the cookie that owns it. */
    public record PeerSlot(int index, long cookie) {
    }

    /**
     * The slot the receiving socket under {@code key} (a {@link SockKeyLayout}) publishes in, as
     * the verdict finds it; null when it publishes nothing. One map lookup (a system call).
     */
    public PeerSlot peerSlot(MemorySegment key, MemorySegment rxScratch) {
        if (bpf.tryMapLookup(rxFd, key, rxScratch) != 0) {
            return null;
        }
        return new PeerSlot(rxScratch.get(ValueLayout.JAVA_INT, ReadSlotLayout.RX_SLOT),
                rxScratch.get(ValueLayout.JAVA_LONG, ReadSlotLayout.RX_COOKIE));
    }

    /** What the owner of a slot has read, -1 when {@code cookie} no longer owns it. No system call. */
    public long slotRead(PeerSlot slot) {
        return slots.read(slot.index(), slot.cookie());
    }

    /** The bound a slot's owner publishes. No system call. */
    public int slotBound(PeerSlot slot) {
        return slots.bound(slot.index());
    }

    /**
     * The watcher's entry for a receiver that publishes nothing, read into {@code watchScratch}
     * ({@link WatchLayout#WATCH}); false when the verdict has made none yet. A system call.
     */
    public boolean watchEntry(MemorySegment key, MemorySegment watchScratch) {
        return bpf.tryMapLookup(watchFd, key, watchScratch) == 0;
    }

    /**
     * The bound a sender's first redirect to a receiver that publishes nothing gets, as the
     * verdict sets it: the socket's policy bound, else the configured first bound.
     */
    public int firstWatchBound(int socketFd) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment key = arena.allocateFrom(ValueLayout.JAVA_INT, socketFd);
            MemorySegment st = arena.allocate(SockStateLayout.LAYOUT);
            if (bpf.tryMapLookup(stateFd, key, st) == 0) {
                int policy = st.get(ValueLayout.JAVA_INT, SockStateLayout.POLICY_BOUND);
                if (policy != 0) {
                    return policy;
                }
            }
            MemorySegment zero = arena.allocate(ValueLayout.JAVA_INT);
            MemorySegment cfg = arena.allocate(WatchLayout.CONFIG);
            return bpf.tryMapLookup(configFd, zero, cfg) == 0
                    ? cfg.get(ValueLayout.JAVA_INT, WatchLayout.CONFIG_WATCH_BOUND) : 0;
        }
    }

    /** Every entry of sm4j_watch. */
    public synchronized List<Watched> watched() {
        List<Watched> out = new ArrayList<>();
        if (closed) {
            return out;
        }
        long ks = SockKeyLayout.LAYOUT.byteSize();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment prev = arena.allocate(ks, 8);
            MemorySegment next = arena.allocate(ks, 8);
            MemorySegment val = arena.allocate(WatchLayout.WATCH);
            MemorySegment cursor = MemorySegment.NULL;
            while (bpf.tryMapNextKey(watchFd, cursor, next) == 0) {
                if (bpf.tryMapLookup(watchFd, next, val) == 0) {
                    out.add(new Watched(next.toArray(ValueLayout.JAVA_BYTE),
                            val.get(ValueLayout.JAVA_LONG, WatchLayout.SENT),
                            val.get(ValueLayout.JAVA_LONG, WatchLayout.READ),
                            val.get(ValueLayout.JAVA_INT, WatchLayout.BOUND),
                            val.get(ValueLayout.JAVA_INT, WatchLayout.FLAGS)));
                }
                MemorySegment.copy(next, 0, prev, 0, ks);
                cursor = prev;
            }
        }
        return out;
    }

    /** Publishes a watcher's estimate for one receiver (only if the entry still exists). */
    public synchronized void updateWatched(byte[] key, long sent, long read, int bound, int flags) {
        if (closed) {
            return;
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment val = arena.allocate(WatchLayout.WATCH);
            val.set(ValueLayout.JAVA_LONG, WatchLayout.SENT, sent);
            val.set(ValueLayout.JAVA_LONG, WatchLayout.READ, read);
            val.set(ValueLayout.JAVA_INT, WatchLayout.BOUND, bound);
            val.set(ValueLayout.JAVA_INT, WatchLayout.FLAGS, flags);
            bpf.tryMapUpdate(watchFd, arena.allocateFrom(ValueLayout.JAVA_BYTE, key), val, Libbpf.BPF_EXIST);
        }
    }

    public synchronized boolean isClosed() {
        return closed;
    }

    private void ensureOpen() throws IOException {
        if (closed) {
            throw new IOException("the in-flight maps are closed");
        }
    }

    /** Unmaps the slots; the descriptors belong to the {@link KernelSockmap} that made this. */
    @Override
    public synchronized void close() {
        if (!closed) {
            closed = true;
            slotsArena.close();
        }
    }
}
