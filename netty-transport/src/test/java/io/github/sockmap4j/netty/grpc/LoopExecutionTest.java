package io.github.sockmap4j.netty.grpc;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerServiceDefinition;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ServerCalls;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.util.concurrent.EventExecutor;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link SockmapGrpc#runOnEventLoops}: which calls run on the loop that read them and which on the
 * pool, on a stock NIO server (no fast path, no root: the split is gRPC's and Netty's alone).
 * The server has one event loop, so a call that held it would stall every other.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class LoopExecutionTest {
    static final MethodDescriptor<byte[], byte[]> ECHO = GrpcFastPathTest.method("Unary", MethodDescriptor.MethodType.UNARY);
    static final MethodDescriptor<byte[], byte[]> WAIT = MethodDescriptor.<byte[], byte[]>newBuilder()
            .setType(MethodDescriptor.MethodType.UNARY).setFullMethodName("sockmap4j.Blocking/Wait")
            .setRequestMarshaller(SockmapGrpc.bytesMarshaller()).setResponseMarshaller(SockmapGrpc.bytesMarshaller()).build();
    static final MethodDescriptor<byte[], byte[]> COMPUTE = MethodDescriptor.<byte[], byte[]>newBuilder()
            .setType(MethodDescriptor.MethodType.UNARY).setFullMethodName("sockmap4j.Slow/Compute")
            .setRequestMarshaller(SockmapGrpc.bytesMarshaller()).setResponseMarshaller(SockmapGrpc.bytesMarshaller()).build();

    final EventLoopGroup serverLoop = new MultiThreadIoEventLoopGroup(1, NioIoHandler.newFactory());
    final EventLoopGroup clientLoops = new MultiThreadIoEventLoopGroup(2, NioIoHandler.newFactory());
    final List<AutoCloseable> closers = new ArrayList<>();
    /** Where each call of the echo service ran: true on the server's loop. */
    final Set<String> echoThreads = ConcurrentHashMap.newKeySet();
    final CountDownLatch waiting = new CountDownLatch(1);
    final CountDownLatch release = new CountDownLatch(1);

    ServerServiceDefinition echo() {
        return ServerServiceDefinition.builder("sockmap4j.Echo").addMethod(ECHO, ServerCalls.asyncUnaryCall((req, out) -> {
            echoThreads.add(Thread.currentThread().getName() + (inLoop(serverLoop) ? " (loop)" : " (not a loop)"));
            out.onNext(req);
            out.onCompleted();
        })).build();
    }

    /** A service that blocks until the test releases it, then answers with its thread's name. */
    ServerServiceDefinition blocking() {
        return ServerServiceDefinition.builder("sockmap4j.Blocking").addMethod(WAIT, ServerCalls.asyncUnaryCall((req, out) -> {
            waiting.countDown();
            try {
                if (!release.await(30, TimeUnit.SECONDS)) {
                    throw new IllegalStateException("never released");
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            out.onNext(Thread.currentThread().getName().getBytes(StandardCharsets.UTF_8));
            out.onCompleted();
        })).build();
    }

    /** A service declared non-blocking whose handler holds its loop for 60 ms (work it should not do there). */
    static ServerServiceDefinition slow() {
        return ServerServiceDefinition.builder("sockmap4j.Slow").addMethod(COMPUTE, ServerCalls.asyncUnaryCall((req, out) -> {
            long end = System.nanoTime() + 60_000_000L;
            long spins = 0;
            while (System.nanoTime() < end) {
                spins++;
            }
            out.onNext(Long.toString(spins).getBytes(StandardCharsets.US_ASCII));
            out.onCompleted();
        })).build();
    }

    static boolean inLoop(EventLoopGroup group) {
        for (EventExecutor e : group) {
            if (e.inEventLoop()) {
                return true;
            }
        }
        return false;
    }

    Server server(LoopExecution where) throws Exception {
        NettyServerBuilder b = NettyServerBuilder.forAddress(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0))
                .channelType(NioServerSocketChannel.class).bossEventLoopGroup(serverLoop).workerEventLoopGroup(serverLoop)
                .addService(echo()).addService(blocking()).addService(slow());
        Server s = SockmapGrpc.runOnEventLoops(b, where).build().start();
        closers.add(() -> s.shutdownNow().awaitTermination(10, TimeUnit.SECONDS));
        return s;
    }

    ManagedChannel channel(Server s) {
        ManagedChannel ch = SockmapGrpc.runOnEventLoops(NettyChannelBuilder.forAddress(
                new InetSocketAddress(InetAddress.getLoopbackAddress(), s.getPort())))
                .channelType(NioSocketChannel.class).eventLoopGroup(clientLoops).usePlaintext().build();
        closers.add(() -> ch.shutdownNow().awaitTermination(10, TimeUnit.SECONDS));
        return ch;
    }

    @AfterEach
    void close() throws Exception {
        release.countDown();
        for (AutoCloseable c : closers.reversed()) {
            c.close();
        }
        serverLoop.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        clientLoops.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
    }

    @Test
    void aNonBlockingServiceRunsOnItsLoopWhileABlockingOneWaitsOnThePool() throws Exception {
        ManagedChannel ch = channel(server(new LoopExecution(Set.of("sockmap4j.Echo", "sockmap4j.Slow"),
                SockmapGrpc.blockingPool(), Duration.ofSeconds(10))));
        CompletableFuture<byte[]> blocked = new CompletableFuture<>();
        ClientCalls.asyncUnaryCall(ch.newCall(WAIT, CallOptions.DEFAULT), new byte[1], GrpcFastPathTest.observer(blocked));
        assertTrue(waiting.await(10, TimeUnit.SECONDS), "the blocking call never reached its handler");
        // The blocking handler waits; the server's only loop must still serve every echo, in order and whole.
        Random r = new Random(7);
        for (int i = 0; i < 300; i++) {
            byte[] req = new byte[1 + r.nextInt(8192)];
            r.nextBytes(req);
            assertArrayEquals(req, ClientCalls.blockingUnaryCall(ch, ECHO, CallOptions.DEFAULT, req), "call " + i);
        }
        assertEquals(Set.of(threadOf(serverLoop) + " (loop)"), echoThreads, "where the echo handler ran");
        release.countDown();
        String pool = new String(blocked.get(10, TimeUnit.SECONDS), StandardCharsets.UTF_8);
        assertTrue(pool.startsWith("sockmap4j-handler-"), "the blocking service ran on " + pool);
    }

    @Test
    void aChannelsCallbacksRunOnTheLoopThatReadTheReply() throws Exception {
        ManagedChannel ch = channel(server(new LoopExecution(Set.of("sockmap4j.Echo"), SockmapGrpc.blockingPool(),
                Duration.ofSeconds(10))));
        List<CompletableFuture<String>> where = new ArrayList<>();
        for (int i = 0; i < 50; i++) {
            CompletableFuture<byte[]> reply = new CompletableFuture<>();
            ClientCalls.asyncUnaryCall(ch.newCall(ECHO, CallOptions.DEFAULT), new byte[] {(byte) i},
                    GrpcFastPathTest.observer(reply));
            // thenApply's function runs on the thread that completes the reply: the observer's.
            where.add(reply.thenApply(b -> (b[0] & 0xff) + (inLoop(clientLoops) ? " on a loop" : " on "
                    + Thread.currentThread().getName())));
        }
        for (int i = 0; i < where.size(); i++) {
            String w = where.get(i).get(10, TimeUnit.SECONDS);
            // A reply that came before thenApply was attached runs it on this thread: no evidence either way.
            assertTrue(w.equals(i + " on a loop") || w.equals(i + " on " + Thread.currentThread().getName()), w);
        }
        assertTrue(where.stream().anyMatch(f -> f.join().endsWith("on a loop")), "no callback ran on a loop");
    }

    /**
     * A call made on a client loop goes out on that loop's channel: its reply's callback runs on
     * the thread that made it, for every call of both loops; calls from another thread take the
     * loops' channels in turn; shutting it down ends every channel.
     */
    @Test
    void aLoopLocalChannelKeepsACallOnTheLoopThatMadeIt() throws Exception {
        Server s = server(new LoopExecution(Set.of("sockmap4j.Echo"), SockmapGrpc.blockingPool(), Duration.ofSeconds(10)));
        LoopLocalChannel ch = LoopLocalChannel.of(clientLoops, loop -> SockmapGrpc.runOnEventLoops(
                NettyChannelBuilder.forAddress(new InetSocketAddress(InetAddress.getLoopbackAddress(), s.getPort())))
                .channelType(NioSocketChannel.class).eventLoopGroup(loop).usePlaintext().build());
        closers.add(() -> ch.shutdownNow().awaitTermination(10, TimeUnit.SECONDS));
        List<CompletableFuture<String>> calls = new ArrayList<>();
        for (EventExecutor loop : clientLoops) {
            for (int i = 0; i < 20; i++) {
                byte[] req = {(byte) i};
                CompletableFuture<String> where = new CompletableFuture<>();
                loop.execute(() -> {
                    Thread caller = Thread.currentThread();
                    CompletableFuture<byte[]> reply = new CompletableFuture<>();
                    ClientCalls.asyncUnaryCall(ch.newCall(ECHO, CallOptions.DEFAULT), req, new io.grpc.stub.StreamObserver<>() {
                        @Override
                        public void onNext(byte[] value) {
                            where.complete(value[0] == req[0] && Thread.currentThread() == caller ? "same loop"
                                    : "echo " + value[0] + " for " + req[0] + " on " + Thread.currentThread().getName()
                                            + ", made on " + caller.getName());
                        }

                        @Override
                        public void onError(Throwable t) {
                            where.completeExceptionally(t);
                        }

                        @Override
                        public void onCompleted() {
                            reply.complete(null);
                        }
                    });
                });
                calls.add(where);
            }
        }
        for (CompletableFuture<String> c : calls) {
            assertEquals("same loop", c.get(10, TimeUnit.SECONDS));
        }
        for (int i = 0; i < 10; i++) { // from this thread: each loop's channel in turn, every reply whole
            byte[] req = {(byte) i, 7};
            assertArrayEquals(req, ClientCalls.blockingUnaryCall(ch, ECHO, CallOptions.DEFAULT, req));
        }
        ch.shutdown();
        assertTrue(ch.awaitTermination(10, TimeUnit.SECONDS) && ch.isTerminated() && ch.isShutdown(), ch.toString());
    }

    @Test
    void aNonBlockingServiceThatHoldsItsLoopIsNamed() throws Exception {
        LoopExecution where = new LoopExecution(Set.of("sockmap4j.Echo", "sockmap4j.Slow"), SockmapGrpc.blockingPool(),
                Duration.ofMillis(30));
        ManagedChannel ch = channel(server(where));
        // Echoes first: on a cold JVM the first calls load gRPC's classes on the loop, which may
        // well be named; the slow service must not be until it runs.
        for (int i = 0; i < 20; i++) {
            ClientCalls.blockingUnaryCall(ch, ECHO, CallOptions.DEFAULT, new byte[16]);
        }
        assertFalse(where.warned().contains("sockmap4j.Slow"), "named before it ran: " + where.warned());
        for (int i = 0; i < 2; i++) {
            ClientCalls.blockingUnaryCall(ch, COMPUTE, CallOptions.DEFAULT, new byte[1]);
        }
        assertTrue(where.warned().contains("sockmap4j.Slow"), "a service that held its loop 60 ms: " + where.warned());
    }

    @Test
    void aMethodOrABlankNameIsRefusedNamingWhatToGive() {
        for (String bad : List.of("sockmap4j.Echo/Unary", " ")) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> SockmapGrpc.runOnEventLoops(NettyServerBuilder.forPort(0), Set.of(bad)));
            assertTrue(e.getMessage().contains("is not a gRPC service name: give the full name without a method"),
                    e.getMessage());
        }
    }

    private static String threadOf(EventLoopGroup oneLoop) throws Exception {
        return oneLoop.next().submit(() -> Thread.currentThread().getName()).get(10, TimeUnit.SECONDS);
    }
}
