package io.github.sockmap4j.netty.grpc;

import io.github.sockmap4j.colocated.grpc.ColocatedGrpc;
import io.github.sockmap4j.netty.PollingExecutor;
import io.github.sockmap4j.netty.SockmapNetty;
import io.grpc.MethodDescriptor;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.netty.channel.ChannelFactory;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.util.concurrent.DefaultThreadFactory;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.Collection;
import java.util.EnumMap;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.Executor;

/**
 * gRPC-Java over the sockmap fast path, one line on each builder:
 *
 * <pre>{@code
 * Server server = SockmapGrpc.configure(NettyServerBuilder.forPort(port)).addService(...).build();
 * ManagedChannel ch = SockmapGrpc.configure(NettyChannelBuilder.forAddress("localhost", port)).usePlaintext().build();
 * }</pre>
 *
 * The server's port is opted in while it is bound; both sides run Netty's epoll transport (NIO
 * where epoll is unavailable) on a shared event loop group of daemon threads, and publish their
 * reads for the in-flight bound. Needs {@code io.grpc:grpc-netty} (not shaded) with Netty 4.2.
 *
 * <p>{@link #configure(NettyServerBuilder, Profile)} and {@link #configure(NettyChannelBuilder, Profile)}
 * choose how the calls wait for each other ({@link Profile}): with the event loops sleeping between
 * events (what {@code configure(builder)} does), polling briefly before they sleep, or polling and
 * running the handlers on the loops. {@link #runOnEventLoops(NettyServerBuilder, Collection)} runs
 * the services that never block on the loops and the others on a pool, in any profile but
 * {@code DIRECT} (which runs them all on the loops).
 */
public final class SockmapGrpc {
    private static final Object LOCK = new Object();

    private SockmapGrpc() {
    }

    /**
     * How a service's gRPC calls wait for each other on this host; the same on both ends is the
     * case measured (docs/lab-notes.md, "Polling before sleeping").
     */
    public enum Profile {
        /**
         * Event loops that sleep until an event comes, gRPC's own executor: what
         * {@code configure(builder)} does, and the least CPU while a service is idle.
         */
        STANDARD(Duration.ZERO),
        /**
         * Event loops that poll for up to 50 µs before they sleep, for as long as their sleeps
         * have been shorter than that ({@link SockmapNetty#ioHandlerFactory(Duration)}): a reply or
         * a hand-over within the window wakes no thread. Handlers and callbacks run on an executor
         * whose idle threads poll the same way ({@link #pollingExecutor()}), threads made as
         * gRPC's own executor makes them, so a handler may block. A loop or a thread whose work
         * comes seldom, or later than the window, stops polling by itself; on one CPU none polls,
         * and none while some task of the process's cgroup has been waiting for a CPU most of the
         * time (the kernel's CPU pressure; {@code -Dsockmap4j.pollWhileBusy=true} turns that off).
         * It pays where calls follow each other within microseconds; in the RAG demo, whose stages'
         * own work takes the CPUs between calls, it made the tail worse than {@link #STANDARD}
         * (docs/lab-notes.md, "STANDARD and POLLING with both paths at once").
         */
        POLLING(Duration.ofNanos(50_000)),
        /**
         * {@code directExecutor()} on the builder, and event loops that poll for up to 200 µs:
         * gRPC runs the service's handlers and the channel's callbacks on the event loops instead
         * of handing each to an executor thread, so a loop waits for its peer's whole handling of
         * a call, which the longer window covers. Only for handlers that never block: one that
         * waits holds every call of its loop.
         */
        DIRECT(Duration.ofNanos(200_000));

        private final Duration maxPoll;

        Profile(Duration maxPoll) {
            this.maxPoll = maxPoll;
        }

        /**
         * The longest a loop of this profile polls before it sleeps.
         *
         * @return the window's cap, zero for none
         */
        public Duration maxPoll() {
            return maxPoll;
        }
    }

    private static final Map<Profile, EventLoopGroup> GROUPS = new EnumMap<>(Profile.class);

    /** The event loop group the builders get unless given one; daemon threads, one per CPU. */
    public static EventLoopGroup sharedGroup() {
        return group(Profile.STANDARD);
    }

    /**
     * The event loop group of {@code profile}, shared by every builder configured with it: daemon
     * threads, one per CPU, polling for up to {@link Profile#maxPoll()} before they sleep.
     *
     * @param profile how the loops wait
     * @return the group, made at the first call
     */
    public static EventLoopGroup group(Profile profile) {
        Objects.requireNonNull(profile, "profile");
        synchronized (LOCK) {
            return GROUPS.computeIfAbsent(profile, p -> new MultiThreadIoEventLoopGroup(
                    Runtime.getRuntime().availableProcessors(),
                    new DefaultThreadFactory(p == Profile.STANDARD ? "sockmap4j-grpc"
                            : "sockmap4j-grpc-" + p.name().toLowerCase(Locale.ROOT), true),
                    p.maxPoll().isZero() ? SockmapNetty.ioHandlerFactory() : SockmapNetty.ioHandlerFactory(p.maxPoll())));
        }
    }

