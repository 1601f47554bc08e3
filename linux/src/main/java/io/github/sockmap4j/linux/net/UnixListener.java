package io.github.sockmap4j.linux.net;

import io.github.sockmap4j.linux.ffi.Errno;
import io.github.sockmap4j.linux.ffi.FdPassing;
import io.github.sockmap4j.linux.ffi.LibC;
import io.github.sockmap4j.linux.ffi.Linux;
import io.github.sockmap4j.linux.ffi.NativeIOException;
import io.github.sockmap4j.linux.ffi.NativeLayouts;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

/**
 * A listening Unix stream socket whose connections say who is at the other end
 * ({@code SO_PEERCRED}: the pid, uid and gid the kernel recorded when the peer connected, which
 * the peer cannot forge). The JDK's Unix channels give the peer's user and group names only,
 * hence this small native one. Lines in, lines out.
 *
 * <p><b>Note:</b> {@link #accept} from one thread; each {@link Connection} from one thread;
 * {@link #close} from any.
 */
public final class UnixListener implements AutoCloseable {
    private static final int POLL_MILLIS = 200;
    /** How long a peer may leave an answer untaken before its connection is closed. */
    public static final int WRITE_TIMEOUT_SECONDS = 10;

    /**
     * The peer of a connection, as the kernel recorded it when the peer connected
     * ({@code SO_PEERCRED}, {@code SO_PEERGROUPS}): a process that hands the socket on, or exits
     * and has its pid reused, does not change it.
     *
     * @param groups the primary group and every supplementary group the peer had then
     */
    public record Credentials(int pid, int uid, int gid, Set<Integer> groups) {
        public Credentials {
            groups = Set.copyOf(groups);
        }

        public Credentials(int pid, int uid, int gid) {
            this(pid, uid, gid, Set.of(gid));
        }
    }

    private final Path path;
    private final NativeSocket socket;
    private volatile boolean closed;
    /** Threads in {@link #accept(int)} now (under this listener's lock): the last one out of a closed listener closes its fd. */
    private int accepting;

    private UnixListener(Path path, NativeSocket socket) {
        this.path = path;
        this.socket = socket;
    }

    /**
     * Listens at {@code path} (mode 0666: whoever connects is told apart by credentials). A socket
     * file nobody accepts on (left by a process that died) is replaced. A path with a leading
     * {@code @} is a name in the abstract namespace ({@link Sockets#isAbstract}): no file, no mode.
     *
     * @throws IOException when another process listens there, or the path is too long
     */
    public static UnixListener listen(Path path) throws IOException {
        boolean file = !Sockets.isAbstract(path);
        if (file && Files.exists(path)) {
            try (SocketChannel probe = SocketChannel.open(StandardProtocolFamily.UNIX)) {
                probe.connect(UnixDomainSocketAddress.of(path));
                throw new IOException("another process listens at " + path + " (a sockmap4j agent of the same pin "
                        + "directory is running already?)");
            } catch (java.net.ConnectException stale) {
                Files.delete(path);
            }
        }
        NativeSocket socket = NativeSocket.newUnixStream();
        try (Arena arena = Arena.ofConfined()) {
            socket.bind(Sockets.encodeUnix(arena, path));
            if (file) {
                Files.setPosixFilePermissions(path, PosixFilePermissions.fromString("rw-rw-rw-"));
            }
            socket.listen(64);
            return new UnixListener(path, socket);
        } catch (IOException | RuntimeException e) {
            socket.closeNow();
            if (file) {
                Files.deleteIfExists(path);
            }
            throw e;
        }
    }

    public Path path() {
        return path;
    }

    /**
     * The next connection; null once closed.
     *
     * @throws NativeIOException when accept(2) fails for a reason that may pass (EMFILE, ENFILE,
     *                           ENOBUFS, ENOMEM): the caller backs off and calls again
     */
    public Connection accept() throws IOException {
        return accept(POLL_MILLIS);
    }

