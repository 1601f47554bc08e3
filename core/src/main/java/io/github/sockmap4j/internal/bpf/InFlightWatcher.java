package io.github.sockmap4j.internal.bpf;

import io.github.sockmap4j.internal.ffi.LibC;
import io.github.sockmap4j.internal.net.Sockets;
import io.github.sockmap4j.internal.sys.SockDiag;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.HashMap;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.locks.LockSupport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Publishes, for receivers that publish nothing themselves (a JDK socket, a C server), how many
 * bytes they surely read: what their sender had sent, minus all the receiver's receive memory,
 * minus all the sender's send queue, as sock_diag reports them. Both memories count more than
 * the bytes they hold, so the estimate is never above the truth: staleness or slack only keeps
 * a sender on TCP longer. Senders the verdict marked WANTED (held on TCP, or near the bound)
 * are polled every millisecond for the next 100 ms, the others every 50; the bound grows with
 * the receiver's read rate, as a publishing receiver's does.
 *
 * <p>It needs nothing of an application: any process that can open the pin directory's maps
 * can run one. It sees the connections of its own network namespace only; a loopback
 * connection of another namespace (its key carries that namespace's cookie) is left alone.
 *
 * <p><b>Note:</b> {@link #start()} and {@link #close()} are threadsafe; the loop runs on a
 * daemon thread of its own.
 */
public final class InFlightWatcher implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(InFlightWatcher.class);
    private static final long WANTED_POLL_NANOS = 1_000_000L;
    private static final long IDLE_POLL_NANOS = 50_000_000L;
    /** How long a receiver stays polled every millisecond after its sender was last near its bound. */
    private static final long HOT_NANOS = 100_000_000L;
    /** The window over which a receiver's read rate grows its bound. */
    private static final long WINDOW_NANOS = 10_000_000L;

    private final InFlightMaps maps;
    private volatile boolean closed;
    private Thread thread;

    public InFlightWatcher(InFlightMaps maps) {
        this.maps = maps;
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
        long hotUntil;
        long windowStart;
        long windowRead;
    }

    private void loop() {
        Map<String, Seen> seen = new HashMap<>();
        int ceiling = tcpRmemMax();
        try (SockDiag diag = SockDiag.open()) {
            long ownNetns = netnsCookieOfThisProcess();
            while (!closed) {
                boolean anyHot = false;
                long now = System.nanoTime();
                Set<String> present = new HashSet<>();
                for (InFlightMaps.Watched w : maps.watched()) {
                    String id = HexFormat.of().formatHex(w.key());
                    present.add(id);
                    Seen s = seen.computeIfAbsent(id, k -> new Seen());
                    if ((w.flags() & WatchLayout.WANTED) != 0) {
                        s.hotUntil = now + HOT_NANOS;
                    }
                    boolean hot = now - s.hotUntil < 0;
                    anyHot |= hot;
                    if (!hot && s.lastPoll != 0 && now - s.lastPoll < IDLE_POLL_NANOS) {
                        continue;
                    }
                    s.lastPoll = now;
                    estimate(diag, w, s, now, ceiling, ownNetns);
                }
                seen.keySet().retainAll(present);
                LockSupport.parkNanos(anyHot ? WANTED_POLL_NANOS : IDLE_POLL_NANOS);
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
    private void estimate(SockDiag diag, InFlightMaps.Watched w, Seen s, long now, int ceiling, long ownNetns)
            throws IOException {
        MemorySegment k = MemorySegment.ofArray(w.key());
        byte[] local = k.asSlice(SockKeyLayout.LOCAL_IP, 16).toArray(ValueLayout.JAVA_BYTE);
        byte[] remote = k.asSlice(SockKeyLayout.REMOTE_IP, 16).toArray(ValueLayout.JAVA_BYTE);
        int localPort = k.get(ValueLayout.JAVA_INT_UNALIGNED, SockKeyLayout.LOCAL_PORT);
        int remotePort = k.get(ValueLayout.JAVA_INT_UNALIGNED, SockKeyLayout.REMOTE_PORT);
        long netns = k.get(ValueLayout.JAVA_LONG_UNALIGNED, SockKeyLayout.NETNS);
        if (netns != 0 && netns != ownNetns) {
            return; // a loopback connection of another namespace: sock_diag here would find a namesake
        }
        long[] rx = diag.memInfo(local, localPort, remote, remotePort);
        long[] tx = rx == null ? null : diag.memInfo(remote, remotePort, local, localPort);
        if (rx == null || tx == null) {
            return; // not visible from this namespace
        }
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
        }
    }

    /** net.ipv4.tcp_rmem's third value: the largest receive buffer TCP's autotuning gives. */
    private static int tcpRmemMax() {
        try (var in = java.nio.file.Files.newInputStream(java.nio.file.Path.of("/proc/sys/net/ipv4/tcp_rmem"))) {
            String[] f = new String(in.readAllBytes(), java.nio.charset.StandardCharsets.US_ASCII).trim().split("\\s+");
            return Integer.parseInt(f[2]);
        } catch (IOException | RuntimeException e) {
            return 6 << 20; // the kernel's default maximum
        }
    }

    private static long netnsCookieOfThisProcess() throws IOException {
        int fd = LibC.socket(LibC.AF_INET, LibC.SOCK_STREAM | LibC.SOCK_CLOEXEC, 0);
        try {
            return Sockets.netnsCookie(fd);
        } finally {
            LibC.close(fd);
        }
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
