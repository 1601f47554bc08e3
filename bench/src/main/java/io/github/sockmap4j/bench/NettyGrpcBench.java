package io.github.sockmap4j.bench;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.netty.SockmapNetty;
import io.github.sockmap4j.netty.grpc.SockmapGrpc;
import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerServiceDefinition;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ServerCalls;
import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.socket.SocketChannel;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.Iterator;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import org.HdrHistogram.Histogram;

/**
 * Netty and gRPC over the fast path against stock Netty epoll and stock grpc-netty (epoll) over
 * TCP, and against the same over a Unix domain socket (Netty's epoll domain socket channels: the
 * usual answer when both ends are yours and on one host), interleaved rounds in one run: Netty
 * echo RTT of 64 B, gRPC unary RTT of 1 KiB, gRPC server streaming throughput of 64 KiB
 * messages. Prints medians over rounds and ratios to stock TCP and to the domain socket.
 *
 * <p>Usage: {@code NettyGrpcBench [rounds] [round-trips-per-round]} (defaults 7 and 20000).
 */
public final class NettyGrpcBench {
    private NettyGrpcBench() {
    }

    /** What carries a case: stock epoll TCP, the sockmap4j transport, or a Unix domain socket. */
    enum Transport { TCP, SOCKMAP, UDS }

    /** A fresh domain socket path (the socket file is removed when its server closes). */
    static io.netty.channel.unix.DomainSocketAddress domainSocket() throws IOException {
        java.nio.file.Path p = java.nio.file.Files.createTempFile("sockmap4j-bench-", ".sock");
        java.nio.file.Files.delete(p);
        return new io.netty.channel.unix.DomainSocketAddress(p.toFile());
    }

    static final MethodDescriptor.Marshaller<byte[]> BYTES = SockmapGrpc.bytesMarshaller();
    static final MethodDescriptor<byte[], byte[]> UNARY = MethodDescriptor.<byte[], byte[]>newBuilder()
            .setType(MethodDescriptor.MethodType.UNARY).setFullMethodName("bench.Echo/Unary")
            .setRequestMarshaller(BYTES).setResponseMarshaller(BYTES).build();
    static final MethodDescriptor<byte[], byte[]> STREAM = MethodDescriptor.<byte[], byte[]>newBuilder()
            .setType(MethodDescriptor.MethodType.SERVER_STREAMING).setFullMethodName("bench.Echo/Stream")
            .setRequestMarshaller(BYTES).setResponseMarshaller(BYTES).build();
    static final int STREAM_MESSAGES = 4096;
    static final byte[] STREAM_MESSAGE = new byte[64 << 10];

    static ServerServiceDefinition service() {
        return ServerServiceDefinition.builder("bench.Echo")
                .addMethod(UNARY, ServerCalls.asyncUnaryCall((req, out) -> {
                    out.onNext(req);
                    out.onCompleted();
                }))
                .addMethod(STREAM, ServerCalls.asyncServerStreamingCall((req, out) -> {
                    for (int i = 0; i < STREAM_MESSAGES; i++) {
                        out.onNext(STREAM_MESSAGE);
                    }
                    out.onCompleted();
                }))
                .build();
    }

    public static void main(String[] args) throws Exception {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 7;
        int iterations = args.length > 1 ? Integer.parseInt(args[1]) : 20_000;
        Sockmap sockmap = Sockmap.global();
        if (!sockmap.isActive()) {
            System.err.println("The fast path is off: " + sockmap.unavailabilityCause());
            return;
        }
        int loops = Integer.getInteger("loops", 2);
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(loops, EpollIoHandler.newFactory());
        try {
            int n = Transport.values().length;
            long[][] echo50 = new long[n][rounds];
            long[][] echo99 = new long[n][rounds];
            long[][] unary50 = new long[n][rounds];
            long[][] unary99 = new long[n][rounds];
            long[][] echo999 = new long[n][rounds];
            long[][] unary999 = new long[n][rounds];
            long[][] echoCpu = new long[n][rounds];
            long[][] unaryCpu = new long[n][rounds];
            double[][] stream = new double[n][rounds];
            for (Transport t : Transport.values()) { // a discarded pass for the JIT
                echo(group, t, iterations / 10);
                unary(group, t, iterations / 20);
            }
            for (int r = 0; r < rounds; r++) {
                for (Transport t : Transport.values()) {
                    int fast = t.ordinal();
                    long cpu0 = PingPong.processCpuNanos();
                    Histogram e = echo(group, t, iterations);
                    long cpu1 = PingPong.processCpuNanos();
                    echo50[fast][r] = e.getValueAtPercentile(50);
                    echo99[fast][r] = e.getValueAtPercentile(99);
                    echo999[fast][r] = e.getValueAtPercentile(99.9);
                    echoCpu[fast][r] = (cpu1 - cpu0) / iterations;
                    Histogram u = unary(group, t, iterations / 4);
                    unaryCpu[fast][r] = (PingPong.processCpuNanos() - cpu1) / (iterations / 4);
                    unary50[fast][r] = u.getValueAtPercentile(50);
                    unary99[fast][r] = u.getValueAtPercentile(99);
                    unary999[fast][r] = u.getValueAtPercentile(99.9);
                    stream[fast][r] = streamGbps(group, t);
                }
            }
            System.out.printf(Locale.ROOT, "sockmap4j Netty/gRPC benchmark: %d rounds, %d echo and %d unary round trips "
                    + "a round, %d x 64 KiB streamed a round, %d event loop(s), %d CPUs, kernel %s%n", rounds, iterations,
                    iterations / 4, STREAM_MESSAGES, loops, Runtime.getRuntime().availableProcessors(), System.getProperty("os.version"));
            System.out.printf(Locale.ROOT, "%-28s %12s %12s %12s %8s %8s%n", "measure", "stock epoll", "sockmap4j",
                    "UDS", "vs TCP", "vs UDS");
            row("Netty echo 64 B p50 (us)", echo50, 1000);
            row("Netty echo 64 B p99 (us)", echo99, 1000);
            row("Netty echo 64 B p99.9 (us)", echo999, 1000);
            row("Netty echo CPU (us/op)", echoCpu, 1000);
            row("gRPC unary 1 KiB p50 (us)", unary50, 1000);
            row("gRPC unary 1 KiB p99 (us)", unary99, 1000);
            row("gRPC unary 1 KiB p99.9 (us)", unary999, 1000);
            row("gRPC unary CPU (us/op)", unaryCpu, 1000);
            row("gRPC stream 64 KiB (GB/s)", Medians.of(stream[0]), Medians.of(stream[1]), Medians.of(stream[2]));
            System.out.println("medians over rounds; vs TCP = sockmap4j / stock epoll TCP, vs UDS = sockmap4j / stock "
                    + "epoll over a Unix domain socket (lower is faster for times); CPU: this process's CPU time (both "
                    + "ends) per round trip");
        } finally {
            SockmapNetty.shutdown(java.time.Duration.ofSeconds(10), group);
        }
    }

