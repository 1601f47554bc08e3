package io.github.sockmap4j.bench;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.netty.PollingExecutor;
import io.github.sockmap4j.netty.SockmapNetty;
import io.github.sockmap4j.netty.grpc.SockmapGrpc;
import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.inprocess.InProcessChannelBuilder;
import io.grpc.inprocess.InProcessServerBuilder;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelFactory;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.ServerChannel;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.socket.SocketChannel;
import io.github.sockmap4j.SockmapStats;
import io.github.sockmap4j.admin.SockmapAdmin;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.file.Path;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.HdrHistogram.Histogram;

/**
 * Netty and gRPC over the fast path against stock Netty epoll and stock grpc-netty (epoll) over
 * TCP, and against the same over a Unix domain socket (Netty's epoll domain socket channels: the
 * usual answer when both ends are yours and on one host), and gRPC against its in-process transport
 * (the same calls with no socket at all: the ceiling), interleaved rounds in one run: Netty echo
 * RTT of 64 B, gRPC unary RTT of 1 KiB, gRPC server streaming throughput of 64 KiB messages. Prints
 * medians over rounds, ratios to stock TCP and to the domain socket, and for gRPC the share of the
 * distance from TCP to in-process that sockmap4j closes.
 *
 * <p>{@code -Dexecutor=direct} runs every gRPC server and channel with {@code directExecutor()}
 * (handlers on the event loop, no hand-off to an executor), {@code -Dexecutor=polling} sockmap4j's on a
 * {@link PollingExecutor}, {@code -Dexecutor=loops} the echo service on the loops that read its
 * calls ({@link SockmapGrpc#runOnEventLoops}); the default is gRPC's own executor.
 *
 * <p>In either {@link Topology} ({@code -Dtopology=loopback}, the default, or {@code node}: stock
 * TCP through the node's DNAT, sockmap4j's VIP translated at connect); the domain socket is a
 * path, not an address, in either.
 *
 * <p>Usage: {@code NettyGrpcBench [rounds] [round-trips-per-round]} (defaults 7 and 20000).
 */
public final class NettyGrpcBench {
    private NettyGrpcBench() {
    }

    /**
     * What carries a case: stock epoll TCP, the sockmap4j transport, a Unix domain socket, or (gRPC
     * only) gRPC's in-process transport.
     */
    enum Transport { TCP, SOCKMAP, UDS, INPROCESS }

    /** gRPC's executor profile for servers and channels: its default executor, or {@code directExecutor()}. */
    static final boolean DIRECT = "direct".equals(System.getProperty("executor", "default"));
    /**
     * {@code -Dexecutor=loops}: the echo service declared non-blocking
     * ({@link SockmapGrpc#runOnEventLoops}) on every server and the channels' callbacks on their
     * loops, the loops sleeping as gRPC's do; in-process, which has no loops, runs direct.
     */
    static final boolean LOOPS = "loops".equals(System.getProperty("executor", "default"));
    /**
     * {@code -Dexecutor=polling}: sockmap4j's servers and channels on a {@link PollingExecutor} polling
     * as long as its loops ({@code -Dpoll}), as {@code SockmapGrpc.Profile.POLLING} sets them up, and
     * in-process's (the ceiling of the same calls) on one of its own; stock epoll's and the domain
     * socket's too with {@code -DpollStock=true}.
     */
    static final boolean POLLING = "polling".equals(System.getProperty("executor", "default"));
    static final Map<Transport, PollingExecutor> EXECUTORS = new java.util.EnumMap<>(Transport.class);

    /**
     * With {@code -Dexecutor=polling}, a polling executor for sockmap4j's servers and channels and
     * for in-process's (the ceiling of the same calls runs them on the same kind of executor), and
     * with {@code stockToo} for stock epoll's and the domain socket's: one each.
     */
    static void pollingExecutors(long pollNanos, boolean stockToo) {
        if (POLLING) {
            for (Transport t : stockToo ? List.of(Transport.values()) : List.of(Transport.SOCKMAP, Transport.INPROCESS)) {
                EXECUTORS.put(t, new PollingExecutor("exec-" + t.name().toLowerCase(Locale.ROOT),
                        java.time.Duration.ofNanos(pollNanos)));
            }
        }
    }