    private static PollingExecutor pollingExecutor;

    /**
     * The executor of {@link Profile#POLLING}'s servers and channels: idle threads poll for the
     * next task for up to the profile's window before they sleep, one made per JVM at the first
     * call; its threads end after a minute idle.
     *
     * @return the shared polling executor
     */
    public static PollingExecutor pollingExecutor() {
        synchronized (LOCK) {
            if (pollingExecutor == null) {
                pollingExecutor = new PollingExecutor("sockmap4j-exec", Profile.POLLING.maxPoll());
            }
            return pollingExecutor;
        }
    }

    public static NettyServerBuilder configure(NettyServerBuilder builder) {
        return configure(builder, sharedGroup(), sharedGroup());
    }

    /**
     * As {@link #configure(NettyServerBuilder)}, in {@code profile}.
     *
     * @param builder the server's builder
     * @param profile how its calls wait
     * @return {@code builder}
     */
    public static NettyServerBuilder configure(NettyServerBuilder builder, Profile profile) {
        Objects.requireNonNull(profile, "profile");
        configure(builder, group(profile), group(profile));
        return switch (profile) {
            case STANDARD -> builder;
            case POLLING -> builder.executor(pollingExecutor());
            case DIRECT -> builder.directExecutor();
        };
    }

    /**
     * As {@link #configure(NettyChannelBuilder)}, in {@code profile}.
     *
     * @param builder the channel's builder
     * @param profile how its calls wait
     * @return {@code builder}
     */
    public static NettyChannelBuilder configure(NettyChannelBuilder builder, Profile profile) {
        Objects.requireNonNull(profile, "profile");
        configure(builder, group(profile));
        return switch (profile) {
            case STANDARD -> builder;
            case POLLING -> builder.executor(pollingExecutor());
            case DIRECT -> builder.directExecutor();
        };
    }

    /**
     * Runs the calls of {@code nonBlockingServices} on the event loop that read them, from their
     * first byte to their reply, and every other service's on {@link #blockingPool()}: no thread is
     * woken to hand a call of a non-blocking service over and back. Works on any Netty server
     * builder, on the fast path or not; call it after {@code configure}, and set no executor on
     * the builder afterwards (that would run every call on it again).
     *
     * <p>Only for services whose handlers never block: a handler on a loop holds every other
     * connection of that loop while it runs, and one that waits for a blocking stub's call on a
     * channel of the same loops waits until that call's deadline, since the loop that would read
     * its answer is the one it holds. A call that held its loop for over 200 ms logs a WARN naming
     * its service, once.
     *
     * @param builder             the server's builder
     * @param nonBlockingServices full service names ({@code package.Service}) whose handlers never block
     * @return {@code builder}
     * @throws IllegalArgumentException if a name is blank or names a method
     */
    public static NettyServerBuilder runOnEventLoops(NettyServerBuilder builder, Collection<String> nonBlockingServices) {
        return runOnEventLoops(builder, nonBlockingServices, blockingPool());
    }

    /**
     * As {@link #runOnEventLoops(NettyServerBuilder, Collection)}, with the services that may block
     * on {@code blockingPool}.
     *
     * @param builder             the server's builder
     * @param nonBlockingServices full service names whose handlers never block
     * @param blockingPool        where every other service's calls run
     * @return {@code builder}
     */
    public static NettyServerBuilder runOnEventLoops(NettyServerBuilder builder, Collection<String> nonBlockingServices,
                                                     Executor blockingPool) {
        return runOnEventLoops(builder, new LoopExecution(Set.copyOf(nonBlockingServices), blockingPool,
                LOOP_STALL_WARNING));
    }

    static NettyServerBuilder runOnEventLoops(NettyServerBuilder builder, LoopExecution where) {
        return builder.directExecutor().callExecutor(where).intercept(where);
    }

    /**
     * A channel's callbacks (a response's listener, an async stub's observer) on the event loop that
     * read them instead of handed to gRPC's executor: for callers whose callbacks never block.
     * Blocking stubs are unaffected (each call brings an executor of its own, the calling thread).
     * A call started before the channel has connected waits in gRPC's delayed transport, and its
     * first callbacks may run on the thread that hands it over (gRPC's own executor); connect
     * first ({@code getState(true)} until {@code READY}) where every callback must be on a loop.
     *
     * @param builder the channel's builder
     * @return {@code builder}
     */
    public static NettyChannelBuilder runOnEventLoops(NettyChannelBuilder builder) {
        return builder.directExecutor();
    }

