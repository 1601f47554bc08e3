package io.github.sockmap4j.linux.bpf;

import io.github.sockmap4j.linux.sys.NetnsDiags;
import io.github.sockmap4j.linux.sys.SockDiag;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Publishes, for receivers that publish nothing themselves (a JDK socket, a C server), how many
 * bytes they surely read: what their sender had sent, minus all the receiver's receive memory,
 * minus all the sender's send queue, as sock_diag reports them, the sender's first. Both memories
 * count more than the bytes they hold, so the estimate is never above the truth: staleness or
 * slack only keeps a sender on TCP longer. Where the kernel lets the verdict count a receiver's
 * reads exactly, that count replaces the estimate at every message, and the verdict marks the
 * receiver EXACT: it is not polled at all until its sender waits on it (WANTED), when the
 * estimate's only use is to grow its bound with its read rate. Receivers of new connections, and those whose senders the verdict
 * marked WANTED (held on TCP, or near the bound), are polled every millisecond for the next
 * 100 ms, the others every 50 (the map is looked at every 10 for new or WANTED entries); the
 * bound grows with the receiver's read rate, as a publishing receiver's does.
 *
 * <p>It needs nothing of an application: any process that can open the pin directory's maps
 * can run one. Built without cgroups it sees the connections of its own network namespace
 * only; a loopback connection of another namespace (its key carries that namespace's cookie)
 * is left alone. Built over cgroups (the node agent) it also looks in the namespace of every
 * process in them, found again every second ({@link NetnsDiags}): the two ends of a pod-to-pod
 * connection may be in two namespaces.
 *
 * <p><b>Note:</b> {@link #start()} and {@link #close()} are threadsafe; the loop runs on a
 * daemon thread of its own.
 */
public final class InFlightWatcher implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(InFlightWatcher.class);
    private static final long WANTED_POLL_NANOS = 1_000_000L;
    private static final long IDLE_POLL_NANOS = 50_000_000L;
    /**
     * The longest poll interval of a receiver whose estimate stopped moving while its sender sent
     * nothing new (an idle connection whose memories never quite reach what was sent): nobody
     * waits on it (a sender held for it is WANTED, and hot), so its interval doubles from
     * {@link #IDLE_POLL_NANOS} up to this, and goes back at its sender's next send. Measured in the
     * RAG demo with no traffic: each stage JVM's watcher polled such receivers every 50 ms (11
     * sock_diag queries a second, and looks every 10 ms), 0.3-0.4% of a CPU; with a ceiling of 1 s
     * still 0.2%.
     */
    private static final long STILL_POLL_NANOS = 10_000_000_000L;
    /**
     * How often the map is looked at for new or WANTED entries while none is hot: a new
     * connection's receiver is polled from then on (one map walk, no sock_diag, per look).
     */
    private static final long LOOK_NANOS = 10_000_000L;
    /**
     * The longest look interval: while every watched receiver has read all it was sent and none is
     * wanted, the interval doubles from {@link #LOOK_NANOS} up to this, and goes back at the first
     * receiver with something unread. Measured in the RAG demo (4 stage JVMs, each with a watcher,
     * 3 caught-up receivers): looking every 10 ms cost each watcher about 4% of a CPU in timer
     * wake-ups and map walks.
     */
    private static final long IDLE_LOOK_NANOS = 160_000_000L;
    /** How long a receiver stays polled every millisecond after its sender was last near its bound. */
    private static final long HOT_NANOS = 100_000_000L;
    /**
     * How long a receiver whose connection this watcher cannot see (an end in a namespace it
     * does not look in: a pod-to-pod connection seen from one pod) is left alone before it is
     * looked for again. Measured in the RAG demo on the node bed (each stage in a pod, a watcher in
     * each stage's JVM): such receivers stayed WANTED, so each watcher walked the map every
     * millisecond, 10% of a CPU each, most of it in the kernel's hash-map key walk.
     */
    private static final long INVISIBLE_NANOS = 1_000_000_000L;
    /**
     * ... doubling, after each look that still did not find it, up to this: a connection's ends
     * do not change namespaces. (Retried every second, six such receivers kept a stage JVM's
     * watcher walking the map every 160 ms with no traffic: 0.3% of a CPU.)
     */
    private static final long INVISIBLE_MAX_NANOS = 64_000_000_000L;
    /** The window over which a receiver's read rate grows its bound. */
    private static final long WINDOW_NANOS = 10_000_000L;

    /** How often the namespaces of the cgroups' processes are looked for again. */
    private static final long NAMESPACE_REFRESH_NANOS = 1_000_000_000L;
    /** ... and at most how often when a loopback key names a namespace not known yet. */
    private static final long UNKNOWN_NAMESPACE_REFRESH_NANOS = 100_000_000L;

    private final InFlightMaps maps;
    private final List<Path> cgroups;
    private volatile boolean closed;
    private volatile int namespaces;
    private final LongAdder estimates = new LongAdder();
    private final LongAdder polls = new LongAdder();
    private Thread thread;

    /** A watcher of this process's network namespace. */
    public InFlightWatcher(InFlightMaps maps) {
        this(maps, List.of());
    }

    /** A watcher of this process's network namespace and those of the processes of {@code cgroups}. */
    public InFlightWatcher(InFlightMaps maps, List<Path> cgroups) {
        this.maps = maps;
        this.cgroups = List.copyOf(cgroups);
    }

    /** How many network namespaces the watcher looks in (0 before it started). */
    public int namespaces() {
        return namespaces;
    }

    /** How many times it raised a receiver's estimate or bound. */
    public long estimates() {
        return estimates.sum();
    }

    /** How many times it polled a receiver (its {@code sock_diag} queries). */
    public long polls() {
        return polls.sum();
    }

    /** Whether the loop runs (false once it stopped on an error, or was closed). */
    public synchronized boolean isRunning() {
        return thread != null && thread.isAlive() && !closed;
    }

    public synchronized InFlightWatcher start() {
        if (thread == null && !closed) {
            thread = new Thread(this::loop, "sockmap4j-watcher");
            thread.setDaemon(true);
            thread.start();
        }
        return this;
    }

    /** What the watcher remembers of one receiver between polls. */
    private static final class Seen {
        long lastPoll;
        /** Until when its connection is not looked for (0: visible, or not known not to be). */
        long invisibleUntil;
        /** How long it was left alone the last time it was not found. */
        long invisibleFor;
        /** Its sender's sent count at the last look, and its poll interval while it is not hot. */
        long lastSent = -1;
        long pollEvery = IDLE_POLL_NANOS;
        long hotUntil;
        long rxNetns;
        long txNetns;
        long windowStart;
        long windowRead;
    }

    private void loop() {
        Map<String, Seen> seen = new HashMap<>();
        int ceiling = ObjectLoader.watchCeiling();
        try (NetnsDiags diags = cgroups.isEmpty() ? NetnsDiags.ownNamespace() : NetnsDiags.ofCgroups(cgroups)) {
            long refreshed = System.nanoTime();
            long look = LOOK_NANOS;
            long wake = Long.MIN_VALUE;
            boolean busy = true;
            long due = 0;
            while (!closed) {
                boolean anyHot = false;
                boolean anyUnread = false;
                long now = System.nanoTime();
                /*
                 * Nothing new since the last walk (the verdict's wake counter stood still), no
                 * receiver hot or being polled, none due: no walk. A walk costs the watch map's
                 * whole bucket array (measured in the RAG demo with no traffic: 0.3% of a CPU per
                 * watcher at one walk every 160 ms, most of it in htab_map_get_next_key).
                 */
                long w0 = maps.slots().wake();
                if (!busy && w0 == wake && now - due < 0) {
                    // The cgroups' namespaces are kept up to date idle too (a look at cgroup.procs, no walk).
                    if (!cgroups.isEmpty() && now - refreshed >= NAMESPACE_REFRESH_NANOS) {
                        diags.refresh();
                        refreshed = now;
                        namespaces = diags.namespaces();
                    }
                    look = Math.min(IDLE_LOOK_NANOS, look * 2);
                    LockSupport.parkNanos(look);
                    continue;
                }
                wake = w0;
                long nextDue = now + STILL_POLL_NANOS;
                namespaces = diags.namespaces();
                boolean unknown = false;
                Set<String> present = new HashSet<>();
                for (InFlightMaps.Watched w : maps.watched()) {
                    String id = HexFormat.of().formatHex(w.key());
                    present.add(id);
                    Seen s = seen.get(id);
                    if (s == null) {
                        // A new receiver: polled closely from the start, when its bound is still the first one.
                        s = new Seen();
                        s.hotUntil = now + HOT_NANOS;
                        seen.put(id, s);
                    }
                    if (s.invisibleUntil != 0 && now - s.invisibleUntil < 0) {
                        if (s.invisibleUntil - nextDue < 0) {
                            nextDue = s.invisibleUntil;
                        }
                        continue; // not visible from here: neither hot nor unread for this watcher
                    }
                    boolean wanted = (w.flags() & WatchLayout.WANTED) != 0;
                    if (wanted) {
                        s.hotUntil = now + HOT_NANOS;
                    } else if (w.read() >= w.sent() || (w.flags() & WatchLayout.EXACT) != 0) {
                        // Everything sent was read (the verdict's exact count or an earlier estimate), or
                        // the verdict counts this receiver's reads itself at every send: nothing to
                        // estimate until more is sent, and the verdict asks (WANTED) when that matters.
                        continue;
                    }
                    if (w.sent() != s.lastSent) {
                        s.lastSent = w.sent();
                        s.pollEvery = IDLE_POLL_NANOS; // sending again: polled at the usual pace
                    }
                    boolean hot = now - s.hotUntil < 0;
                    if (!hot && s.lastPoll != 0 && now - s.lastPoll < s.pollEvery) {
                        // Waiting for its next poll; one whose estimate stood still does not keep the looks short.
                        anyUnread |= s.pollEvery == IDLE_POLL_NANOS;
                        if (s.lastPoll + s.pollEvery - nextDue < 0) {
                            nextDue = s.lastPoll + s.pollEvery;
                        }
                        continue;
                    }
                    s.lastPoll = now;
                    polls.increment();
                    Found found;
                    try {
                        found = estimate(diags, w, s, now, ceiling);
                    } catch (IOException e) {
                        // One receiver's query failed (its namespace going away, say): the others go on.
                        LOG.debug("Estimating a receiver's reads failed: {}", e.toString());
                        found = Found.UNKNOWN_NAMESPACE;
                    }
                    if (found == Found.INVISIBLE) {
                        s.invisibleFor = s.invisibleFor == 0 ? INVISIBLE_NANOS : Math.min(INVISIBLE_MAX_NANOS, s.invisibleFor * 2);
                        s.invisibleUntil = now + s.invisibleFor;
                        if (s.invisibleUntil - nextDue < 0) {
                            nextDue = s.invisibleUntil;
                        }
                        continue;
                    }
                    s.invisibleUntil = 0;
                    s.invisibleFor = 0;
                    unknown |= found == Found.UNKNOWN_NAMESPACE;
                    if (found != Found.ADVANCED && !hot) {
                        // Nothing moved (or an end was not found this time): polled less often until its sender sends.
                        s.pollEvery = Math.min(STILL_POLL_NANOS, s.pollEvery * 2);
                    } else {
                        s.pollEvery = IDLE_POLL_NANOS;
                    }
                    anyUnread |= s.pollEvery == IDLE_POLL_NANOS;
                    anyHot |= hot;
                    if (now + s.pollEvery - nextDue < 0) {
                        nextDue = now + s.pollEvery;
                    }
                }
                seen.keySet().retainAll(present);
                if (!cgroups.isEmpty() && (now - refreshed >= NAMESPACE_REFRESH_NANOS
                        || unknown && now - refreshed >= UNKNOWN_NAMESPACE_REFRESH_NANOS)) {
                    diags.refresh();
                    refreshed = now;
                }
                busy = anyHot || anyUnread || unknown;
                due = nextDue;
                look = busy ? LOOK_NANOS : Math.min(IDLE_LOOK_NANOS, look * 2);
                LockSupport.parkNanos(anyHot ? WANTED_POLL_NANOS : look);
            }
        } catch (IOException | RuntimeException e) {
            if (!closed) {
                LOG.warn("sockmap4j watcher stopped: receivers that publish nothing stay on TCP once over their "
                        + "bound: {}", e.toString());
            }
        }
    }

    /*
     * The bound grows as a publishing receiver's does (and as TCP's receive-buffer autotuning):
     * to twice what the receiver surely read in the last window, never shrinking, up to
     * net.ipv4.tcp_rmem's maximum. A receiver that keeps up so gets room to stream.
     */
    /** What {@link #estimate} found of a receiver's connection. */
    private enum Found {
        /** Both ends, and nothing to raise: the estimate stood still. */
        BOTH,
        /** Both ends, and the estimate or the bound was raised. */
        ADVANCED,
        /** Both ends were found before, not now (gone, or moved): looked for again at the next poll. */
        LOST,
        /** An end is not in a namespace this watcher looks in. */
        INVISIBLE,
        /** The key names a loopback namespace not known here (yet). */
        UNKNOWN_NAMESPACE
    }

    private Found estimate(NetnsDiags diags, InFlightMaps.Watched w, Seen s, long now, int ceiling)
            throws IOException {
        MemorySegment k = MemorySegment.ofArray(w.key());
        byte[] local = k.asSlice(SockKeyLayout.LOCAL_IP, 16).toArray(ValueLayout.JAVA_BYTE);
        byte[] remote = k.asSlice(SockKeyLayout.REMOTE_IP, 16).toArray(ValueLayout.JAVA_BYTE);
        int localPort = k.get(ValueLayout.JAVA_INT_UNALIGNED, SockKeyLayout.LOCAL_PORT);
        int remotePort = k.get(ValueLayout.JAVA_INT_UNALIGNED, SockKeyLayout.REMOTE_PORT);
        long netns = k.get(ValueLayout.JAVA_LONG_UNALIGNED, SockKeyLayout.NETNS);
        if (netns != 0 && !diags.knows(netns)) {
            // A loopback connection of a namespace not looked in: another one would find a namesake.
            return Found.UNKNOWN_NAMESPACE;
        }
        /*
         * The sender's queue is measured before the receiver's: a byte moves from one to the other
         * and then out, never back, so taken in this order none is in neither. Taken the other way
         * round, a byte acknowledged between the two looks (in the receiver's queue after it was
         * measured, out of the sender's before) would count as read, and a resume on that would let
         * a redirect overtake it. Until both namespaces are known, the receiver is looked up first
         * to find them, and measured again after the sender.
         */
        boolean located = s.rxNetns != 0 && s.txNetns != 0;
        NetnsDiags.Found rxFound = located ? null : diags.find(netns, s.rxNetns, local, localPort, remote, remotePort);
        if (!located && rxFound == null) {
            return Found.INVISIBLE; // not visible from the namespaces looked in
        }
        long rxNetns = located ? s.rxNetns : rxFound.netnsCookie();
        NetnsDiags.Found txFound = diags.find(netns, s.txNetns == 0 ? rxNetns : s.txNetns, remote, remotePort, local,
                localPort);
        rxFound = txFound == null ? null : diags.find(netns != 0 ? netns : rxNetns, 0, local, localPort, remote,
                remotePort);
        if (rxFound == null || txFound == null) {
            s.rxNetns = 0; // gone, or moved: located again next time
            s.txNetns = 0;
            // Never found both: an end is in a namespace not looked in (a pod-to-pod connection seen from one pod).
            return located ? Found.LOST : Found.INVISIBLE;
        }
        s.rxNetns = rxFound.netnsCookie();
        s.txNetns = txFound.netnsCookie();
        long[] rx = rxFound.memInfo();
        long[] tx = txFound.memInfo();
        long surelyRead = Math.max(w.read(), w.sent() - rx[SockDiag.RMEM_ALLOC] - tx[SockDiag.WMEM_QUEUED]);
        long bound = Integer.toUnsignedLong(w.bound());
        if (s.windowStart == 0) {
            s.windowStart = now;
            s.windowRead = surelyRead;
        } else if (now - s.windowStart >= WINDOW_NANOS) {
            long grown = Math.min(ceiling, 2 * (surelyRead - s.windowRead));
            if (grown > bound && (w.flags() & WatchLayout.FIXED) == 0) {
                bound = grown;
            }
            s.windowStart = now;
            s.windowRead = surelyRead;
        }
        if (surelyRead > w.read() || bound != Integer.toUnsignedLong(w.bound())) {
            int flags = surelyRead == w.sent() ? w.flags() & ~WatchLayout.WANTED : w.flags();
            maps.updateWatched(w.key(), w.sent(), surelyRead, (int) bound, flags);
            estimates.increment();
            return Found.ADVANCED;
        }
        return Found.BOTH;
    }


    /** Stops the loop and waits up to a second for it to end. */
    @Override
    public void close() {
        Thread t;
        synchronized (this) {
            closed = true;
            t = thread;
        }
        if (t != null) {
            LockSupport.unpark(t);
            try {
                t.join(1000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