    /** A fresh domain socket path (the socket file is removed when its server closes). */
    static io.netty.channel.unix.DomainSocketAddress domainSocket() throws IOException {
        java.nio.file.Path p = java.nio.file.Files.createTempFile("sockmap4j-bench-", ".sock");
        java.nio.file.Files.delete(p);
        return new io.netty.channel.unix.DomainSocketAddress(p.toFile());
    }

    /** What a case carries: the echo or gRPC (unary and streaming share a server's address). */
    enum Kind { ECHO, GRPC }

    /** The port of a case's server on the node (loopback servers take an ephemeral one). */
    static int port(Transport t, Kind k) {
        return 47100 + 2 * t.ordinal() + k.ordinal();
    }

    static SocketAddress bind(Topology at, Transport t, Kind k) throws IOException {
        return t == Transport.UDS ? domainSocket() : at.bind(port(t, k));
    }

    static SocketAddress dial(Topology at, Transport t, Kind k, SocketAddress bound) {
        return t == Transport.UDS ? bound : at.dial(port(t, k), (InetSocketAddress) bound);
    }

    /** {@code inner}'s channels made in pod {@code pod} on the node; a domain socket's anywhere. */
    static <C extends Channel> ChannelFactory<C> in(Topology at, int pod, Transport t, ChannelFactory<C> inner) {
        return t == Transport.UDS ? inner : at.in(pod, inner);
    }

