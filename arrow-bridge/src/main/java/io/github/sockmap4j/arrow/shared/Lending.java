package io.github.sockmap4j.arrow.shared;

import io.github.sockmap4j.colocated.BrokerDirectory;
import io.github.sockmap4j.colocated.Handover;
import io.github.sockmap4j.colocated.SharedRegion;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.HexFormat;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The two ends of a connection agreeing, over the connection itself, to lend Arrow batches by
 * reference ({@link BatchSender}, {@link BatchReceiver}) instead of streaming them through it;
 * where they cannot, each end is told why and the connection is as it was, for the Arrow bridge's
 * stream ({@link io.github.sockmap4j.arrow.ArrowBridge}). Both ends must call this first, the
 * sending end {@link #offer}, the receiving end {@link #accept}, on a blocking connection on which
 * nothing else has been sent yet:
 *
 * <pre>
 * sender   -> receiver  SM4J-ARROW-LEND 1 HEAP RINGS
 * receiver -> sender    LISTEN NAME NONCE SENDER-AS-SEEN  |  NO REASON words
 * sender   -> receiver  OFFERING                          |  NO REASON words
 *   (the region, made by the sender, handed over at NAME with {@link Handover}, proving NONCE)
 * sender   -> receiver  LENT                              |  NO REASON words
 * </pre>
 *
 * <p>Who may use it, what it can move: the receiver listens for the region at an abstract Unix
 * socket of its own (seen only in its network namespace, gone with the agreement), and takes it
 * only from a process of its own user that proves the nonce this connection carried; the sender
 * hands its region only to a listener that proves the same nonce. The region then moves, one way,
 * the batches the sender builds in it, to that receiver only. A proxy or source NAT between the two
 * ends (a mesh's sidecar) makes the receiver see the sender at another address than the sender's
 * own: then nothing is lent ({@link Reason#PROXIED}), so no proxy is bypassed.
 *
 * <p>The connection is the lifeline: when it ends, close the end this returned. A peer that does
 * not answer within the timeout (not a peer of this protocol, say) leaves the connection's bytes
 * in an unknown state: the connection is then closed, and the call fails with why.
 */
public final class Lending {
    private static final Logger LOG = LoggerFactory.getLogger(Lending.class);
    static final String HELLO = "SM4J-ARROW-LEND";
    static final int VERSION = 1;
    /** The rings' capacity: descriptors one way, give-backs the other. */
    static final long RINGS = 256 * 1024;
    private static final int MAX_LINE = 512;
    private static final SecureRandom RANDOM = new SecureRandom();
    private static final HexFormat HEX = HexFormat.of();
    /** Takes offers while the agreement's thread reads the connection: a thread of its own, never a shared pool's. */
    private static final java.util.concurrent.Executor TAKING = r ->
            Thread.ofPlatform().daemon().name("sockmap4j-arrow-lending-take").start(r);
    private static final ScheduledExecutorService WATCH = Executors.newSingleThreadScheduledExecutor(r ->
            Thread.ofPlatform().daemon().name("sockmap4j-arrow-lending").unstarted(r));

    private static final java.util.concurrent.atomic.LongAdder LENT = new java.util.concurrent.atomic.LongAdder();
    private static final java.util.Map<Reason, java.util.concurrent.atomic.LongAdder> FALLBACKS = counters();
    private static final java.util.Map<Reason, String> LAST = new java.util.concurrent.ConcurrentHashMap<>();

    private Lending() {
    }

    private static java.util.Map<Reason, java.util.concurrent.atomic.LongAdder> counters() {
        java.util.Map<Reason, java.util.concurrent.atomic.LongAdder> m = new java.util.EnumMap<>(Reason.class);
        for (Reason r : Reason.values()) {
            m.put(r, new java.util.concurrent.atomic.LongAdder());
        }
        return java.util.Collections.unmodifiableMap(m);
    }

    /** Agreements of this process that lent, either end. */
    public static long lentAgreements() {
        return LENT.sum();
    }

    /** Agreements of this process that lent nothing, by reason, either end (the end that saw it counts it). */
    public static java.util.Map<Reason, Long> fallbacks() {
        java.util.Map<Reason, Long> m = new java.util.EnumMap<>(Reason.class);
        FALLBACKS.forEach((r, n) -> m.put(r, n.sum()));
        return m;
    }

    /** What the last agreement that fell back for {@code reason} said; null if none did. */
    public static String lastFallback(Reason reason) {
        return LAST.get(reason);
    }

    /** Counts an end's outcome, says it in JFR ({@link LendingEvent}), and a fallback in the log. */
    private static <T> Agreed<T> counted(Agreed<T> a, SocketChannel channel) {
        if (a.lent()) {
            LENT.increment();
            LendingEvent.emit("LENT", String.valueOf(channel));
        } else {
            FALLBACKS.get(a.reason()).increment();
            LAST.put(a.reason(), a.why());
            LendingEvent.emit(a.reason().name(), a.why());
            LOG.info("Arrow batches are not lent on {} ({}: {}): they go through the connection.", channel, a.reason(),
                    a.why());
        }
        return a;
    }

    /** Why an agreement lent nothing; the connection is as it was. Counted: {@link #fallbacks()}. */
    public enum Reason {
        /** The peer speaks another version of this agreement. */
        OTHER_VERSION,
        /** The sender's heap is larger than the receiver maps. */
        TOO_LARGE,
        /** A proxy or source NAT is between the two ends. */
        PROXIED,
        /** The receiver's listener is not reachable from the sender: another host, network namespace or pod. */
        NO_BROKER,
        /** The receiver does not let the sender's user share memory with it. */
        NOT_ALLOWED,
        /** The region could not be made or mapped. */
        NO_MEMORY,
        /** A step of the hand-over failed. */
        FAILED
    }

    /** What an agreement gave this end: its end of the lending, or why there is none. */
    public record Agreed<T>(T end, Reason reason, String why) {
        /** Whether batches are lent from here (else use the connection as it was). */
        public boolean lent() {
            return end != null;
        }

        static <T> Agreed<T> no(Reason reason, String why) {
            return new Agreed<>(null, reason, why);
        }
    }

    /**
     * The sending end: offers a region with a heap of {@code heapBytes} (a multiple of 4 KiB) to
     * the other end of {@code channel}.
     *
     * @throws IOException where the connection failed, or the peer did not answer within
     * {@code timeout} (the connection is then closed)
     */
    public static Agreed<BatchSender> offer(SocketChannel channel, long heapBytes, Duration timeout) throws IOException {
        return counted(watched(channel, timeout, () -> offering(channel, heapBytes, timeout)), channel);
    }

    private static Agreed<BatchSender> offering(SocketChannel channel, long heapBytes, Duration timeout)
            throws IOException {
        writeLine(channel, HELLO + " " + VERSION + " " + heapBytes + " " + RINGS);
        String[] answer = readLine(channel).split(" ");
        if (answer[0].equals("NO")) {
            return declined(answer, "the receiver");
        }
        if (answer.length != 4 || !answer[0].equals("LISTEN") || !answer[1].startsWith("@sm4j-arrow-")) {
            writeLine(channel, "NO OTHER_VERSION the answer was not version " + VERSION + "'s");
            return Agreed.no(Reason.OTHER_VERSION, "the receiver answered '" + clip(String.join(" ", answer)) + "'");
        }
        SocketAddress local = channel.getLocalAddress();
        if (!(local instanceof InetSocketAddress l) || !answer[3].equals(seen(l))) {
            String why = "the receiver sees this connection come from " + clip(answer[3]) + ", its end here is " + local;
            writeLine(channel, "NO PROXIED " + why);
            return Agreed.no(Reason.PROXIED, why);
        }
        byte[] nonce;
        try {
            nonce = HEX.parseHex(answer[2]);
        } catch (IllegalArgumentException e) {
            writeLine(channel, "NO OTHER_VERSION a nonce that is not hex");
            return Agreed.no(Reason.OTHER_VERSION, "the receiver's nonce is not hex");
        }
        SharedRegion region;
        try {
            region = SharedRegion.create("sm4j-arrow-lending", RINGS, heapBytes);
        } catch (IOException | IllegalArgumentException e) {
            writeLine(channel, "NO NO_MEMORY " + e.getMessage());
            return Agreed.no(Reason.NO_MEMORY, e.getMessage());
        }
        writeLine(channel, "OFFERING");
        Agreed<BatchSender> result;
        try {
            BrokerDirectory.offer(answer[1], nonce, region, timeout); // the receiver's directory first, where one is named
            result = new Agreed<>(new BatchSender(region, timeout), null, null);
        } catch (Handover.NoListenerException e) {
            result = Agreed.no(Reason.NO_BROKER, e.getMessage());
        } catch (Handover.RefusedException e) {
            result = Agreed.no(e.reason().startsWith("not allowed") ? Reason.NOT_ALLOWED : Reason.FAILED, e.getMessage());
        } catch (IOException | RuntimeException e) {
            result = Agreed.no(Reason.FAILED, e.getMessage());
        }
        if (!result.lent()) {
            region.close();
            writeLine(channel, "NO " + result.reason() + " " + result.why());
            return result;
        }
        writeLine(channel, "LENT");
        return result;
    }

    /**
     * The receiving end: answers the other end's offer, mapping a heap of at most {@code maxHeap}
     * bytes, from a process of this process's user.
     *
     * @throws IOException where the connection failed, or the peer did not answer within
     * {@code timeout} (the connection is then closed)
     */
    public static Agreed<BatchReceiver> accept(SocketChannel channel, long maxHeap, Duration timeout) throws IOException {
        return counted(watched(channel, timeout, () -> accepting(channel, maxHeap, timeout)), channel);
    }

    private interface Step<T> {
        Agreed<T> run() throws IOException;
    }

    /** Runs one end's agreement on a blocking {@code channel}, closing it where the time runs out first. */
    private static <T> Agreed<T> watched(SocketChannel channel, Duration timeout, Step<T> step) throws IOException {
        requireBlocking(channel);
        Watch w = new Watch(channel, timeout);
        try {
            return step.run();
        } catch (IOException e) {
            throw w.explain(e);
        } finally {
            w.cancel();
        }
    }

    private static Agreed<BatchReceiver> accepting(SocketChannel channel, long maxHeap, Duration timeout)
            throws IOException {
        String[] hello = readLine(channel).split(" ");
        if (hello.length != 4 || !hello[0].equals(HELLO) || !hello[1].equals(Integer.toString(VERSION))) {
            writeLine(channel, "NO OTHER_VERSION this end speaks version " + VERSION);
            return Agreed.no(Reason.OTHER_VERSION, "the sender said '" + clip(String.join(" ", hello)) + "'");
        }
        if (!org.apache.arrow.memory.BoundsChecking.BOUNDS_CHECKING_ENABLED) {
            String why = "this end runs with Arrow's bounds checks off (arrow.enable_unsafe_memory_access), so it "
                    + "takes no batch by reference (BatchReceiver says why)";
            writeLine(channel, "NO FAILED " + why);
            return Agreed.no(Reason.FAILED, why);
        }
        long heap;
        long rings;
        try {
            heap = Long.parseLong(hello[2]);
            rings = Long.parseLong(hello[3]);
        } catch (NumberFormatException e) {
            writeLine(channel, "NO OTHER_VERSION sizes that are not numbers");
            return Agreed.no(Reason.OTHER_VERSION, "the sender's sizes are not numbers");
        }
        if (heap > maxHeap || heap <= 0 || rings != RINGS) {
            String why = "a heap of " + heap + " bytes and rings of " + rings + "; this end maps a heap of at most "
                    + maxHeap + " and rings of " + RINGS;
            writeLine(channel, "NO TOO_LARGE " + why);
            return Agreed.no(Reason.TOO_LARGE, why);
        }
        SocketAddress remote = channel.getRemoteAddress();
        if (!(remote instanceof InetSocketAddress r)) {
            writeLine(channel, "NO NO_BROKER not a TCP connection");
            return Agreed.no(Reason.NO_BROKER, "not a TCP connection");
        }
        byte[] nonce = new byte[32];
        RANDOM.nextBytes(nonce);
        String name = "@sm4j-arrow-" + HEX.formatHex(nonce, 0, 8);
        int uid = Handover.ownUid();
        Handover.Listener listener = Handover.Listener.listen(Path.of(name));
        BrokerDirectory.Placed placed = null;
        try {
            placed = inBrokerDirectory(listener, name);
            CompletableFuture<Handover.Received> region = listener.expect(nonce, RINGS, heap, peer -> peer == uid);
            writeLine(channel, "LISTEN " + name + " " + HEX.formatHex(nonce) + " " + seen(r));
            String[] offering = readLine(channel).split(" ");
            if (offering[0].equals("NO")) {
                return declined(offering, "the sender");
            }
            if (!offering[0].equals("OFFERING")) {
                return Agreed.no(Reason.OTHER_VERSION, "the sender said '" + clip(String.join(" ", offering)) + "'");
            }
            CompletableFuture<Void> taking = take(listener, region, timeout);
            CompletableFuture<Void> takingThere = placed == null ? CompletableFuture.completedFuture(null)
                    : take(placed.listener(), region, timeout);
            String[] outcome = readLine(channel).split(" ");
            listener.close(); // ends the taking
            if (placed != null) {
                placed.close();
            }
            taking.join();
            takingThere.join();
            if (!outcome[0].equals("LENT")) {
                region.thenAccept(got -> got.region().close());
                return outcome[0].equals("NO") ? declined(outcome, "the sender")
                        : Agreed.no(Reason.OTHER_VERSION, "the sender said '" + clip(String.join(" ", outcome)) + "'");
            }
            Handover.Received got;
            try {
                got = region.get(timeout.toMillis(), TimeUnit.MILLISECONDS);
            } catch (ExecutionException | TimeoutException e) {
                return Agreed.no(Reason.FAILED, "the sender says it lent, and no region was taken: " + e);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IOException("interrupted", e);
            }
            return new Agreed<>(new BatchReceiver(got.region()), null, null);
        } finally {
            listener.close();
            if (placed != null) {
                placed.close();
            }
        }
    }

    /**
     * Offers at {@code at} until one is taken, the listener closes (the sender said how it went), or
     * the time is up; on a thread of its own (the common pool may have one thread, which the other
     * listener's taking would hold).
     */
    private static CompletableFuture<Void> take(Handover.Listener at, CompletableFuture<Handover.Received> region,
                                                Duration timeout) {
        CompletableFuture<Void> done = new CompletableFuture<>();
        Thread.ofPlatform().daemon().name("sockmap4j-arrow-lending-take").start(() -> {
            long deadline = System.nanoTime() + timeout.toNanos();
            try {
                while (!region.isDone() && !at.isClosed() && System.nanoTime() < deadline) {
                    at.acceptOne(timeout, Duration.ofMillis(50));
                }
            } catch (IOException e) {
                region.completeExceptionally(e);
            } finally {
                done.complete(null);
            }
        });
        return done;
    }

    /**
     * The listener's socket in the broker directory too, where one is named ({@link
     * BrokerDirectory#PROPERTY}: a sender in another pod that mounts it reaches it there); null
     * where none is, or where the directory refuses it (logged: a sender in this network
     * namespace still reaches the abstract name).
     */
    private static BrokerDirectory.Placed inBrokerDirectory(Handover.Listener listener, String name) {
        BrokerDirectory configured = BrokerDirectory.configured();
        if (configured == null) {
            return null;
        }
        try {
            BrokerDirectory d = BrokerDirectory.prepare(configured.path());
            d.sweep();
            return d.place(listener, name.substring(1));
        } catch (IOException | RuntimeException e) {
            LOG.warn("Arrow batches cannot be lent to this end from other network namespaces (pods): -D{}={}: {}",
                    BrokerDirectory.PROPERTY, configured.path(), e.getMessage());
            return null;
        }
    }

    private static <T> Agreed<T> declined(String[] line, String who) {
        Reason reason;
        try {
            reason = line.length > 1 ? Reason.valueOf(line[1]) : Reason.FAILED;
        } catch (IllegalArgumentException e) {
            reason = Reason.FAILED;
        }
        String words = line.length > 2 ? String.join(" ", java.util.Arrays.copyOfRange(line, 2, line.length)) : "";
        return Agreed.no(reason, who + " declined: " + clip(words));
    }

    private static String seen(InetSocketAddress a) {
        return a.getAddress().getHostAddress() + "/" + a.getPort();
    }

    private static String clip(String s) {
        return s.length() > 120 ? s.substring(0, 120) + "..." : s;
    }

    private static void requireBlocking(SocketChannel channel) {
        if (!channel.isBlocking()) {
            throw new IllegalArgumentException("the agreement runs on a blocking connection; configure it blocking "
                    + "for the agreement (and back after)");
        }
    }

    private static void writeLine(SocketChannel channel, String line) throws IOException {
        ByteBuffer b = ByteBuffer.wrap((line.replace('\n', ' ') + "\n").getBytes(StandardCharsets.UTF_8));
        while (b.hasRemaining()) {
            channel.write(b);
        }
    }

    /** A line, read a byte at a time so that nothing after it (the stream, where nothing is lent) is taken. */
    private static String readLine(SocketChannel channel) throws IOException {
        ByteBuffer one = ByteBuffer.allocate(1);
        StringBuilder line = new StringBuilder();
        while (true) {
            one.clear();
            if (channel.read(one) < 0) {
                throw new IOException("the connection ended during the lending agreement");
            }
            if (one.position() == 0) {
                continue;
            }
            char c = (char) (one.get(0) & 0xff);
            if (c == '\n') {
                return line.toString();
            }
            if (line.length() >= MAX_LINE) {
                return line.toString(); // not a line of this protocol: its words tell the caller
            }
            line.append(c);
        }
    }

    /** Closes the connection where the agreement outlives its time: its bytes could not be told apart after. */
    private static final class Watch {
        private final ScheduledFuture<?> alarm;
        private volatile boolean fired;

        Watch(SocketChannel channel, Duration timeout) {
            alarm = WATCH.schedule(() -> {
                fired = true;
                LOG.warn("The Arrow lending agreement on {} had no answer within {}: connection closed.", channel, timeout);
                try {
                    channel.close();
                } catch (IOException e) {
                    // closing: nothing more to do
                }
            }, timeout.toMillis(), TimeUnit.MILLISECONDS);
        }

        void cancel() {
            alarm.cancel(false);
        }

        /** {@code e}, or where the time ran out (and closed the connection under it), that said. */
        IOException explain(IOException e) {
            return fired ? new IOException("the peer did not answer the Arrow lending agreement in time: the "
                    + "connection was closed, as its bytes could not be told apart after", e) : e;
        }
    }
}
