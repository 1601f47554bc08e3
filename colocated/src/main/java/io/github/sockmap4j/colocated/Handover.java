package io.github.sockmap4j.colocated;

import io.github.sockmap4j.linux.ffi.Errno;
import io.github.sockmap4j.linux.ffi.FdPassing;
import io.github.sockmap4j.linux.net.NativeSocket;
import io.github.sockmap4j.linux.net.UnixListener;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.HexFormat;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.IntPredicate;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * A region's descriptor handed from one end of a connection to the other over a Unix socket, each
 * end proving that it is an end of that connection: both know a nonce that was sent over the
 * connection itself (16 random bytes or more), and nobody else does.
 *
 * <pre>
 * offerer -> listener   SM4J-COLOCATED V ID CAPACITY     ID = SHA-256("sm4j-colocated id" || nonce)
 * listener -> offerer   PROOF P1                          P1 = HMAC-SHA256(nonce, "sm4j-colocated listener")
 * offerer -> listener   REGION P2, the region's descriptor attached (SCM_RIGHTS)
 *                                                         P2 = HMAC-SHA256(nonce, "sm4j-colocated offerer")
 * listener -> offerer   OK | NO reason
 * </pre>
 *
 * Version 1 hands over the region's descriptor alone; version 2 its two bells after it (eventfds,
 * {@link SharedRegion#bells}), for an end that waits in an event loop. An offerer of a region with
 * bells says 2; a listener of version 1 only refuses it, and the offer is made again as version 1,
 * without the bells, so the two ends still share the rings (each waiting on the futex).
 *
 * Who can do what: a process that listens where the offerer was told to go, but is not the other
 * end, cannot answer P1 and gets no descriptor; a process that connects to the listener without
 * the nonce cannot name a connection (ID) or answer P2, and a listener answers a connection's ID
 * once; P1 tells it nothing it can turn into P2. What is handed over is a region the offerer made,
 * which the listener maps only if it is sealed and of the agreed size and layout
 * ({@link SharedRegion#open}). Any other line, a second descriptor, or a descriptor that is not
 * such a region ends the exchange with {@code NO} and the descriptors closed.
 */
public final class Handover {
    static final String HELLO = "SM4J-COLOCATED";
    private static final int VERSION = 1;
    /** The version whose offer carries the region's bells too. */
    private static final int VERSION_BELLS = 2;
    private static final int MAX_LINE = 256;
    private static final int MIN_NONCE = 16;
    private static final HexFormat HEX = HexFormat.of();

    private Handover() {
    }

    /** The connection's public name: what the offerer says, which tells nothing of the nonce. */
    static String id(byte[] nonce) {
        try {
            MessageDigest d = MessageDigest.getInstance("SHA-256");
            d.update("sm4j-colocated id".getBytes(StandardCharsets.US_ASCII));
            return HEX.formatHex(d.digest(nonce));
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("SHA-256 is in every JDK", e);
        }
    }

    static String proof(byte[] nonce, String who) {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(nonce, "HmacSHA256"));
            return HEX.formatHex(mac.doFinal(("sm4j-colocated " + who).getBytes(StandardCharsets.US_ASCII)));
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("HmacSHA256 is in every JDK", e);
        }
    }

    private static void checkNonce(byte[] nonce) {
        if (nonce.length < MIN_NONCE) {
            throw new IllegalArgumentException("a nonce of " + nonce.length + " bytes; at least " + MIN_NONCE);
        }
    }

    private static boolean same(String a, String b) {
        return MessageDigest.isEqual(a.getBytes(StandardCharsets.US_ASCII), b.getBytes(StandardCharsets.US_ASCII));
    }

    /**
     * Hands {@code region} (which the caller keeps) to the end of the connection that listens at
     * {@code socket}, once it has proven that it knows {@code nonce}.
     *
     * @throws IOException naming what went wrong: nothing listens there, the listener is not the
     * other end (it could not prove the nonce; it got nothing), the listener refused, or the time
     * ran out
     */
    public static void offer(Path socket, byte[] nonce, SharedRegion region, Duration timeout) throws IOException {
        boolean bells = region.bells().length > 0;
        try {
            offer(socket, nonce, region, timeout, bells);
        } catch (RefusedException e) {
            if (!bells || !e.reason().startsWith(OTHER_VERSION)) {
                throw e;
            }
            offer(socket, nonce, region, timeout, false); // a listener of version 1: the region alone
        }
    }

    /** What a listener says to an offer of a version it does not take. */
    private static final String OTHER_VERSION = "not a co-located hand-over of version";

    private static void offer(Path socket, byte[] nonce, SharedRegion region, Duration timeout, boolean bells)
            throws IOException {
        checkNonce(nonce);
        NativeSocket s;
        try {
            s = NativeSocket.connectUnix(socket);
        } catch (io.github.sockmap4j.linux.ffi.NativeIOException e) {
            if (e.errno() == Errno.ECONNREFUSED || e.errno() == Errno.ENOENT) {
                throw new NoListenerException(socket, e);
            }
            throw e;
        }
        try (Arena a = Arena.ofConfined()) {
            int millis = (int) Math.min(Integer.MAX_VALUE, timeout.toMillis());
            MemorySegment buf = a.allocate(MAX_LINE + 1);
            writeLine(s, a, HELLO + " " + (bells ? VERSION_BELLS : VERSION) + " " + id(nonce) + " "
                    + region.outbound().capacity());
            String answer = readLine(s, buf, millis);
            if (answer.startsWith("NO " + OTHER_VERSION)) {
                throw new RefusedException(socket, answer.substring(3)); // said before any proof: nothing was sent
            }
            if (!answer.startsWith("PROOF ") || !same(answer.substring(6), proof(nonce, "listener"))) {
                throw new IOException("the listener at " + socket + " is not the other end of the connection (it "
                        + "answered '" + clip(answer) + "' without the connection's proof): the region was not "
                        + "handed to it");
            }
            // the descriptor rides on the proof's own bytes: a reader of lines cannot take one without the other
            MemorySegment line = a.allocateFrom(ValueLayout.JAVA_BYTE,
                    ("REGION " + proof(nonce, "offerer") + "\n").getBytes(StandardCharsets.US_ASCII));
            int[] fds = bells ? new int[] {region.fd(), region.bells()[0], region.bells()[1]} : new int[] {region.fd()};
            long r = FdPassing.trySendFds(s.intValue(), line, fds);
            if (r != line.byteSize()) {
                throw r < 0 ? Errno.error("sendmsg", r, "the region's descriptor to " + socket)
                        : new IOException("the region's proof went out in part (" + r + " bytes) to " + socket);
            }
            String done = readLine(s, buf, millis);
            if (!done.equals("OK")) {
                throw new RefusedException(socket, done.startsWith("NO ") ? done.substring(3) : done);
            }
        } finally {
            s.closeNow();
        }
    }

    private static void closeAll(int[] fds) {
        for (int fd : fds) {
            io.github.sockmap4j.linux.ffi.LibC.close(fd);
        }
    }

    private static String clip(String s) {
        return s.length() > 80 ? s.substring(0, 80) + "..." : s;
    }

    private static void writeLine(NativeSocket s, Arena a, String line) throws IOException {
        MemorySegment out = a.allocateFrom(ValueLayout.JAVA_BYTE, (line + "\n").getBytes(StandardCharsets.US_ASCII));
        for (long off = 0; off < out.byteSize(); ) {
            long n = s.send(out.asSlice(off), 0);
            if (n == -Errno.EINTR) {
                continue;
            }
            if (n < 0) {
                throw Errno.error("send", n, "co-located hand-over");
            }
            off += n;
        }
    }

    /** A line of at most MAX_LINE bytes, read a byte at a time so that nothing past it is taken. */
    private static String readLine(NativeSocket s, MemorySegment buf, int millis) throws IOException {
        long deadline = System.nanoTime() + millis * 1_000_000L;
        int len = 0;
        while (true) {
            long left = (deadline - System.nanoTime()) / 1_000_000L;
            if (left <= 0) {
                throw new IOException("no answer within " + millis + " ms from the co-located hand-over's listener");
            }
            int p = s.poll(io.github.sockmap4j.linux.ffi.Linux.POLLIN, (int) left);
            if (p == 0 || p == -Errno.EINTR) {
                continue;
            }
            long n = s.recv(buf.asSlice(len, 1), 0);
            if (n == -Errno.EINTR || n == -Errno.EAGAIN) {
                continue;
            }
            if (n <= 0) {
                throw new IOException("the co-located hand-over's listener closed"
                        + (len > 0 ? " after '" + clip(new String(buf.asSlice(0, len).toArray(ValueLayout.JAVA_BYTE),
                        StandardCharsets.US_ASCII)) + "'" : ""));
            }
            if (buf.get(ValueLayout.JAVA_BYTE, len) == '\n') {
                return new String(buf.asSlice(0, len).toArray(ValueLayout.JAVA_BYTE), StandardCharsets.US_ASCII);
            }
            if (++len == MAX_LINE) {
                throw new IOException("a line over " + MAX_LINE + " bytes from the co-located hand-over's listener");
            }
        }
    }

    /** Nothing listens at the socket an offer was sent to from here (another network namespace, or gone). */
    public static final class NoListenerException extends IOException {
        private static final long serialVersionUID = 1L;

        NoListenerException(Path socket, IOException cause) {
            super("nothing listens at " + socket + " as seen from this process (" + cause.getMessage() + ")", cause);
        }

        /** As the one it was told, with what the caller adds (where else it looked, what to do). */
        public NoListenerException(String message, NoListenerException cause) {
            super(message, cause);
        }
    }

    /** This process's effective uid: what a listener's rule compares an offerer's with. */
    public static int ownUid() {
        return io.github.sockmap4j.linux.ffi.SysCalls.geteuid();
    }

    /** The listener, having proven the connection, refused the region; {@link #reason()} says why. */
    public static final class RefusedException extends IOException {
        private static final long serialVersionUID = 1L;
        private final String reason;

        RefusedException(Path socket, String reason) {
            super("the listener at " + socket + " refused the region: " + clip(reason));
            this.reason = clip(reason);
        }

        public String reason() {
            return reason;
        }
    }

    /** An offer that proved its connection, from a process the listener's rule does not let share. */
    public static final class NotAllowedException extends IOException {
        private static final long serialVersionUID = 1L;

        NotAllowedException(String message) {
            super(message);
        }
    }

    /**
     * What a listener handed over: the region mapped, and the process that offered it as the
     * kernel recorded it when it connected ({@code SO_PEERCRED}).
     */
    public record Received(SharedRegion region, int pid, int uid, int gid) {
    }

    /**
     * The listening end: {@link #expect} each connection whose region may come, then
     * {@link #acceptOne} takes the next offer. Each expectation is answered once.
     */
    public static final class Listener implements AutoCloseable {
        private final UnixListener socket;
        private final Map<String, Expected> expected;
        /** Whether this listener owns {@link #expected} (not one made by {@link #alsoAt}). */
        private final boolean owner;
        private volatile boolean closed;

        private record Expected(byte[] nonce, long capacity, long maxHeap, IntPredicate allowed,
                                CompletableFuture<Received> result) {
        }

        private Listener(UnixListener socket, Map<String, Expected> expected, boolean owner) {
            this.socket = socket;
            this.expected = expected;
            this.owner = owner;
        }

        /**
         * Listens at {@code path} (mode 0666: an offer is told apart by its proof, not by who
         * connects); a path with a leading {@code @} is a name in the abstract namespace, seen only
         * in this network namespace and gone with the process.
         */
        public static Listener listen(Path path) throws IOException {
            return new Listener(UnixListener.listen(path), new ConcurrentHashMap<>(), true);
        }

        /**
         * A second socket for this listener's expectations, at {@code path}: an offer is taken at
         * either, each expectation still answered once (an expectation made with either is this
         * one's). Its own {@link #acceptOne} takes the offers that come there; closing it closes
         * only its socket (and removes its file), closing this one ends the expectations too.
         */
        public Listener alsoAt(Path path) throws IOException {
            return new Listener(UnixListener.listen(path), expected, false);
        }

        public Path path() {
            return socket.path();
        }

        /** Whether {@link #close} was called: {@link #acceptOne} takes nothing more. */
        public boolean isClosed() {
            return closed;
        }

        /**
         * The region that the other end of the connection that carried {@code nonce} will offer,
         * with rings of {@code capacity}: completes when one is mapped.
         */
        public CompletableFuture<Received> expect(byte[] nonce, long capacity) {
            return expect(nonce, capacity, peer -> true);
        }

        /**
         * As {@link #expect(byte[], long)}, from an offerer whose uid (as the kernel recorded it)
         * {@code allowed} takes; another is answered {@code NO not allowed ...} once it has proven
         * the connection, and the expectation fails with {@link NotAllowedException}.
         */
        public CompletableFuture<Received> expect(byte[] nonce, long capacity, IntPredicate allowed) {
            return expect(nonce, capacity, 0, allowed);
        }

        /**
         * As {@link #expect(byte[], long, IntPredicate)}, for a region that may carry a heap of at
         * most {@code maxHeap} bytes ({@link SharedRegion#open(int, long, long)}).
         */
        public CompletableFuture<Received> expect(byte[] nonce, long capacity, long maxHeap, IntPredicate allowed) {
            checkNonce(nonce);
            CompletableFuture<Received> f = new CompletableFuture<>();
            if (expected.putIfAbsent(id(nonce), new Expected(nonce.clone(), capacity, maxHeap, allowed, f)) != null) {
                throw new IllegalStateException("that nonce is expected already");
            }
            return f;
        }

        /** Forgets an expectation (its connection closed first). */
        public void forget(byte[] nonce) {
            Expected e = expected.remove(id(nonce));
            if (e != null) {
                e.result().cancel(false);
            }
        }

        /**
         * Takes the next offer, answering it within {@code timeout}: true when it completed an
         * expectation, false when it was refused (the offerer was told why); false too once closed.
         */
        public boolean acceptOne(Duration timeout) throws IOException {
            return acceptOne(timeout, Duration.ofMillis(200));
        }

        /**
         * As {@link #acceptOne(Duration)}, waking every {@code idle} while nothing comes to see
         * whether the listener was closed (a listener that lives as long as its process can wait
         * long: its thread then costs nothing while idle).
         */
        public boolean acceptOne(Duration timeout, Duration idle) throws IOException {
            UnixListener.Connection c = socket.accept((int) Math.min(Integer.MAX_VALUE, Math.max(1, idle.toMillis())));
            if (c == null) {
                return false;
            }
            try (c) {
                long nanos = timeout.toNanos();
                int millis = (int) Math.min(Integer.MAX_VALUE, timeout.toMillis());
                String hello = c.readLine(MAX_LINE, nanos, nanos, () -> false);
                String[] f = hello == null ? new String[0] : hello.split(" ");
                if (f.length != 4 || !f[0].equals(HELLO)
                        || !f[1].equals(Integer.toString(VERSION)) && !f[1].equals(Integer.toString(VERSION_BELLS))) {
                    c.writeLine("NO " + OTHER_VERSION + " " + VERSION + " or " + VERSION_BELLS);
                    return false;
                }
                int fdsExpected = f[1].equals(Integer.toString(VERSION_BELLS)) ? 3 : 1;
                Expected e = expected.remove(f[2]);
                if (e == null) {
                    c.writeLine("NO no connection of that name is expected here");
                    return false;
                }
                if (!f[3].equals(Long.toString(e.capacity()))) {
                    c.writeLine("NO rings of " + e.capacity() + " bytes were agreed");
                    e.result().completeExceptionally(new IOException("the offer named rings of " + clip(f[3])
                            + " bytes, not the " + e.capacity() + " agreed"));
                    return false;
                }
                c.writeLine("PROOF " + proof(e.nonce(), "listener"));
                UnixListener.Connection.LineAndFds region = c.readLineAndFds(MAX_LINE, millis, fdsExpected);
                if (!region.line().startsWith("REGION ") || !same(region.line().substring(7), proof(e.nonce(), "offerer"))) {
                    closeAll(region.fds());
                    c.writeLine("NO the offer did not prove the connection");
                    e.result().completeExceptionally(new IOException("an offer for the connection did not prove it "
                            + "(from pid " + c.peer().pid() + ", uid " + c.peer().uid() + ")"));
                    return false;
                }
                int[] fds = region.fds();
                int fd = fds.length > 0 ? fds[0] : -1;
                if (fd >= 0 && !e.allowed().test(c.peer().uid())) {
                    closeAll(fds);
                    String why = "not allowed: uid " + c.peer().uid() + " may not share memory with this process";
                    c.writeLine("NO " + why);
                    e.result().completeExceptionally(new NotAllowedException("an offer from pid " + c.peer().pid()
                            + ", uid " + c.peer().uid() + ": " + why));
                    return false;
                }
                if (fds.length != fdsExpected) {
                    closeAll(fds);
                    String why = fds.length + " descriptors came; an offer of version " + f[1] + " carries "
                            + fdsExpected;
                    c.writeLine("NO " + why);
                    e.result().completeExceptionally(new IOException("the offer: " + why));
                    return false;
                }
                SharedRegion mapped;
                try {
                    mapped = SharedRegion.open(fd, e.capacity(), e.maxHeap(),
                            java.util.Arrays.copyOfRange(fds, 1, fds.length));
                } catch (IOException refused) {
                    c.writeLine("NO " + refused.getMessage());
                    e.result().completeExceptionally(refused);
                    return false;
                }
                if (!e.result().complete(new Received(mapped, c.peer().pid(), c.peer().uid(), c.peer().gid()))) {
                    // the expectation ended meanwhile (it timed out, or was withdrawn): nobody takes the region
                    mapped.close();
                    c.writeLine("NO the listener stopped waiting for this offer");
                    return false;
                }
                c.writeLine("OK");
                return true;
            }
        }

        @Override
        public void close() {
            closed = true;
            socket.close();
            if (owner) {
                expected.values().forEach(e -> e.result().cancel(false));
                expected.clear();
            }
        }
    }
}