    public static void main(String[] args) throws Exception {
        BenchRun run = BenchRun.of("NettyGrpcBench [rounds] [round-trips-per-round]", args);
        // gRPC's HTTP/2 over each transport: the co-located transport (on by default) is ColocatedGrpcBench's
        System.setProperty(io.github.sockmap4j.colocated.grpc.ColocatedGrpc.SWITCH, "false");
        int rounds = run.intArg(0, 7);
        int iterations = run.intArg(1, 20_000);
        Sockmap sockmap = Sockmap.global();
        if (!sockmap.isActive()) {
            System.err.println("The fast path is off: " + sockmap.unavailabilityCause());
            return;
        }
        int loops = Integer.getInteger("loops", 2);
        Path pins = sockmap.config().pinDirectory();
        long pollNanos = TimeUnit.MICROSECONDS.toNanos(Long.getLong("poll", 0));
        EventLoopGroup stock = new MultiThreadIoEventLoopGroup(loops, Boolean.getBoolean("pollStock")
                ? SockmapNetty.ioHandlerFactory(java.time.Duration.ofNanos(pollNanos)) : EpollIoHandler.newFactory());
        EventLoopGroup fast = new MultiThreadIoEventLoopGroup(loops,
                SockmapNetty.ioHandlerFactory(java.time.Duration.ofNanos(pollNanos)));
        java.util.function.Function<Transport, EventLoopGroup> groups = t -> t == Transport.SOCKMAP ? fast : stock;
        pollingExecutors(pollNanos, Boolean.getBoolean("pollStock"));
        try (Topology at = Topology.fromProperty(pins)) {
            for (Kind k : Kind.values()) {
                at.service(port(Transport.TCP, k), false);
                at.service(port(Transport.SOCKMAP, k), true);
            }
            BenchRun.Rounds<Transport> f = new BenchRun.Rounds<>();
            long[][] carried = new long[Transport.values().length][2];
            // Discarded passes for the JIT: with the transports alternating, C2 still spent 14-86 us
            // a call compiling after one short pass (GrpcHandoffs' per-thread CPU), in the measured rounds.
            for (int w = 0; w < Integer.getInteger("warmups", 3); w++) {
                for (Transport t : Transport.values()) {
                    if (t != Transport.INPROCESS) {
                        echo(groups.apply(t), at, t, iterations / 10);
                    }
                    unary(groups.apply(t), at, t, iterations / 4);
                    streamGbps(groups.apply(t), at, t);
                }
            }
            for (int r = 0; r < rounds; r++) {
                for (Transport t : Transport.values()) {
                    SockmapStats before = SockmapAdmin.of(pins).stats();
                    if (t != Transport.INPROCESS) {
                        long cpu0 = PingPong.processCpuNanos();
                        Histogram e = echo(groups.apply(t), at, t, iterations);
                        f.put(t, "echo cpu", (PingPong.processCpuNanos() - cpu0) / (double) iterations);
                        percentiles(f, t, "echo", e);
                    }
                    long cpu1 = PingPong.processCpuNanos();
                    Histogram u = unary(groups.apply(t), at, t, iterations / 4);
                    f.put(t, "unary cpu", (PingPong.processCpuNanos() - cpu1) / (double) (iterations / 4));
                    percentiles(f, t, "unary", u);
                    f.put(t, "stream", streamGbps(groups.apply(t), at, t));
                    SockmapStats after = SockmapAdmin.of(pins).stats();
                    carried[t.ordinal()][0] += after.messagesRedirected() - before.messagesRedirected();
                    carried[t.ordinal()][1] += after.messagesPassed() - before.messagesPassed();
                }
            }
            BenchRun.header(String.format(Locale.ROOT, "sockmap4j Netty/gRPC benchmark, topology %s, gRPC executor %s: "
                    + "%d rounds, %d echo and %d unary round trips a round, %d x 64 KiB streamed a round, %d event "
                    + "loop(s) per transport, sockmap4j's polling up to %d us%s", at.name(), DIRECT ? "direct" : POLLING ? "polling" : "default",
                    rounds, iterations, iterations / 4, BenchEchoService.STREAM_MESSAGES, loops, pollNanos / 1000,
                    Boolean.getBoolean("pollStock") ? " (stock epoll's too)" : ""));
            if (at.isNode()) {
                System.out.println(at.describe() + "; the domain socket is a path, in-process is one JVM, in either "
                        + "topology");
            }
            BenchRun.Table table = new BenchRun.Table(1, "measure", "stock epoll", "sockmap4j", "UDS", "in-process",
                    "vs TCP", "vs UDS", "gap closed");
            row(table, f, "Netty echo 64 B p50 (us)", "echo p50", 1000);
            row(table, f, "Netty echo 64 B p99 (us)", "echo p99", 1000);
            row(table, f, "Netty echo 64 B p99.9 (us)", "echo p99.9", 1000);
            row(table, f, "Netty echo CPU (us/op)", "echo cpu", 1000);
            row(table, f, "gRPC unary 1 KiB p50 (us)", "unary p50", 1000);
            row(table, f, "gRPC unary 1 KiB p99 (us)", "unary p99", 1000);
            row(table, f, "gRPC unary 1 KiB p99.9 (us)", "unary p99.9", 1000);
            row(table, f, "gRPC unary CPU (us/op)", "unary cpu", 1000);
            row(table, f, "gRPC stream 64 KiB (GB/s)", "stream", 1);
            table.print();
            for (Transport t : Transport.values()) {
                System.out.printf(Locale.ROOT, "%s: %d messages redirected, %d sent by TCP by registered sockets%n", t,
                        carried[t.ordinal()][0], carried[t.ordinal()][1]);
            }
            EXECUTORS.forEach((t, e) -> System.out.printf(Locale.ROOT, "%s's executor: %d tasks found while polling, "
                    + "%d sleeps, %d threads%n", t, e.pollHits(), e.sleeps(), e.threads()));
            System.out.println("medians over rounds; vs TCP = sockmap4j / stock epoll TCP, vs UDS = sockmap4j / stock "
                    + "epoll over a Unix domain socket (lower is faster for times); gap closed = (TCP - sockmap4j) / "
                    + "(TCP - in-process): the share of the distance from TCP to no socket at all; CPU: this "
                    + "process's CPU time (both ends) per round trip");
        } finally {
            SockmapNetty.shutdown(java.time.Duration.ofSeconds(10), stock, fast);
        }
    }

    static void percentiles(BenchRun.Rounds<Transport> f, Transport t, String what, Histogram h) {
        f.put(t, what + " p50", h.getValueAtPercentile(50));
        f.put(t, what + " p99", h.getValueAtPercentile(99));
        f.put(t, what + " p99.9", h.getValueAtPercentile(99.9));
    }