    /**
     * As {@link #accept()}, waking every {@code pollMillis} to see whether it was closed: a
     * listener nobody closes while its process runs waits longer, and wakes its thread less.
     */
    public Connection accept(int pollMillis) throws IOException {
        synchronized (this) {
            if (closed) {
                return null;
            }
            accepting++;
        }
        try {
            return acceptOpen(pollMillis);
        } finally {
            synchronized (this) {
                if (--accepting == 0 && closed) {
                    socket.closeNow(); // closed while this thread used the fd: closed now that none does
                }
            }
        }
    }

    private Connection acceptOpen(int pollMillis) throws IOException {
        while (!closed) {
            int r = socket.poll(Linux.POLLIN, pollMillis);
            if (closed) {
                return null;
            }
            if (r == 0 || r == -Errno.EINTR) {
                continue;
            }
            if (r < 0) {
                throw Errno.error("poll", r, path.toString());
            }
            NativeSocket c;
            try {
                c = socket.acceptNow();
            } catch (NativeIOException e) {
                if (closed) {
                    return null;
                }
                throw Errno.error("accept", -e.errno(), path.toString());
            }
            if (c == null) {
                continue;
            }
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment cred = arena.allocate(NativeLayouts.UCRED);
                c.getsockopt(Linux.SOL_SOCKET, Linux.SO_PEERCRED, cred);
                int gid = cred.get(ValueLayout.JAVA_INT, NativeLayouts.UCRED_GID);
                return new Connection(c, new Credentials(cred.get(ValueLayout.JAVA_INT, NativeLayouts.UCRED_PID),
                        cred.get(ValueLayout.JAVA_INT, NativeLayouts.UCRED_UID), gid, peerGroups(c, gid, arena)));
            } catch (IOException | RuntimeException e) {
                c.closeNow();
                throw e;
            }
        }
        return null;
    }

    /** SO_PEERGROUPS: the groups the peer had when it connected, with its primary group {@code gid}. */
    private static Set<Integer> peerGroups(NativeSocket socket, int gid, Arena arena) throws NativeIOException {
        Set<Integer> groups = new HashSet<>();
        groups.add(gid);
        for (int room : new int[] {1024, 65536}) { // NGROUPS_MAX is 65536
            MemorySegment buf = arena.allocate(4L * room, 4);
            try {
                int len = socket.getsockopt(Linux.SOL_SOCKET, Linux.SO_PEERGROUPS, buf);
                for (int i = 0; i < len / 4; i++) {
                    groups.add(buf.getAtIndex(ValueLayout.JAVA_INT, i));
                }
                return groups;
            } catch (NativeIOException e) {
                if (e.errno() != Errno.ERANGE) {
                    throw e;
                }
            }
        }
        return groups;
    }

    /** Stops accepting and removes the socket file; open connections stay until closed. */
    @Override
    public void close() {
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
        }
        try {
            if (!Sockets.isAbstract(path)) {
                Files.deleteIfExists(path);
            }
        } catch (IOException ignored) {
            // Replaced by the next listener.
        }
        synchronized (this) {
            if (accepting > 0) {
                // a thread waits in poll on the fd: woken now (shutdown ends a listening socket's poll), it
                // closes the fd as it leaves; closed here, the number could go to another file under it
                socket.wakeWaiters();
            } else {
                socket.closeNow();
            }
        }
    }

    /** A peer sent more than the longest line the reader takes, without a newline. */
    public static final class LineTooLongException extends IOException {
        private static final long serialVersionUID = 1L;

        LineTooLongException(int max) {
            super("a line over " + max + " bytes");
        }
    }

    /** A peer kept half a line, or an idle connection, past its time. */
    public static final class TimedOutException extends IOException {
        private static final long serialVersionUID = 1L;

        TimedOutException(String what) {
            super(what);
        }
    }

    /** A peer that holds nothing sent nothing past its idle time. */
    public static final class IdleException extends IOException {
        private static final long serialVersionUID = 1L;

        IdleException(String what) {
            super(what);
        }
    }

    /** One accepted connection (non-blocking underneath; reads wait with poll). */
    public static final class Connection implements AutoCloseable {
        private final NativeSocket socket;
        private final Credentials peer;
        private final Arena arena = Arena.ofShared();
        private final MemorySegment buf = arena.allocate(1024);
        private final StringBuilder pending = new StringBuilder();
        /** When the first byte of the line in {@code pending} came. */
        private long lineStarted;
        private volatile boolean closed;

        Connection(NativeSocket socket, Credentials peer) {
            this.socket = socket;
            this.peer = peer;
        }

        public Credentials peer() {
            return peer;
        }

        /** The next line (without its newline); null at end of stream or once closed. */
        public String readLine(int maxLength) throws IOException {
            return readLine(maxLength, Long.MAX_VALUE, Long.MAX_VALUE, () -> false);
        }

        /**
         * The next line (without its newline) of at most {@code maxLength} bytes; null at end of
         * stream or once closed.
         *
         * @param lineNanos how long a line may take from its first byte to its newline
         * @param idleNanos how long the peer may send nothing while {@code holding} says false
         * @throws LineTooLongException past {@code maxLength}, with or without a newline
         * @throws TimedOutException    past the line time
         * @throws IdleException        past the idle time, holding nothing
         */
        public String readLine(int maxLength, long lineNanos, long idleNanos, BooleanSupplier holding)
                throws IOException {
            long since = System.nanoTime();
            while (true) {
                int nl = pending.indexOf("\n");
                if (nl >= 0) {
                    String line = pending.substring(0, nl);
                    if (line.getBytes(StandardCharsets.UTF_8).length > maxLength) {
                        throw new LineTooLongException(maxLength);
                    }
                    pending.delete(0, nl + 1);
                    lineStarted = pending.isEmpty() ? 0 : System.nanoTime();
                    return line;
                }
                if (pending.length() > maxLength) {
                    throw new LineTooLongException(maxLength);
                }
                if (closed) {
                    return null;
                }
                long now = System.nanoTime();
                if (!pending.isEmpty() && now - lineStarted > lineNanos) {
                    throw new TimedOutException("half a line for " + TimeUnit.NANOSECONDS.toSeconds(lineNanos)
                            + " s");
                }
                if (pending.isEmpty() && now - since > idleNanos) {
                    if (!holding.getAsBoolean()) {
                        throw new IdleException("nothing sent for " + TimeUnit.NANOSECONDS.toSeconds(idleNanos)
                                + " s, holding no rule");
                    }
                    since = now; // asked again after another idle time, not at every poll
                }
                int r = socket.poll(Linux.POLLIN, POLL_MILLIS);
                if (r == 0 || r == -Errno.EINTR) {
                    continue;
                }
                long n = socket.recv(buf, 0);
                if (n == -Errno.EAGAIN || n == -Errno.EINTR) {
                    continue;
                }
                if (n <= 0) {
                    return null;
                }
                if (pending.isEmpty()) {
                    lineStarted = System.nanoTime();
                }
                pending.append(new String(buf.asSlice(0, n).toArray(ValueLayout.JAVA_BYTE), StandardCharsets.UTF_8));
            }
        }

        /**
         * Writes {@code line} and a newline; a peer that takes none of it for
         * {@link #WRITE_TIMEOUT_SECONDS} seconds (it sends and never reads) gets a {@link TimedOutException}.
         */
        public void writeLine(String line) throws IOException {
            byte[] b = (line + "\n").getBytes(StandardCharsets.UTF_8);
            try (Arena a = Arena.ofConfined()) {
                MemorySegment out = a.allocateFrom(ValueLayout.JAVA_BYTE, b);
                long off = 0;
                long progress = System.nanoTime();
                while (off < b.length) {
                    long n = socket.send(out.asSlice(off), 0);
                    if (n == -Errno.EAGAIN || n == -Errno.EINTR) {
                        if (System.nanoTime() - progress > TimeUnit.SECONDS.toNanos(WRITE_TIMEOUT_SECONDS)) {
                            throw new TimedOutException("an answer not taken for " + WRITE_TIMEOUT_SECONDS + " s");
                        }
                        socket.poll(Linux.POLLOUT, POLL_MILLIS);
                        continue;
                    }
                    if (n < 0) {
                        throw Errno.error("write", n, "agent connection");
                    }
                    off += n;
                    progress = System.nanoTime();
                }
            }
        }


        /** A line and the descriptor that came with its bytes ({@code -1}: none), which the caller owns. */
        public record LineAndFd(String line, int fd) {
        }

        /** A line and the descriptors that came with its bytes, in the order sent, which the caller owns. */
        public record LineAndFds(String line, int[] fds) {
        }

        /**
         * The next line (at most {@code maxLength} bytes) with the descriptor the peer attached to
         * it ({@code SCM_RIGHTS}; see {@link FdPassing}): read with the descriptors, not by
         * {@link #readLine}, which would drop them. Of several descriptors, the first is kept and
         * the rest closed. Only where the peer sends nothing after this line until answered.
         *
         * @throws TimedOutException when the line does not come within {@code timeoutMillis}
         * @throws IOException at the end of the stream, past {@code maxLength}, or with bytes after
         * the line
         */
        public LineAndFd readLineAndFd(int maxLength, int timeoutMillis) throws IOException {
            LineAndFds r = readLineAndFds(maxLength, timeoutMillis, 1);
            return new LineAndFd(r.line(), r.fds().length == 0 ? -1 : r.fds()[0]);
        }

        /**
         * As {@link #readLineAndFd}, keeping up to {@code maxFds} descriptors (those past it are
         * closed): as many as came, which the caller then counts.
         */
        public LineAndFds readLineAndFds(int maxLength, int timeoutMillis, int maxFds) throws IOException {
            if (!pending.isEmpty()) {
                throw new IOException("the peer sent more than one line before its descriptor");
            }
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMillis);
            int[] fds = new int[FdPassing.MAX_FDS];
            int[] kept = new int[0];
            byte[] line = new byte[0];
            try {
                while (!closed) {
                    long left = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
                    if (left <= 0) {
                        throw new TimedOutException("no line within " + timeoutMillis + " ms");
                    }
                    int r = socket.poll(Linux.POLLIN, (int) Math.min(left, POLL_MILLIS));
                    if (r == 0 || r == -Errno.EINTR) {
                        continue;
                    }
                    long n = FdPassing.tryRecvFds(socket.intValue(), buf, fds);
                    for (int fd : fds) {
                        if (fd < 0) {
                            break;
                        }
                        if (kept.length < maxFds) {
                            kept = java.util.Arrays.copyOf(kept, kept.length + 1);
                            kept[kept.length - 1] = fd;
                        } else {
                            LibC.close(fd);
                        }
                    }
                    if (n == -Errno.EAGAIN || n == -Errno.EINTR) {
                        continue;
                    }
                    if (n <= 0) {
                        throw n == 0 ? new IOException("the peer closed before its line")
                                : Errno.error("recvmsg", n, "a line from a peer");
                    }
                    byte[] got = buf.asSlice(0, n).toArray(ValueLayout.JAVA_BYTE);
                    byte[] all = java.util.Arrays.copyOf(line, line.length + got.length);
                    System.arraycopy(got, 0, all, line.length, got.length);
                    line = all;
                    int nl = indexOf(line, (byte) '\n');
                    if (nl >= 0 && nl != line.length - 1) {
                        throw new IOException("the peer sent more after its line");
                    }
                    if (nl > maxLength || nl < 0 && line.length > maxLength) {
                        throw new LineTooLongException(maxLength);
                    }
                    if (nl >= 0) {
                        LineAndFds result = new LineAndFds(new String(line, 0, nl, StandardCharsets.UTF_8), kept);
                        kept = new int[0];
                        return result;
                    }
                }
                throw new IOException("closed");
            } finally {
                for (int fd : kept) {
                    LibC.close(fd);
                }
            }
        }

        private static int indexOf(byte[] b, byte v) {
            for (int i = 0; i < b.length; i++) {
                if (b[i] == v) {
                    return i;
                }
            }
            return -1;
        }

        /** Makes a reader blocked in {@link #readLine} return null soon; {@link #close} frees. */
        public void stop() {
            closed = true;
        }

        @Override
        public void close() {
            closed = true;
            socket.closeNow();
            arena.close();
        }
    }
}
