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
 * are polled every millisecond, the others every 50.
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

    private void loop() {
        Map<String, Long> lastPoll = new HashMap<>();
        try (SockDiag diag = SockDiag.open()) {
            long ownNetns = netnsCookieOfThisProcess();
            while (!closed) {
                boolean wanted = false;
                long now = System.nanoTime();
                Set<String> seen = new HashSet<>();
                for (InFlightMaps.Watched w : maps.watched()) {
                    String id = HexFormat.of().formatHex(w.key());
                    seen.add(id);
                    boolean want = (w.flags() & WatchLayout.WANTED) != 0;
                    wanted |= want;
                    Long last = lastPoll.get(id);
                    if (!want && last != null && now - last < IDLE_POLL_NANOS) {
                        continue;
                    }
                    lastPoll.put(id, now);
                    estimate(diag, w, ownNetns);
                }
                lastPoll.keySet().retainAll(seen);
                LockSupport.parkNanos(wanted ? WANTED_POLL_NANOS : IDLE_POLL_NANOS);
            }
        } catch (IOException | RuntimeException e) {
            if (!closed) {
                LOG.warn("sockmap4j watcher stopped: receivers that publish nothing stay on TCP once over their "
                        + "bound: {}", e.toString());
            }
        }
    }

    private void estimate(SockDiag diag, InFlightMaps.Watched w, long ownNetns) throws IOException {
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
        long surelyRead = w.sent() - rx[SockDiag.RMEM_ALLOC] - tx[SockDiag.WMEM_QUEUED];
        if (surelyRead > w.read()) {
            int flags = surelyRead == w.sent() ? w.flags() & ~WatchLayout.WANTED : w.flags();
            maps.updateWatched(w.key(), w.sent(), surelyRead, w.bound(), flags);
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
