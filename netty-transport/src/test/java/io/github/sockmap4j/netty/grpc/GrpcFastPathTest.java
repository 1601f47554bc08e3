package io.github.sockmap4j.netty.grpc;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.testbed.Await;
import io.github.sockmap4j.testsupport.Http2Only;
import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapStats;
import io.grpc.CallOptions;
import io.grpc.ClientCall;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ServerCalls;
import io.grpc.stub.StreamObserver;
import io.netty.channel.socket.nio.NioSocketChannel;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * gRPC-Java's HTTP/2 over the transport, with byte[] messages (no generated code needed); the
 * co-located transport, on by default, is left off here (its tests: the Colocated*Test classes).
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
@Tag("kernel")
@ExtendWith(Http2Only.class)
class GrpcFastPathTest {
    static final MethodDescriptor.Marshaller<byte[]> BYTES = SockmapGrpc.bytesMarshaller();

    static MethodDescriptor<byte[], byte[]> method(String name, MethodDescriptor.MethodType type) {
        return MethodDescriptor.<byte[], byte[]>newBuilder().setType(type)
                .setFullMethodName(MethodDescriptor.generateFullMethodName("sockmap4j.Echo", name))
                .setRequestMarshaller(BYTES).setResponseMarshaller(BYTES).build();
    }

    static final MethodDescriptor<byte[], byte[]> UNARY = method("Unary", MethodDescriptor.MethodType.UNARY);
    static final MethodDescriptor<byte[], byte[]> SERVER_STREAM =
            method("ServerStream", MethodDescriptor.MethodType.SERVER_STREAMING);
    static final MethodDescriptor<byte[], byte[]> CLIENT_STREAM =
            method("ClientStream", MethodDescriptor.MethodType.CLIENT_STREAMING);
    static final MethodDescriptor<byte[], byte[]> BIDI = method("Bidi", MethodDescriptor.MethodType.BIDI_STREAMING);
    static final MethodDescriptor<byte[], byte[]> SLOW = method("Slow", MethodDescriptor.MethodType.UNARY);

    final List<AutoCloseable> closers = new ArrayList<>();
    final CountDownLatch serverSawCancel = new CountDownLatch(1);

    ServerServiceDefinition service() {
        return ServerServiceDefinition.builder("sockmap4j.Echo")
                .addMethod(UNARY, ServerCalls.asyncUnaryCall((req, out) -> {
                    out.onNext(req);
                    out.onCompleted();
                }))
                .addMethod(SERVER_STREAM, ServerCalls.asyncServerStreamingCall((req, out) -> {
                    // req[0] responses of req.length bytes, as fast as flow control lets them go
                    for (int i = 0; i < (req[0] & 0xff); i++) {
                        out.onNext(req);
                    }
                    out.onCompleted();
                }))
                .addMethod(CLIENT_STREAM, ServerCalls.asyncClientStreamingCall(out -> new StreamObserver<>() {
                    long total;

                    @Override
                    public void onNext(byte[] value) {
                        total += value.length;
                    }

                    @Override
                    public void onError(Throwable t) {
                        serverSawCancel.countDown();
                    }

                    @Override
                    public void onCompleted() {
                        out.onNext(Long.toString(total).getBytes(java.nio.charset.StandardCharsets.US_ASCII));
                        out.onCompleted();
                    }
                }))
                .addMethod(BIDI, ServerCalls.asyncBidiStreamingCall(out -> new StreamObserver<>() {
                    @Override
                    public void onNext(byte[] value) {
                        out.onNext(value);
                    }

                    @Override
                    public void onError(Throwable t) {
                        serverSawCancel.countDown();
                    }

                    @Override
                    public void onCompleted() {
                        out.onCompleted();
                    }
                }))
                .addMethod(SLOW, ServerCalls.asyncUnaryCall((req, out) -> {
                    // Never answers: only the client's deadline ends the call.
                }))
                .build();
    }