    static void row(String name, long[][] v, double scale) {
        row(name, Medians.of(v[0]) / scale, Medians.of(v[1]) / scale, Medians.of(v[2]) / scale);
    }

    static void row(String name, double stock, double fast, double uds) {
        System.out.printf(Locale.ROOT, "%-28s %12.1f %12.1f %12.1f %8.2f %8.2f%n", name, stock, fast, uds, fast / stock,
                fast / uds);
    }


    static Histogram echo(EventLoopGroup group, Transport t, int iterations) throws Exception {
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
        switch (t) {
            case SOCKMAP -> sb.channelFactory(SockmapNetty.serverChannelFactory());
            case TCP -> sb.channel(EpollServerSocketChannel.class);
            case UDS -> sb.channel(io.netty.channel.epoll.EpollServerDomainSocketChannel.class);
        }
        if (t != Transport.UDS) {
            sb.childOption(ChannelOption.TCP_NODELAY, true);
        }
        Channel server = sb.bind(t == Transport.UDS ? domainSocket()
                : new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0)).sync().channel();
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
        switch (t) {
            case SOCKMAP -> b.channelFactory(SockmapNetty.socketChannelFactory());
            case TCP -> b.channel(EpollSocketChannel.class);
            case UDS -> b.channel(io.netty.channel.epoll.EpollDomainSocketChannel.class);
        }
        if (t != Transport.UDS) {
            b.option(ChannelOption.TCP_NODELAY, true);
        }
        Channel client = b.connect(server.localAddress()).sync().channel();
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

    static Grpc grpc(EventLoopGroup group, Transport t) throws IOException {
        java.net.SocketAddress at = t == Transport.UDS ? domainSocket()
                : new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0);
        NettyServerBuilder sb = NettyServerBuilder.forAddress(at).addService(service());
        switch (t) {
            case SOCKMAP -> SockmapGrpc.configure(sb, group, group);
            case TCP -> sb.channelType(EpollServerSocketChannel.class).bossEventLoopGroup(group).workerEventLoopGroup(group);
            case UDS -> sb.channelType(io.netty.channel.epoll.EpollServerDomainSocketChannel.class)
                    .bossEventLoopGroup(group).workerEventLoopGroup(group);
        }
        Server server = sb.build().start();
        NettyChannelBuilder cb = (t == Transport.UDS ? NettyChannelBuilder.forAddress(at)
                : NettyChannelBuilder.forAddress("127.0.0.1", server.getPort())).usePlaintext();
        switch (t) {
            case SOCKMAP -> SockmapGrpc.configure(cb, group);
            case TCP -> cb.channelType(EpollSocketChannel.class).eventLoopGroup(group);
            case UDS -> cb.channelType(io.netty.channel.epoll.EpollDomainSocketChannel.class).eventLoopGroup(group);
        }
        return new Grpc(server, cb.build());
    }

    static Histogram unary(EventLoopGroup group, Transport t, int iterations) throws Exception {
        try (Grpc g = grpc(group, t)) {
            Histogram h = new Histogram(TimeUnit.SECONDS.toNanos(10), 3);
            byte[] req = new byte[1024];
            for (int i = 0; i < iterations; i++) {
                long t0 = System.nanoTime();
                ClientCalls.blockingUnaryCall(g.channel(), UNARY, CallOptions.DEFAULT, req);
                h.recordValue(Math.min(System.nanoTime() - t0, h.getHighestTrackableValue()));
            }
            return h;
        }
    }

    static double streamGbps(EventLoopGroup group, Transport t) throws Exception {
        try (Grpc g = grpc(group, t)) {
            long t0 = System.nanoTime();
            long bytes = 0;
            Iterator<byte[]> it = ClientCalls.blockingServerStreamingCall(g.channel(), STREAM, CallOptions.DEFAULT,
                    new byte[1]);
            while (it.hasNext()) {
                bytes += it.next().length;
            }
            return bytes / ((System.nanoTime() - t0) / 1e9) / 1e9;
        }
    }
}
