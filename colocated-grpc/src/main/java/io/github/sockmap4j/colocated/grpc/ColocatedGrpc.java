package io.github.sockmap4j.colocated.grpc;

import io.grpc.Attributes;
import io.grpc.ManagedChannelBuilder;
import io.grpc.ServerBuilder;
import java.net.SocketAddress;
import java.util.EnumMap;
import java.util.Map;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Co-located connections picked by themselves: a server and a channel configured here agree, on
 * the channel's own TCP connection, to move its calls to a co-located connection (rings in memory
 * both processes map), and fall back to HTTP/2 on that TCP connection, with a reason
 * ({@link Fallback}), where they cannot. The TCP connection stays open as the co-located one's
 * lifeline.
 *
 * <pre>{@code
 * Server s = ColocatedGrpc.configure(NettyServerBuilder.forPort(port)).addService(svc).build().start();
 * ManagedChannel ch = ColocatedGrpc.configure(NettyChannelBuilder.forAddress("localhost", port)).usePlaintext().build();
 * }</pre>
 *
 * {@code SockmapGrpc.configure} does this unless {@code -Dsockmap4j.colocated=false}: on by
 * default, since a channel or server falls back to HTTP/2 by itself wherever the other end, the
 * rules or the channel's balancing do not let its calls move (docs/colocated.md).
 */
public final class ColocatedGrpc {
    /** The switch {@code SockmapGrpc.configure} reads: on unless {@code -Dsockmap4j.colocated=false}. */
    public static final String SWITCH = "sockmap4j.colocated";
    /** Each ring's bytes a server asks for ({@code -Dsockmap4j.colocated.ringBytes}, a power of two; 1 MiB). */
    public static final String RING_BYTES = "sockmap4j.colocated.ringBytes";
    /** The co-located connections a server takes at once ({@code -Dsockmap4j.colocated.maxConnections}; 256). */
    public static final String MAX_CONNECTIONS = "sockmap4j.colocated.maxConnections";
    /**
     * How long a caller blocked on a unary call (a blocking stub's) reads its own reply from the
     * ring before it leaves it to the connection's reader ({@code
     * -Dsockmap4j.colocated.callerReadsMicros}, 20,000; 0: never), read as each co-located
     * connection starts.
     */
    public static final String CALLER_READS_MICROS = "sockmap4j.colocated.callerReadsMicros";
    /**
     * A directory both ends mount, where a server's hand-over also listens as a file and a
     * channel looks for it ({@code -Dsockmap4j.colocated.brokerDir}; unset: the hand-over is an
     * abstract socket, reached only from the server's network namespace). Two pods of one node
     * share memory only where both are given one directory: mounting it is the grant. Read at
     * each agreement.
     */
    public static final String BROKER_DIR = io.github.sockmap4j.colocated.BrokerDirectory.PROPERTY;
    /**
     * The bytes of heap each end of a co-located connection lends message bodies from ({@code
     * -Dsockmap4j.colocated.lendBytes}, a multiple of 4096 up to 1 GiB; unset, {@link
     * #DEFAULT_LEND_BYTES}; 0: no lending). Where both ends lend, they agree on the smaller and
     * the region carries a heap of twice that, half for each end: a {@link LendableMessage}'s
     * body then stays in shared memory and the peer reads it in place ({@link LentMessage}).
     * Read at each agreement. Memory is taken only where a body is put (the heap is a file's
     * pages, touched as used, first fit from its start): a connection holds as many of them as
     * it once had lent at one time, at most twice this.
     */
    public static final String LEND_BYTES = "sockmap4j.colocated.lendBytes";
    /**
     * Each end's heap where {@link #LEND_BYTES} is unset: 16 MiB, four messages of gRPC's
     * default largest inbound message (4 MiB) in flight each way before a sender copies through
     * the ring instead.
     */
    public static final long DEFAULT_LEND_BYTES = 16L << 20;
    /** On a server call's attributes: true where the call came over a co-located connection. */
    public static final Attributes.Key<Boolean> TRANSPORT_ATTR_COLOCATED = Attributes.Key.create("sockmap4j.colocated");

    private static final Logger LOG = LoggerFactory.getLogger(ColocatedGrpc.class);
    private static final java.util.concurrent.atomic.AtomicBoolean LEND_WARNED = new java.util.concurrent.atomic.AtomicBoolean();
    private static final LongAdder UPGRADES = new LongAdder();
    private static final Map<Fallback, LongAdder> FALLBACKS = new EnumMap<>(Fallback.class);
    private static final Map<Fallback, String> LAST = new java.util.concurrent.ConcurrentHashMap<>();

    static {
        for (Fallback f : Fallback.values()) {
            FALLBACKS.put(f, new LongAdder());
        }
    }

    private ColocatedGrpc() {
    }

    /** Whether the switch is on: {@code -Dsockmap4j.colocated} unset (the default) or {@code true}. */
    public static boolean enabled() {
        return Boolean.parseBoolean(System.getProperty(SWITCH, "true"));
    }

    /** Lets {@code builder}'s server agree to co-located connections. */
    public static <T extends ServerBuilder<T>> T configure(T builder) {
        return configure(builder, (ReadLoop.Finder) null);
    }