    /** How both ends wait: {@link GrpcPollingProfileTest} and {@link GrpcDirectProfileTest} run the rest so. */
    SockmapGrpc.Profile profile() {
        return SockmapGrpc.Profile.STANDARD;
    }

    /** Where the server runs its calls: as {@link #profile()} says, unless a subclass says otherwise. */
    NettyServerBuilder execution(NettyServerBuilder builder) {
        return builder;
    }

    /** Where the channel runs its callbacks: as {@link #profile()} says, unless a subclass says otherwise. */
    NettyChannelBuilder execution(NettyChannelBuilder builder) {
        return builder;
    }

    Server fastServer() throws IOException {
        Server s = execution(SockmapGrpc.configure(NettyServerBuilder.forAddress(
                        new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0)), profile()))
                .maxInboundMessageSize(16 << 20).addService(service()).build().start();
        closers.add(() -> s.shutdownNow().awaitTermination(10, TimeUnit.SECONDS));
        return s;
    }

    ManagedChannel fastChannel(Server server) {
        ManagedChannel ch = execution(SockmapGrpc.configure(NettyChannelBuilder.forAddress("127.0.0.1", server.getPort()),
                        profile())).usePlaintext().maxInboundMessageSize(16 << 20).build();
        closers.add(() -> ch.shutdownNow().awaitTermination(10, TimeUnit.SECONDS));
        return ch;
    }

    @AfterEach
    void close() throws Exception {
        for (AutoCloseable c : closers) {
            c.close();
        }
    }

    static byte[] random(int n) {
        byte[] b = new byte[n];
        new Random(n).nextBytes(b);
        return b;
    }

    void assertRedirected(SockmapStats before, long atLeast) {
        SockmapStats after = Sockmap.global().stats();
        assertTrue(after.bytesRedirected() - before.bytesRedirected() >= atLeast,
                () -> "redirected " + (after.bytesRedirected() - before.bytesRedirected()) + " B, wanted "
                        + atLeast + ": " + before + " -> " + after);
    }

    @Test
    void unary() throws Exception {
        ManagedChannel ch = fastChannel(fastServer());
        SockmapStats before = Sockmap.global().stats();
        for (int i = 0; i < 100; i++) {
            byte[] req = random(1024 + i);
            assertArrayEquals(req, ClientCalls.blockingUnaryCall(ch, UNARY, CallOptions.DEFAULT, req));
        }
        assertRedirected(before, 2 * 100 * 1024);
    }

    @Test
    void serverStreaming() throws Exception {
        ManagedChannel ch = fastChannel(fastServer());
        SockmapStats before = Sockmap.global().stats();
        byte[] req = random(4096);
        req[0] = (byte) 200;
        Iterator<byte[]> it = ClientCalls.blockingServerStreamingCall(ch, SERVER_STREAM, CallOptions.DEFAULT, req);
        int n = 0;
        while (it.hasNext()) {
            assertArrayEquals(req, it.next());
            n++;
        }
        assertEquals(200, n);
        assertRedirected(before, 4096);
    }

    /**
     * 64 KiB messages streamed as fast as HTTP/2 flow control lets them, at the default bound: the
     * server holds for its client's credit and stays on the redirect (docs/in-flight-bound.md).
     */
    @Test
    void serverStreamingOf64KiBMessagesStaysOnTheRedirect() throws Exception {
        ManagedChannel ch = fastChannel(fastServer());
        byte[] req = random(64 << 10);
        req[0] = (byte) 255;
        SockmapStats before = Sockmap.global().stats();
        int n = 0;
        for (int round = 0; round < 4; round++) {
            java.util.Iterator<byte[]> it = ClientCalls.blockingServerStreamingCall(ch, SERVER_STREAM,
                    CallOptions.DEFAULT, req);
            while (it.hasNext()) {
                assertEquals(req.length, it.next().length);
                n++;
            }
        }
        SockmapStats after = Sockmap.global().stats();
        long redirected = after.bytesRedirected() - before.bytesRedirected();
        long passed = after.bytesPassed() - before.bytesPassed();
        System.out.printf("grpc server streaming 64 KiB: %d messages, %d B redirected, %d B by TCP (%.3f%%), "
                + "%d bound hits%n", n, redirected, passed, 100.0 * redirected / (redirected + passed),
                after.boundHits() - before.boundHits());
        assertEquals(4 * 255, n);
        assertTrue(redirected * 100 >= (redirected + passed) * 99L, "at least 99% redirected: " + redirected
                + " B redirected, " + passed + " B by TCP");
    }

    @Test
    void clientStreaming() throws Exception {
        ManagedChannel ch = fastChannel(fastServer());
        CompletableFuture<byte[]> result = new CompletableFuture<>();
        StreamObserver<byte[]> req = ClientCalls.asyncClientStreamingCall(ch.newCall(CLIENT_STREAM, CallOptions.DEFAULT),
                observer(result));
        long total = 0;
        for (int i = 0; i < 100; i++) {
            byte[] b = random(1000 + i);
            total += b.length;
            req.onNext(b);
        }
        req.onCompleted();
        assertEquals(Long.toString(total), new String(result.get(30, TimeUnit.SECONDS),
                java.nio.charset.StandardCharsets.US_ASCII));
    }

    static StreamObserver<byte[]> observer(CompletableFuture<byte[]> result) {
        return new StreamObserver<>() {
            @Override
            public void onNext(byte[] value) {
                result.complete(value);
            }

            @Override
            public void onError(Throwable t) {
                result.completeExceptionally(t);
            }

            @Override
            public void onCompleted() {
                result.complete(null);
            }
        };
    }

    @Test
    void bidiStreaming() throws Exception {
        ManagedChannel ch = fastChannel(fastServer());
        List<byte[]> got = new ArrayList<>();
        CompletableFuture<Void> done = new CompletableFuture<>();
        StreamObserver<byte[]> req = ClientCalls.asyncBidiStreamingCall(ch.newCall(BIDI, CallOptions.DEFAULT),
                new StreamObserver<>() {
                    @Override
                    public void onNext(byte[] value) {
                        synchronized (got) {
                            got.add(value);
                        }
                    }

                    @Override
                    public void onError(Throwable t) {
                        done.completeExceptionally(t);
                    }

                    @Override
                    public void onCompleted() {
                        done.complete(null);
                    }
                });
        List<byte[]> sent = new ArrayList<>();
        for (int i = 0; i < 300; i++) {
            byte[] b = random(100 + i);
            sent.add(b);
            req.onNext(b);
        }
        req.onCompleted();
        done.get(30, TimeUnit.SECONDS);
        assertEquals(sent.size(), got.size());
        for (int i = 0; i < sent.size(); i++) {
            assertArrayEquals(sent.get(i), got.get(i));
        }
    }

    @Test
    void deadlineExceeded() throws Exception {
        ManagedChannel ch = fastChannel(fastServer());
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> ClientCalls.blockingUnaryCall(ch,
                SLOW, CallOptions.DEFAULT.withDeadlineAfter(200, TimeUnit.MILLISECONDS), new byte[8]));
        assertEquals(Status.Code.DEADLINE_EXCEEDED, e.getStatus().getCode());
    }

    @Test
    void cancellationReachesTheServer() throws Exception {
        ManagedChannel ch = fastChannel(fastServer());
        ClientCall<byte[], byte[]> call = ch.newCall(BIDI, CallOptions.DEFAULT);
        CompletableFuture<byte[]> echoed = new CompletableFuture<>();
        StreamObserver<byte[]> req = ClientCalls.asyncBidiStreamingCall(call, observer(echoed));
        req.onNext(new byte[16]);
        echoed.get(10, TimeUnit.SECONDS); // the server has the stream: it echoed the first message
        call.cancel("test cancels", null);
        assertTrue(serverSawCancel.await(10, TimeUnit.SECONDS), "the server never saw the cancellation");
    }

    @Test
    void fourMebibyteMessages() throws Exception {
        ManagedChannel ch = fastChannel(fastServer());
        byte[] req = random(4 << 20);
        assertArrayEquals(req, ClientCalls.blockingUnaryCall(ch, UNARY, CallOptions.DEFAULT, req));
    }

    @Test
    void flowControlHoldsAServerStreamForASlowClient() throws Exception {
        ManagedChannel ch = fastChannel(fastServer());
        byte[] req = random(64 << 10);
        req[0] = (byte) 255;
        ClientCall<byte[], byte[]> call = ch.newCall(SERVER_STREAM, CallOptions.DEFAULT);
        AtomicInteger received = new AtomicInteger();
        AtomicInteger requested = new AtomicInteger();
        AtomicInteger overRequested = new AtomicInteger();
        CompletableFuture<Status> closed = new CompletableFuture<>();
        call.start(new ClientCall.Listener<>() {
            @Override
            public void onMessage(byte[] message) {
                if (received.incrementAndGet() > requested.get()) {
                    overRequested.incrementAndGet();
                }
            }

            @Override
            public void onClose(Status status, Metadata trailers) {
                closed.complete(status);
            }
        }, new Metadata());
        call.sendMessage(req);
        call.halfClose();
        // One message at a time for the first 20: the server's stream is held by HTTP/2 flow
        // control, and each message arrives only once asked for (checked as each one arrives).
        for (int k = 1; k <= 20; k++) {
            requested.set(k);
            call.request(1);
            int want = k;
            Await.until("message " + want + " arrives", () -> received.get() >= want);
        }
        requested.set(Integer.MAX_VALUE);
        call.request(Integer.MAX_VALUE);
        assertEquals(Status.Code.OK, closed.get(30, TimeUnit.SECONDS).getCode());
        assertEquals(255, received.get());
        assertEquals(0, overRequested.get(), "flow control let more through than requested");
    }

    @Test
    void manyConcurrentCalls() throws Exception {
        ManagedChannel ch = fastChannel(fastServer());
        List<CompletableFuture<byte[]>> calls = new ArrayList<>();
        for (int i = 0; i < 500; i++) {
            CompletableFuture<byte[]> f = new CompletableFuture<>();
            ClientCalls.asyncUnaryCall(ch.newCall(UNARY, CallOptions.DEFAULT), random(512 + i), observer(f));
            calls.add(f);
        }
        for (int i = 0; i < calls.size(); i++) {
            assertArrayEquals(random(512 + i), calls.get(i).get(30, TimeUnit.SECONDS));
        }
    }

    @Test
    void fastPathServerWithAPlainClient() throws Exception {
        Server server = fastServer();
        ManagedChannel plain = NettyChannelBuilder.forAddress("127.0.0.1", server.getPort())
                .channelType(NioSocketChannel.class)
                .eventLoopGroup(new io.netty.channel.MultiThreadIoEventLoopGroup(1,
                        io.netty.channel.nio.NioIoHandler.newFactory()))
                .usePlaintext().build();
        closers.add(() -> plain.shutdownNow().awaitTermination(10, TimeUnit.SECONDS));
        byte[] req = random(2048);
        assertArrayEquals(req, ClientCalls.blockingUnaryCall(plain, UNARY, CallOptions.DEFAULT, req));
    }

    @Test
    void plainServerWithAFastPathClient() throws Exception {
        Server plain = NettyServerBuilder.forAddress(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0))
                .addService(service()).build().start();
        closers.add(() -> plain.shutdownNow().awaitTermination(10, TimeUnit.SECONDS));
        SockmapStats before = Sockmap.global().stats();
        ManagedChannel ch = fastChannel(plain);
        byte[] req = random(2048);
        assertArrayEquals(req, ClientCalls.blockingUnaryCall(ch, UNARY, CallOptions.DEFAULT, req));
        assertEquals(before.bytesRedirected(), Sockmap.global().stats().bytesRedirected(),
                "a port that is not opted in goes by plain TCP");
    }
}