    /**
     * Where {@link #runOnEventLoops(NettyServerBuilder, Collection)} runs the services that may
     * block: a pool of daemon threads ({@code sockmap4j-handler-N}), made as needed as gRPC's
     * default executor is, one per JVM.
     *
     * @return the shared pool
     */
    public static Executor blockingPool() {
        return LoopExecution.sharedBlockingPool();
    }

    private static final Duration LOOP_STALL_WARNING = Duration.ofMillis(200);

    public static NettyServerBuilder configure(NettyServerBuilder builder, EventLoopGroup boss, EventLoopGroup worker) {
        return colocated(builder, SockmapNetty.serverChannelFactory())
                .bossEventLoopGroup(boss)
                .workerEventLoopGroup(worker);
    }

    /**
     * {@code builder}'s connections accepted by channels of {@code servers} (a {@link SockmapNetty}
     * transport's, say), and its server let agree to co-located connections unless
     * {@code -Dsockmap4j.colocated=false}: what {@code configure} does beside its event loops, for a
     * framework that chooses those itself (the Spring Boot starter).
     *
     * @param builder the server's builder
     * @param servers what makes its listening channels
     * @return {@code builder}
     */
    public static NettyServerBuilder acceptedBy(NettyServerBuilder builder,
                                                ChannelFactory<io.netty.channel.socket.ServerSocketChannel> servers) {
        return colocated(builder, servers);
    }

    /**
     * {@code builder}'s server channels made by {@code servers}, and the server let agree to
     * co-located connections unless {@code -Dsockmap4j.colocated=false}: each read on the event loop
     * of the TCP connection it was agreed over.
     */
    private static NettyServerBuilder colocated(NettyServerBuilder builder,
                                                ChannelFactory<io.netty.channel.socket.ServerSocketChannel> servers) {
        if (!ColocatedGrpc.enabled()) {
            ColocatedGrpc.countOff("a server");
            return builder.channelFactory(servers);
        }
        ServerLifelines lifelines = new ServerLifelines(servers);
        return ColocatedGrpc.configure(builder.channelFactory(lifelines), lifelines);
    }

    /**
     * {@code builder}'s connections made by {@code channels}, and its calls moved to a co-located
     * connection where the server agrees, unless {@code -Dsockmap4j.colocated=false}: each TCP connection
     * that carried an agreement is its co-located connection's lifeline.
     */
    private static NettyChannelBuilder colocated(NettyChannelBuilder builder, ChannelFactory<SocketChannel> channels) {
        if (!ColocatedGrpc.enabled()) {
            ColocatedGrpc.countOff("a channel");
            return builder.channelFactory(channels);
        }
        TcpLifelines lifelines = new TcpLifelines(channels);
        return ColocatedGrpc.configure(builder.channelFactory(lifelines), lifelines);
    }

    /**
     * As {@link #configure(NettyServerBuilder, EventLoopGroup, EventLoopGroup)}, over the fast path
     * of {@code transport} ({@link SockmapNetty#of}) instead of {@code Sockmap.global()}.
     *
     * @param builder   the server's builder
     * @param transport the transport over the service's own {@code Sockmap}
     * @param boss      the group that accepts
     * @param worker    the group that serves
     * @return {@code builder}
     */
    public static NettyServerBuilder configure(NettyServerBuilder builder, SockmapNetty transport, EventLoopGroup boss,
                                               EventLoopGroup worker) {
        return colocated(builder, transport.serverChannels(0)).bossEventLoopGroup(boss)
                .workerEventLoopGroup(worker);
    }

    public static NettyChannelBuilder configure(NettyChannelBuilder builder) {
        return configure(builder, sharedGroup());
    }

    public static NettyChannelBuilder configure(NettyChannelBuilder builder, EventLoopGroup group) {
        return colocated(builder, SockmapNetty.socketChannelFactory()).eventLoopGroup(group);
    }

    /**
     * As {@link #configure(NettyChannelBuilder, EventLoopGroup)}, over the fast path of
     * {@code transport} instead of {@code Sockmap.global()}.
     *
     * @param builder   the channel's builder
     * @param transport the transport over the client's own {@code Sockmap}
     * @param group     the group its connections run on
     * @return {@code builder}
     */
    public static NettyChannelBuilder configure(NettyChannelBuilder builder, SockmapNetty transport,
                                                EventLoopGroup group) {
        return colocated(builder, transport.socketChannels()).eventLoopGroup(group);
    }

    /**
     * A marshaller of raw {@code byte[]} messages, for services that carry their own encoding
     * (Arrow IPC, say) or none; also what the tests, demo and benchmark use.
     */
    public static MethodDescriptor.Marshaller<byte[]> bytesMarshaller() {
        return BYTES;
    }

    private static final MethodDescriptor.Marshaller<byte[]> BYTES = new MethodDescriptor.Marshaller<>() {
        @Override
        public InputStream stream(byte[] value) {
            return new ByteArrayInputStream(value);
        }

        @Override
        public byte[] parse(InputStream stream) {
            try {
                return stream.readAllBytes();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    };
}
