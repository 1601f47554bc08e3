package io.github.sockmap4j.netty.grpc;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.colocated.grpc.ColocatedGrpc;
import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ServerCalls;
import io.grpc.stub.StreamObserver;
import io.netty.channel.EventLoop;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A channel's co-located connection read on the epoll event loop of the TCP connection it was
 * agreed over (no root: the agreement and the rings need none): its replies' callbacks run on that
 * loop, with no reader thread of its own; an NIO loop, which cannot watch a bell, leaves the
 * reading to a thread; the loop's group shut down under an open connection ends it, its calls
 * failing UNAVAILABLE, and leaves nothing.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ColocatedOnEventLoopTest {
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
    private static final MethodDescriptor<byte[], byte[]> ECHO = MethodDescriptor.<byte[], byte[]>newBuilder()
            .setType(MethodDescriptor.MethodType.UNARY).setFullMethodName("test.Loop/Echo")
            .setRequestMarshaller(BYTES).setResponseMarshaller(BYTES).build();
    private final List<AutoCloseable> cleanup = new ArrayList<>();
    private final AtomicInteger colocated = new AtomicInteger();

    @AfterEach
    void tearDown() throws Exception {
        for (int i = cleanup.size() - 1; i >= 0; i--) {
            cleanup.get(i).close();
        }
        // Readers end and regions are let go after the channel and the server terminate, not with them (a
        // connection read on a loop gives its region back once its bell is out of the loop's set): both
        // are looked for until gone, 20 s at most.
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while ((!readers().isEmpty() || !regions().isEmpty()) && System.nanoTime() < deadline) {
            Thread.sleep(5);
        }
        assertEquals(List.of(), readers(), "no co-located reader thread left");
        assertEquals(List.of(), regions(), "no region left mapped");
    }

    /** The co-located connections' reader threads of this process. */
    private static List<String> readers() {
        return Thread.getAllStackTraces().keySet().stream().map(Thread::getName)
                .filter(n -> n.startsWith("sockmap4j-colocated-") && !n.equals("sockmap4j-colocated-handover")
                        && !n.equals("sockmap4j-colocated-agree")).toList();
    }

    /** This process's mappings of co-located gRPC regions. */
    private static List<String> regions() throws IOException {
        return java.nio.file.Files.readAllLines(java.nio.file.Path.of("/proc/self/maps")).stream()
                .filter(l -> l.contains("memfd:sm4j-grpc")).toList();
    }

    private EventLoopGroup group(io.netty.channel.IoHandlerFactory io, String name) {
        EventLoopGroup g = new MultiThreadIoEventLoopGroup(1, new io.netty.util.concurrent.DefaultThreadFactory(name, true), io);
        cleanup.add(() -> g.shutdownGracefully(0, 1, TimeUnit.SECONDS).await(10, TimeUnit.SECONDS));
        return g;
    }

    private Server server() throws IOException {
        return server(false);
    }

    /** Threads that ran the server's handler. */
    private final java.util.Set<String> handlers = java.util.concurrent.ConcurrentHashMap.newKeySet();

    /**
     * An echo server on an epoll loop of its own; {@code onLoops}: as {@code SockmapGrpc} makes one
     * with the switch on, its co-located connections read on its loop, its handlers direct.
     */
    private Server server(boolean onLoops) throws IOException {
        EventLoopGroup g = group(EpollIoHandler.newFactory(), "server-loop");
        ServerServiceDefinition echo = ServerServiceDefinition.builder("test.Loop")
                .addMethod(ECHO, ServerCalls.asyncUnaryCall((byte[] req, StreamObserver<byte[]> out) -> {
                    handlers.add(Thread.currentThread().getName());
                    out.onNext(req);
                    out.onCompleted();
                })).build();
        ServerInterceptor counting = new ServerInterceptor() {
            @Override
            public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
                                                              ServerCallHandler<Q, R> next) {
                if (Boolean.TRUE.equals(call.getAttributes().get(ColocatedGrpc.TRANSPORT_ATTR_COLOCATED))) {
                    colocated.incrementAndGet();
                }
                return next.startCall(call, headers);
            }
        };
        NettyServerBuilder b = NettyServerBuilder.forAddress(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0))
                .bossEventLoopGroup(g).workerEventLoopGroup(g);
        if (onLoops) {
            ServerLifelines lifelines = new ServerLifelines(EpollServerSocketChannel::new);
            ColocatedGrpc.configure(b.channelFactory(lifelines), lifelines).directExecutor();
        } else {
            ColocatedGrpc.configure(b.channelType(EpollServerSocketChannel.class));
        }
        Server s = b.addService(echo).intercept(counting).build().start();
        cleanup.add(() -> {
            s.shutdownNow();
            assertTrue(s.awaitTermination(10, TimeUnit.SECONDS), "the server terminates");
        });
        return s;
    }

    /** A channel as {@code SockmapGrpc} makes one with the switch on, over {@code loop}, its callbacks direct. */
    private ManagedChannel channel(Server s, EventLoop loop, io.netty.channel.ChannelFactory<SocketChannel> sockets) {
        TcpLifelines lifelines = new TcpLifelines(sockets);
        ManagedChannel ch = ColocatedGrpc.configure(NettyChannelBuilder.forAddress("127.0.0.1", s.getPort())
                .eventLoopGroup(loop).channelFactory(lifelines), lifelines).usePlaintext().directExecutor().build();
        cleanup.add(() -> {
            ch.shutdownNow();
            assertTrue(ch.awaitTermination(10, TimeUnit.SECONDS), "the channel terminates");
        });
        return ch;
    }

    private static byte[] call(ManagedChannel ch, byte[] m) {
        return ClientCalls.blockingUnaryCall(ch, ECHO, CallOptions.DEFAULT.withDeadlineAfter(10, TimeUnit.SECONDS), m);
    }

    /** Calls until one goes co-located (each a real call, 20 s of them at most). */
    private void callUntilColocated(ManagedChannel ch) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (colocated.get() == 0) {
            assertTrue(System.nanoTime() < deadline, "no call went co-located; fallbacks " + ColocatedGrpc.fallbacks());
            assertArrayEquals(new byte[] {1, 2}, call(ch, new byte[] {1, 2}));
        }
    }

    /** The thread that ran an asynchronous call's reply callback. */
    private static String replyThread(ManagedChannel ch) throws Exception {
        CompletableFuture<String> where = new CompletableFuture<>();
        ClientCalls.asyncUnaryCall(ch.newCall(ECHO, CallOptions.DEFAULT.withDeadlineAfter(10, TimeUnit.SECONDS)),
                new byte[] {3}, new StreamObserver<>() {
                    @Override
                    public void onNext(byte[] value) {
                        where.complete(Thread.currentThread().getName());
                    }

                    @Override
                    public void onError(Throwable t) {
                        where.completeExceptionally(t);
                    }

                    @Override
                    public void onCompleted() {
                    }
                });
        return where.get(10, TimeUnit.SECONDS);
    }

    @Test
    void anEpollChannelsRepliesAreReadOnItsEventLoop() throws Exception {
        Server s = server();
        EventLoop loop = group(EpollIoHandler.newFactory(), "client-loop").next();
        String loopThread = loop.submit(() -> Thread.currentThread().getName()).get(10, TimeUnit.SECONDS);
        ManagedChannel ch = channel(s, loop, EpollSocketChannel::new);
        callUntilColocated(ch);
        for (int i = 0; i < 50; i++) {
            assertEquals(loopThread, replyThread(ch), "the reply's callback ran on the channel's event loop");
        }
        byte[] large = new byte[300_000];
        new java.util.Random(3).nextBytes(large);
        assertArrayEquals(large, call(ch, large), "a message over several frames");
        assertTrue(readers().stream().noneMatch(n -> n.contains("127.0.0.1:" + s.getPort())),
                "the channel's end has no reader thread: " + readers());
    }

    @Test
    void aServersEndIsReadOnTheEventLoopOfItsConnection() throws Exception {
        Server s = server(true);
        EventLoop loop = group(EpollIoHandler.newFactory(), "client-loop").next();
        ManagedChannel ch = channel(s, loop, EpollSocketChannel::new);
        callUntilColocated(ch);
        handlers.clear();
        for (int i = 0; i < 20; i++) {
            assertArrayEquals(new byte[] {4, 5}, call(ch, new byte[] {4, 5}));
        }
        assertEquals(1, handlers.size(), "one thread ran the handler: " + handlers);
        assertTrue(handlers.iterator().next().startsWith("server-loop-"), "the server's event loop ran it: " + handlers);
        assertEquals(List.of(), readers(), "neither end has a reader thread");
        byte[] large = new byte[300_000];
        new java.util.Random(5).nextBytes(large);
        assertArrayEquals(large, call(ch, large), "a message over several frames");
    }

    @Test
    void anNioChannelsRepliesAreReadByAThreadOfTheirOwn() throws Exception {
        Server s = server();
        EventLoop loop = group(NioIoHandler.newFactory(), "nio-loop").next();
        ManagedChannel ch = channel(s, loop, NioSocketChannel::new);
        callUntilColocated(ch);
        assertTrue(replyThread(ch).startsWith("sockmap4j-colocated-"), "a reader thread reads what an NIO loop cannot");
    }

    @Test
    void theLoopsGroupShutDownEndsTheConnectionAndLeavesNothing() throws Exception {
        Server s = server();
        EventLoopGroup g = new MultiThreadIoEventLoopGroup(1, new io.netty.util.concurrent.DefaultThreadFactory("doomed", true),
                EpollIoHandler.newFactory());
        ManagedChannel ch = channel(s, g.next(), EpollSocketChannel::new);
        callUntilColocated(ch);
        assertEquals(1, regions().size() / 2, "the two ends map the region: " + regions());
        assertTrue(g.shutdownGracefully(0, 1, TimeUnit.SECONDS).await(10, TimeUnit.SECONDS), "the group ended");
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!regions().isEmpty() && System.nanoTime() < deadline) {
            Thread.sleep(5);
        }
        assertEquals(List.of(), regions(), "both ends unmapped the region once the loop that read one ended");
    }
}