    /** One measure's medians per transport, its ratios, and (where in-process ran) the share of the gap closed. */
    static void row(BenchRun.Table table, BenchRun.Rounds<Transport> f, String name, String metric, double scale) {
        double tcp = f.median(Transport.TCP, metric) / scale;
        double fast = f.median(Transport.SOCKMAP, metric) / scale;
        double uds = f.median(Transport.UDS, metric) / scale;
        boolean inProcess = f.has(Transport.INPROCESS, metric);
        double ip = inProcess ? f.median(Transport.INPROCESS, metric) / scale : Double.NaN;
        table.row(name, fmt(tcp), fmt(fast), fmt(uds), inProcess ? fmt(ip) : "-", BenchRun.ratio(fast, tcp),
                BenchRun.ratio(fast, uds), inProcess && tcp != ip
                        ? String.format(Locale.ROOT, "%.0f%%", 100 * (tcp - fast) / (tcp - ip)) : "-");
    }

    private static String fmt(double v) {
        return v < 10 ? String.format(Locale.ROOT, "%.2f", v) : BenchRun.fmt(v);
    }

    static Histogram echo(EventLoopGroup group, Topology at, Transport t, int iterations) throws Exception {
        ServerBootstrap sb = new ServerBootstrap().group(group)
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        ch.pipeline().addLast(new SimpleChannelInboundHandler<ByteBuf>() {
                            @Override
                            protected void channelRead0(ChannelHandlerContext ctx, ByteBuf msg) {
                                ctx.writeAndFlush(msg.retain());
                            }
                        });
                    }
                });
        sb.channelFactory(in(at, 1, t, serverChannels(t)));
        if (t != Transport.UDS) {
            sb.option(ChannelOption.SO_REUSEADDR, true).childOption(ChannelOption.TCP_NODELAY, true);
        }
        Channel server = sb.bind(bind(at, t, Kind.ECHO)).sync().channel();
        // Ping-pong driven from the client's event loop: each echo sends the next message.
        Histogram h = new Histogram(TimeUnit.SECONDS.toNanos(10), 3);
        java.util.concurrent.CompletableFuture<Void> done = new java.util.concurrent.CompletableFuture<>();
        byte[] msg = new byte[64];
        Bootstrap b = new Bootstrap().group(group)
                .handler(new SimpleChannelInboundHandler<ByteBuf>() {
                    int pending;
                    int count;
                    long t0;

                    @Override
                    public void channelActive(ChannelHandlerContext ctx) {
                        t0 = System.nanoTime();
                        ctx.writeAndFlush(Unpooled.wrappedBuffer(msg));
                    }

                    @Override
                    protected void channelRead0(ChannelHandlerContext ctx, ByteBuf in) {
                        pending += in.readableBytes();
                        if (pending < 64) {
                            return;
                        }
                        pending -= 64;
                        long now = System.nanoTime();
                        h.recordValue(Math.min(now - t0, h.getHighestTrackableValue()));
                        if (++count == iterations) {
                            done.complete(null);
                            return;
                        }
                        t0 = System.nanoTime();
                        ctx.writeAndFlush(Unpooled.wrappedBuffer(msg));
                    }
                });
        b.channelFactory(in(at, 0, t, clientChannels(t)));
        if (t != Transport.UDS) {
            b.option(ChannelOption.TCP_NODELAY, true);
        }
        Channel client = b.connect(dial(at, t, Kind.ECHO, server.localAddress())).sync().channel();
        try {
            done.get(120, TimeUnit.SECONDS);
            return h;
        } finally {
            client.close().sync();
            server.close().sync();
        }
    }

    record Grpc(Server server, ManagedChannel channel) implements AutoCloseable {
        @Override
        public void close() {
            try {
                channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
                server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** The server channels of {@code t}: sockmap4j's factory, or stock epoll's TCP or domain socket. */
    static ChannelFactory<? extends ServerChannel> serverChannels(Transport t) {
        return switch (t) {
            case SOCKMAP -> SockmapNetty.serverChannelFactory();
            case TCP -> EpollServerSocketChannel::new;
            case UDS -> io.netty.channel.epoll.EpollServerDomainSocketChannel::new;
            case INPROCESS -> throw new IllegalArgumentException("in-process has no channels");
        };
    }

    /** The client channels of {@code t}. */
    static ChannelFactory<? extends Channel> clientChannels(Transport t) {
        return switch (t) {
            case SOCKMAP -> SockmapNetty.socketChannelFactory();
            case TCP -> EpollSocketChannel::new;
            case UDS -> io.netty.channel.epoll.EpollDomainSocketChannel::new;
            case INPROCESS -> throw new IllegalArgumentException("in-process has no channels");
        };
    }

    /**
     * A gRPC server and a channel to it over {@code t}; sockmap4j's as {@link SockmapGrpc#configure}
     * sets them up, with its channel factories made in the pods on the node.
     */
    static Grpc grpc(EventLoopGroup group, Topology at, Transport t) throws IOException {
        if (t == Transport.INPROCESS) {
            String name = "sockmap4j-bench-" + System.nanoTime();
            InProcessServerBuilder ib = InProcessServerBuilder.forName(name).addService(BenchEchoService.service());
            InProcessChannelBuilder ic = InProcessChannelBuilder.forName(name);
            if (DIRECT || LOOPS) {
                ib.directExecutor();
                ic.directExecutor();
            } else if (EXECUTORS.containsKey(t)) {
                ib.executor(EXECUTORS.get(t));
                ic.executor(EXECUTORS.get(t));
            }
            return new Grpc(ib.build().start(), ic.build());
        }
        NettyServerBuilder sb = NettyServerBuilder.forAddress(bind(at, t, Kind.GRPC)).addService(BenchEchoService.service());
        if (t == Transport.SOCKMAP) {
            SockmapGrpc.configure(sb, group, group);
        } else {
            sb.bossEventLoopGroup(group).workerEventLoopGroup(group);
        }
        sb.channelFactory(in(at, 1, t, serverChannels(t)));
        if (t != Transport.UDS) {
            sb.withOption(ChannelOption.SO_REUSEADDR, true);
        }
        if (DIRECT) {
            sb.directExecutor();
        } else if (LOOPS) {
            SockmapGrpc.runOnEventLoops(sb, java.util.List.of(BenchEchoService.SERVICE));
        } else if (EXECUTORS.containsKey(t)) {
            sb.executor(EXECUTORS.get(t));
        }
        Server server = sb.build().start();
        SocketAddress bound = server.getListenSockets().getFirst();
        SocketAddress dial = dial(at, t, Kind.GRPC, bound);
        NettyChannelBuilder cb = (dial instanceof InetSocketAddress inet
                ? NettyChannelBuilder.forAddress(inet.getHostString(), inet.getPort())
                : NettyChannelBuilder.forAddress(dial)).usePlaintext();
        if (t == Transport.SOCKMAP) {
            SockmapGrpc.configure(cb, group);
        } else {
            cb.eventLoopGroup(group);
        }
        cb.channelFactory(in(at, 0, t, clientChannels(t)));
        if (DIRECT) {
            cb.directExecutor();
        } else if (LOOPS) {
            SockmapGrpc.runOnEventLoops(cb);
        } else if (EXECUTORS.containsKey(t)) {
            cb.executor(EXECUTORS.get(t));
        }
        return new Grpc(server, cb.build());
    }

    static Histogram unary(EventLoopGroup group, Topology at, Transport t, int iterations) throws Exception {
        try (Grpc g = grpc(group, at, t)) {
            Histogram h = new Histogram(TimeUnit.SECONDS.toNanos(10), 3);
            byte[] req = new byte[1024];
            for (int i = 0; i < iterations; i++) {
                long t0 = System.nanoTime();
                ClientCalls.blockingUnaryCall(g.channel(), BenchEchoService.UNARY, CallOptions.DEFAULT, req);
                h.recordValue(Math.min(System.nanoTime() - t0, h.getHighestTrackableValue()));
            }
            return h;
        }
    }

    static double streamGbps(EventLoopGroup group, Topology at, Transport t) throws Exception {
        try (Grpc g = grpc(group, at, t)) {
            long t0 = System.nanoTime();
            long bytes = 0;
            Iterator<byte[]> it = ClientCalls.blockingServerStreamingCall(g.channel(), BenchEchoService.STREAM, CallOptions.DEFAULT,
                    new byte[1]);
            while (it.hasNext()) {
                bytes += it.next().length;
            }
            return bytes / ((System.nanoTime() - t0) / 1e9) / 1e9;
        }
    }
}