    /**
     * As {@link #configure(ServerBuilder)}, where {@code loops} finds the event loop of the TCP
     * connection a co-located connection was agreed over, by the client's address as the server
     * sees it: the connection is read there, as that loop reads its socket, where it can (null,
     * or a null answer: a thread of its own).
     */
    public static <T extends ServerBuilder<T>> T configure(T builder, ReadLoop.Finder loops) {
        Acceptor a = new Acceptor(ringBytes(), Integer.getInteger(MAX_CONNECTIONS, 256), loops);
        return builder.addService(a.definition()).addTransportFilter(a.lifelines());
    }

    /**
     * Lets {@code builder}'s channel move its calls to a co-located connection where its server
     * agrees. The co-located connection runs the calls' callbacks on the executor the channel is
     * built with (its {@code executor}, or {@code directExecutor()}: on the thread that read them),
     * and takes its inbound limits and user agent, whenever they are set on the builder.
     */
    public static <T extends ManagedChannelBuilder<T>> T configure(T builder) {
        return configure(builder, local -> null);
    }

    /**
     * As {@link #configure(ManagedChannelBuilder)}, where {@code lifelines} finds the channel's TCP
     * connection by its local address: a stage that completes when that connection ends (null
     * where it knows none). A co-located connection goes away with it: new calls go over HTTP/2 at
     * once, the open ones run to their end while the server answers a ping each second, so that a
     * server's maximum connection age fails none and a server killed outright fails them with
     * UNAVAILABLE within about two seconds; after the channel's {@code shutdownNow} they end at
     * once. Where
     * {@code lifelines} is also {@link ChannelConnections}, a channel connected to several servers
     * keeps its calls on HTTP/2 ({@link Fallback#BALANCED}).
     */
    public static <T extends ManagedChannelBuilder<T>> T configure(
            T builder, Function<SocketAddress, ? extends CompletionStage<?>> lifelines) {
        return builder.intercept(new Upgrade(ringBytes(), lifelines, builder));
    }

    /** Each end's heap for lent bodies as set ({@link #LEND_BYTES}, or its default), 0 where lending is off. */
    static long lendBytes() {
        String v = System.getProperty(LEND_BYTES);
        if (v == null || v.isBlank()) {
            return DEFAULT_LEND_BYTES;
        }
        long b;
        try {
            b = Long.parseLong(v.trim());
        } catch (NumberFormatException e) {
            b = -1;
        }
        if (b < 0 || b > (1L << 30) || b % 4096 != 0) {
            if (LEND_WARNED.compareAndSet(false, true)) {
                LOG.warn("-D{}={}: not a multiple of 4096 from 0 to 1073741824; nothing is lent (set it to such a "
                        + "size, e.g. 67108864, 0 to lend nothing, or leave it unset for 16 MiB)", LEND_BYTES, v);
            }
            return 0;
        }
        return b;
    }

    /** Messages this process lent over co-located connections (their bodies left in shared memory). */
    public static long messagesLent() {
        return Lending.messagesLent();
    }

    /** The bodies of those messages, in bytes: what no ring carried. */
    public static long bytesLent() {
        return Lending.bytesLent();
    }

    /** Lendable messages that went through a ring as bytes because this end's heap had no room for them then. */
    public static long lendingNoRoom() {
        return Lending.noRoom();
    }

    private static long ringBytes() {
        long b = Long.getLong(RING_BYTES, 1L << 20);
        if (b < 4096 || b > (1L << 30) || Long.bitCount(b) != 1) {
            throw new IllegalArgumentException("-D" + RING_BYTES + "=" + b + ": a power of two from 4096 to 1073741824");
        }
        return b;
    }

    /** Co-located connections made in this process, either end. */
    public static long upgrades() {
        return UPGRADES.sum();
    }

    /** Agreements that fell back in this process, by reason, either end (every reason, zeros included). */
    public static Map<Fallback, Long> fallbacks() {
        Map<Fallback, Long> m = new EnumMap<>(Fallback.class);
        FALLBACKS.forEach((f, n) -> m.put(f, n.sum()));
        return m;
    }

    /** The words of the last fallback for {@code reason} in this process; null if none. */
    public static String lastFallback(Fallback reason) {
        return LAST.get(reason);
    }

    static void countUpgrade(String details) {
        UPGRADES.increment();
        AgreementEvent.emit("UPGRADED", details);
    }

    /**
     * Counts a fallback and records it (JFR {@code io.github.sockmap4j.ColocatedAgreement}); the
     * first of each reason is logged at INFO (but OFF's), the rest at DEBUG.
     */
    static void count(Fallback reason, String words) {
        FALLBACKS.get(reason).increment();
        AgreementEvent.emit(reason.name(), words);
        if (LAST.put(reason, words) == null && reason != Fallback.OFF) {
            LOG.info("Calls stay on HTTP/2 ({}: {}): {}", reason, reason.description(), words);
        } else {
            LOG.debug("Calls stay on HTTP/2 ({}): {}", reason, words);
        }
    }

    /** Counts a channel or server configured while the switch is off. */
    public static void countOff(String what) {
        count(Fallback.OFF, what + " configured with -D" + SWITCH + " off");
    }
}
