package io.github.sockmap4j.reactor;

import io.github.sockmap4j.netty.SockmapNetty;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFactory;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.epoll.EpollDatagramChannel;
import io.netty.channel.epoll.EpollDomainSocketChannel;
import io.netty.channel.epoll.EpollServerDomainSocketChannel;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.socket.DatagramChannel;
import io.netty.channel.socket.ServerSocketChannel;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioDatagramChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.unix.DomainSocketChannel;
import io.netty.channel.unix.ServerDomainSocketChannel;
import io.netty.util.concurrent.DefaultThreadFactory;
import java.time.Duration;
import java.util.Objects;
import reactor.core.publisher.Mono;
import reactor.netty.resources.LoopResources;

/**
 * Reactor Netty's event loops and channels over sockmap4j's Netty transport: the {@code
 * LoopResources} that {@code HttpServer}, {@code HttpClient}, {@code TcpServer} and {@code
 * TcpClient} take with {@code runOn(...)}, and that {@code HttpResources.set(...)} or {@code
 * TcpResources.set(...)} make the default of every server and client that names none.
 *
 * <pre>{@code
 * LoopResources loops = SockmapLoopResources.create("my-service");
 * HttpServer.create().runOn(loops).port(8080)...
 * HttpClient.create().runOn(loops)...
 * HttpResources.set(loops);   // or for all of them, Spring WebFlux and WebClient included
 * }</pre>
 *
 * <p>Reactor Netty's own resources choose a channel class by asking whether the group can run
 * epoll channels, so {@code runOn} with an epoll group of this transport alone still gives
 * stock epoll channels: servers that never opt their port in and connections that neither
 * publish their reads nor wait for credit. These resources make every channel themselves
 * ({@link #onChannel}): server channels of {@link SockmapNetty#serverChannels} (the bound port
 * is opted in as part of the bind, and out when it closes), client channels of
 * {@link SockmapNetty#socketChannels}, and datagram channels of the same kind as the loops for
 * name resolution (which the fast path does not touch). Reactor's {@code useNative} and
 * {@code preferNative(false)} are not followed: the channels are epoll where Netty's epoll
 * loads, NIO where it does not, as the transport says at start.
 *
 * <p>One group of event loops serves the accepting channels, the served connections and the
 * clients, as Reactor Netty's default does with no selector count set.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
public final class SockmapLoopResources implements LoopResources {
    /**
     * The least quiet period the loops are given when disposed: a Netty 4.2 event loop shut
     * down with none can end without closing its channels (docs/use-it.md, "Shutting down event loops").
     */
    static final Duration LEAST_QUIET_PERIOD = Duration.ofMillis(100);

    private final SockmapNetty transport;
    private final ChannelFactory<ServerSocketChannel> servers;
    private final ChannelFactory<SocketChannel> clients;
    private final String prefix;
    private final int workers;
    private final boolean daemon;
    private final int inFlightBoundBytes;
    private final Duration maxPoll;
    private final Object lock = new Object();
    private EventLoopGroup group;

    private SockmapLoopResources(SockmapNetty transport, String prefix, int workers, boolean daemon,
                                 int inFlightBoundBytes, Duration maxPoll) {
        this.transport = transport;
        this.inFlightBoundBytes = inFlightBoundBytes;
        this.maxPoll = maxPoll;
        this.servers = transport.serverChannels(inFlightBoundBytes);
        this.clients = transport.socketChannels();
        this.prefix = prefix;
        this.workers = workers;
        this.daemon = daemon;
    }

    /**
     * Loops over {@code Sockmap.global()}, as many as Reactor Netty's default (its
     * {@code reactor.netty.ioWorkerCount}), of daemon threads named after {@code prefix}.
     *
     * @param prefix the start of the loop threads' names
     * @return the resources; their loops start with the first server or client
     */
    public static SockmapLoopResources create(String prefix) {
        return create(SockmapNetty.global(), prefix, DEFAULT_IO_WORKER_COUNT, true, 0);
    }

    /**
     * Loops over the fast path of {@code transport} ({@link SockmapNetty#of} or
     * {@link SockmapNetty#global()}).
     *
     * @param transport          the transport whose fast path the channels take
     * @param prefix             the start of the loop threads' names
     * @param workers            how many event loops, at least 1
     * @param daemon             whether the loop threads are daemon threads
     * @param inFlightBoundBytes the in-flight bound of the connections servers accept, 0 for each
     *                           receiver's default (docs/in-flight-bound.md)
     * @return the resources; their loops start with the first server or client
     */
    public static SockmapLoopResources create(SockmapNetty transport, String prefix, int workers, boolean daemon,
                                              int inFlightBoundBytes) {
        Objects.requireNonNull(transport, "transport");
        if (Objects.requireNonNull(prefix, "prefix").isEmpty()) {
            throw new IllegalArgumentException("prefix must not be empty");
        }
        if (workers < 1) {
            throw new IllegalArgumentException("workers must be at least 1: workers=" + workers);
        }
        if (inFlightBoundBytes < 0) {
            throw new IllegalArgumentException("bound must be 0 or more: inFlightBoundBytes=" + inFlightBoundBytes);
        }
        return new SockmapLoopResources(transport, prefix, workers, daemon, inFlightBoundBytes, Duration.ZERO);
    }

    /**
     * The same resources with loops that poll for up to {@code maxPoll} before they sleep
     * ({@link SockmapNetty#ioHandlerFactory(Duration)}: a window each loop learns, no polling on
     * one CPU or while tasks wait for the CPUs), what {@code SockmapGrpc.Profile.POLLING} gives
     * gRPC's loops; {@link Duration#ZERO} for loops that sleep until an event comes (the default).
     * Loops already started by these resources keep sleeping: call it before the first server or
     * client.
     *
     * @param maxPoll the longest poll, at most 1 ms
     * @return new resources of the same transport, prefix, size and bound
     */
    public SockmapLoopResources polling(Duration maxPoll) {
        SockmapNetty.ioHandlerFactory(Objects.requireNonNull(maxPoll, "maxPoll")); // refuses a bad window by name
        return new SockmapLoopResources(transport, prefix, workers, daemon, inFlightBoundBytes, maxPoll);
    }

    /** How long these resources' loops poll before they sleep, zero for not at all. */
    public Duration maxPoll() {
        return maxPoll;
    }

    /** The transport whose channels these resources make. */
    public SockmapNetty transport() {
        return transport;
    }

    @Override
    public EventLoopGroup onServer(boolean useNative) {
        return loops();
    }

    @Override
    public EventLoopGroup onClient(boolean useNative) {
        return loops();
    }

    @Override
    public EventLoopGroup onServerSelect(boolean useNative) {
        return loops();
    }

    /**
     * The loops, started on first use, and again after {@link #disposeLater} (Reactor Netty's
     * global resources are used again after a dispose, as in a test that restarts a server).
     */
    public EventLoopGroup loops() {
        synchronized (lock) {
            if (group == null || group.isShuttingDown()) {
                group = new MultiThreadIoEventLoopGroup(workers,
                        new DefaultThreadFactory(prefix + "-sockmap", daemon), maxPoll.isZero()
                        ? SockmapNetty.ioHandlerFactory() : SockmapNetty.ioHandlerFactory(maxPoll));
            }
            return group;
        }
    }

    /**
     * A channel of this transport for the type Reactor Netty asks for: {@link ServerSocketChannel},
     * {@link SocketChannel}, {@link DatagramChannel} (name resolution) or a Unix domain socket
     * channel (epoll only; never accelerated).
     *
     * @throws IllegalArgumentException for any other type, naming it
     */
    @Override
    public <C extends Channel> C onChannel(Class<C> type, EventLoopGroup group) {
        Channel ch;
        if (type == ServerSocketChannel.class) {
            ch = servers.newChannel();
        } else if (type == SocketChannel.class) {
            ch = clients.newChannel();
        } else if (type == DatagramChannel.class) {
            ch = SockmapNetty.isEpollAvailable() ? new EpollDatagramChannel() : new NioDatagramChannel();
        } else if (type == DomainSocketChannel.class && epollFor(type)) {
            ch = new EpollDomainSocketChannel();
        } else if (type == ServerDomainSocketChannel.class && epollFor(type)) {
            ch = new EpollServerDomainSocketChannel();
        } else {
            throw new IllegalArgumentException(
                    "sockmap4j's LoopResources makes no " + type.getName() + " (only TCP, UDP and Unix domain sockets)");
        }
        return type.cast(ch);
    }

    /**
     * The class Reactor Netty's name resolver instantiates for {@code type}: the same kinds as
     * {@link #onChannel}. A server channel made from the class by reflection is not opted in.
     */
    @Override
    public <C extends Channel> Class<? extends C> onChannelClass(Class<C> type, EventLoopGroup group) {
        boolean epoll = SockmapNetty.isEpollAvailable();
        Class<?> c;
        if (type == ServerSocketChannel.class) {
            c = epoll ? EpollServerSocketChannel.class : NioServerSocketChannel.class;
        } else if (type == SocketChannel.class) {
            c = SockmapNetty.socketChannelClass();
        } else if (type == DatagramChannel.class) {
            c = epoll ? EpollDatagramChannel.class : NioDatagramChannel.class;
        } else if (type == DomainSocketChannel.class && epollFor(type)) {
            c = EpollDomainSocketChannel.class;
        } else if (type == ServerDomainSocketChannel.class && epollFor(type)) {
            c = EpollServerDomainSocketChannel.class;
        } else {
            throw new IllegalArgumentException("sockmap4j's LoopResources makes no " + type.getName());
        }
        return c.asSubclass(type);
    }

    private static boolean epollFor(Class<?> type) {
        if (!SockmapNetty.isEpollAvailable()) {
            throw new IllegalArgumentException(type.getSimpleName() + " needs Netty's epoll, which is unavailable here");
        }
        return true;
    }

    @Override
    public boolean daemon() {
        return daemon;
    }

    @Override
    public boolean isDisposed() {
        synchronized (lock) {
            return group == null || group.isTerminated();
        }
    }

    /**
     * Shuts the loops down, every channel on them closed, with a quiet period of at least 100 ms
     * (see {@link #LEAST_QUIET_PERIOD}).
     */
    @Override
    public Mono<Void> disposeLater(Duration quietPeriod, Duration timeout) {
        return Mono.defer(() -> {
            EventLoopGroup g;
            synchronized (lock) {
                g = group;
            }
            if (g == null) {
                return Mono.empty();
            }
            long quiet = Math.max(LEAST_QUIET_PERIOD.toMillis(), quietPeriod.toMillis());
            long limit = Math.max(quiet, timeout.toMillis());
            return Mono.<Void>create(sink -> g.shutdownGracefully(quiet, limit, java.util.concurrent.TimeUnit.MILLISECONDS)
                    .addListener(f -> {
                        if (f.isSuccess()) {
                            sink.success();
                        } else {
                            sink.error(f.cause());
                        }
                    }));
        });
    }

    @Override
    public String toString() {
        return "SockmapLoopResources[" + prefix + ", " + workers + " loops, " + transport + "]";
    }
}
