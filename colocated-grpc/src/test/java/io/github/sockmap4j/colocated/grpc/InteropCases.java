package io.github.sockmap4j.colocated.grpc;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.CallOptions;
import io.grpc.ClientCall;
import io.grpc.ForwardingServerCall;
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
import io.grpc.stub.MetadataUtils;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.ServerCalls;
import io.grpc.stub.StreamObserver;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * gRPC's interoperability cases (as gRPC's interop-test descriptions define them: the same
 * methods, sizes, metadata keys, status codes and messages), on a service of this test's own
 * (gRPC's interop service and its protos are not served to this build), between a Netty server and
 * channel over TCP loopback. Each case runs over HTTP/2 ({@link InteropOverHttp2Test}: the cases
 * themselves checked against gRPC's own transport) and over an agreed co-located connection
 * ({@link InteropColocatedTest}: every call the server sees after the agreement came co-located).
 * The cases that need credentials or a second server (the auth and load-balancing ones) do not
 * apply to a transport; compression is asked for and must not break the call (a co-located
 * connection, as gRPC's in-process transport, moves messages uncompressed).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
abstract class InteropCases {
    static final String SERVICE = "grpc.testing.TestService";
    static final MethodDescriptor<byte[], byte[]> EMPTY = method(SERVICE, "EmptyCall", MethodDescriptor.MethodType.UNARY);
    static final MethodDescriptor<byte[], byte[]> UNARY = method(SERVICE, "UnaryCall", MethodDescriptor.MethodType.UNARY);
    static final MethodDescriptor<byte[], byte[]> STREAMING_OUTPUT = method(SERVICE, "StreamingOutputCall",
            MethodDescriptor.MethodType.SERVER_STREAMING);
    static final MethodDescriptor<byte[], byte[]> STREAMING_INPUT = method(SERVICE, "StreamingInputCall",
            MethodDescriptor.MethodType.CLIENT_STREAMING);
    static final MethodDescriptor<byte[], byte[]> FULL_DUPLEX = method(SERVICE, "FullDuplexCall",
            MethodDescriptor.MethodType.BIDI_STREAMING);
    /** A method of the service that the server does not implement. */
    static final MethodDescriptor<byte[], byte[]> UNIMPLEMENTED_METHOD = method(SERVICE, "UnimplementedCall",
            MethodDescriptor.MethodType.UNARY);
    /** A service the server does not have. */
    static final MethodDescriptor<byte[], byte[]> UNIMPLEMENTED_SERVICE = method("grpc.testing.UnimplementedService",
            "UnimplementedCall", MethodDescriptor.MethodType.UNARY);
    static final Metadata.Key<String> ECHO_INITIAL = Metadata.Key.of("x-grpc-test-echo-initial",
            Metadata.ASCII_STRING_MARSHALLER);
    static final Metadata.Key<byte[]> ECHO_TRAILING = Metadata.Key.of("x-grpc-test-echo-trailing-bin",
            Metadata.BINARY_BYTE_MARSHALLER);
    static final String SPECIAL_MESSAGE = "\t\ntest with whitespace\r\nand Unicode BMP \u263A and non-BMP \uD83D\uDE08\t\n";

    static MethodDescriptor<byte[], byte[]> method(String service, String name, MethodDescriptor.MethodType type) {
        return MethodDescriptor.<byte[], byte[]>newBuilder().setType(type)
                .setFullMethodName(MethodDescriptor.generateFullMethodName(service, name))
                .setRequestMarshaller(ColocatedGrpcTest.BYTES).setResponseMarshaller(ColocatedGrpcTest.BYTES).build();
    }

    /**
     * A request as the interop service's SimpleRequest and StreamingOutputCallRequest carry it:
     * the sizes of the response payloads asked for (one for a unary call, one a response for a
     * stream), the status to end with (0: OK), whether the response is to be compressed, and a
     * payload of zeros.
     */
    record Request(int[] responseSizes, int statusCode, String statusMessage, boolean compressResponse,
                   int payloadSize) {
        static Request of(int responseSize, int payloadSize) {
            return new Request(new int[] {responseSize}, 0, "", false, payloadSize);
        }

        byte[] encode() {
            ByteArrayOutputStream b = new ByteArrayOutputStream();
            try (DataOutputStream d = new DataOutputStream(b)) {
                d.writeInt(responseSizes.length);
                for (int s : responseSizes) {
                    d.writeInt(s);
                }
                d.writeInt(statusCode);
                d.writeUTF(statusMessage);
                d.writeBoolean(compressResponse);
                d.writeInt(payloadSize);
                d.write(new byte[payloadSize]);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            return b.toByteArray();
        }

        static Request decode(byte[] m) {
            try (DataInputStream d = new DataInputStream(new java.io.ByteArrayInputStream(m))) {
                int[] sizes = new int[d.readInt()];
                for (int i = 0; i < sizes.length; i++) {
                    sizes[i] = d.readInt();
                }
                int code = d.readInt();
                String message = d.readUTF();
                boolean compress = d.readBoolean();
                int payload = d.readInt();
                byte[] zeros = d.readAllBytes();
                if (zeros.length != payload || !java.util.Arrays.equals(zeros, new byte[payload])) {
                    throw Status.INVALID_ARGUMENT.withDescription("payload of " + zeros.length + " B, said " + payload)
                            .asRuntimeException();
                }
                return new Request(sizes, code, message, compress, payload);
            } catch (IOException e) {
                throw Status.INVALID_ARGUMENT.withDescription("request does not parse: " + e).asRuntimeException();
            }
        }
    }

    /** A response payload: {@code size} zeros. */
    static byte[] payload(int size) {
        return new byte[size];
    }

    /** Every call the server's interceptor saw: whether it came over a co-located connection. */
    final List<Boolean> seen = java.util.Collections.synchronizedList(new ArrayList<>());
    Server server;
    ManagedChannel channel;

    /** Whether the channel and the server agree to a co-located connection. */
    abstract boolean colocated();

    ServerServiceDefinition service() {
        return ServerServiceDefinition.builder(SERVICE)
                .addMethod(EMPTY, ServerCalls.asyncUnaryCall((req, out) -> {
                    if (req.length != 0) {
                        out.onError(Status.INVALID_ARGUMENT.withDescription("not empty").asRuntimeException());
                        return;
                    }
                    out.onNext(new byte[0]);
                    out.onCompleted();
                }))
                .addMethod(UNARY, ServerCalls.asyncUnaryCall((req, out) -> {
                    Request r = Request.decode(req);
                    if (r.compressResponse()) {
                        ((ServerCallStreamObserver<byte[]>) out).setCompression("gzip");
                    }
                    if (r.statusCode() != 0) {
                        out.onError(Status.fromCodeValue(r.statusCode()).withDescription(r.statusMessage())
                                .asRuntimeException());
                        return;
                    }
                    out.onNext(payload(r.responseSizes()[0]));
                    out.onCompleted();
                }))
                .addMethod(STREAMING_OUTPUT, ServerCalls.asyncServerStreamingCall((req, out) -> {
                    Request r = Request.decode(req);
                    for (int size : r.responseSizes()) {
                        out.onNext(payload(size));
                    }
                    out.onCompleted();
                }))
                .addMethod(STREAMING_INPUT, ServerCalls.asyncClientStreamingCall(out -> new StreamObserver<>() {
                    long received;

                    @Override
                    public void onNext(byte[] v) {
                        received += Request.decode(v).payloadSize();
                    }

                    @Override
                    public void onError(Throwable t) {
                    }

                    @Override
                    public void onCompleted() {
                        out.onNext(ByteBuffer.allocate(8).putLong(received).array());
                        out.onCompleted();
                    }
                }))
                .addMethod(FULL_DUPLEX, ServerCalls.asyncBidiStreamingCall(out -> new StreamObserver<>() {
                    boolean ended;

                    @Override
                    public void onNext(byte[] v) {
                        if (ended) {
                            return;
                        }
                        Request r = Request.decode(v);
                        if (r.statusCode() != 0) {
                            ended = true;
                            out.onError(Status.fromCodeValue(r.statusCode()).withDescription(r.statusMessage())
                                    .asRuntimeException());
                            return;
                        }
                        for (int size : r.responseSizes()) {
                            out.onNext(payload(size));
                        }
                    }

                    @Override
                    public void onError(Throwable t) {
                    }

                    @Override
                    public void onCompleted() {
                        if (!ended) {
                            out.onCompleted();
                        }
                    }
                }))
                .build();
    }

    /** Echoes the interop metadata: the initial value in the response headers, the binary one in the trailers. */
    final ServerInterceptor echoMetadata = new ServerInterceptor() {
        @Override
        public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
                                                          ServerCallHandler<Q, R> next) {
            seen.add(Boolean.TRUE.equals(call.getAttributes().get(ColocatedGrpc.TRANSPORT_ATTR_COLOCATED)));
            String initial = headers.get(ECHO_INITIAL);
            byte[] trailing = headers.get(ECHO_TRAILING);
            return next.startCall(new ForwardingServerCall.SimpleForwardingServerCall<>(call) {
                @Override
                public void sendHeaders(Metadata h) {
                    if (initial != null) {
                        h.put(ECHO_INITIAL, initial);
                    }
                    super.sendHeaders(h);
                }

                @Override
                public void close(Status status, Metadata trailers) {
                    if (trailing != null) {
                        trailers.put(ECHO_TRAILING, trailing);
                    }
                    super.close(status, trailers);
                }
            }, headers);
        }
    };

    @BeforeAll
    void start() throws Exception {
        NettyServerBuilder sb = NettyServerBuilder.forAddress(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0))
                .addService(io.grpc.ServerInterceptors.intercept(service(), echoMetadata));
        server = (colocated() ? ColocatedGrpc.configure(sb) : sb).build().start();
        NettyChannelBuilder cb = NettyChannelBuilder.forAddress("127.0.0.1", server.getPort()).usePlaintext();
        channel = (colocated() ? ColocatedGrpc.configure(cb) : cb).build();
        if (colocated()) {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (!seen.contains(Boolean.TRUE)) {
                assertTrue(System.nanoTime() < deadline, "no call went co-located; fallbacks: " + ColocatedGrpc.fallbacks());
                emptyCall();
            }
        }
        seen.clear();
    }

    @AfterAll
    void stop() throws InterruptedException {
        channel.shutdownNow();
        server.shutdownNow();
        assertTrue(channel.awaitTermination(10, TimeUnit.SECONDS), "the channel terminated");
        assertTrue(server.awaitTermination(10, TimeUnit.SECONDS), "the server terminated");
        assertTrue(seen.stream().allMatch(c -> c == colocated()), "every call went " + (colocated() ? "co-located"
                : "over HTTP/2") + ": " + seen);
    }

    CallOptions options() {
        return CallOptions.DEFAULT.withDeadlineAfter(20, TimeUnit.SECONDS);
    }

    void emptyCall() {
        assertArrayEquals(new byte[0], ClientCalls.blockingUnaryCall(channel, EMPTY, options(), new byte[0]));
    }

    /**
     * Asserts the server saw at least the {@code calls} made since it had seen {@code before} (a
     * call an earlier case began may reach it later), all gone as this class says.
     */
    void assertWentAsSaid(int before, int calls) {
        List<Boolean> since;
        synchronized (seen) {
            since = new ArrayList<>(seen.subList(before, seen.size()));
        }
        assertTrue(since.size() >= calls, "the server saw the calls: " + since);
        assertTrue(since.stream().allMatch(c -> c == colocated()), "co-located: " + colocated() + ", seen " + since);
    }

    @Test
    void emptyUnary() {
        int before = seen.size();
        emptyCall();
        assertWentAsSaid(before, 1);
    }

    @Test
    void largeUnary() {
        int before = seen.size();
        byte[] reply = ClientCalls.blockingUnaryCall(channel, UNARY, options(), Request.of(314_159, 271_828).encode());
        assertArrayEquals(payload(314_159), reply);
        assertWentAsSaid(before, 1);
    }

    @Test
    void clientCompressedUnary() {
        byte[] reply = ClientCalls.blockingUnaryCall(channel, UNARY, options().withCompression("gzip"),
                Request.of(314_159, 271_828).encode());
        assertArrayEquals(payload(314_159), reply);
    }

    @Test
    void serverCompressedUnary() {
        byte[] reply = ClientCalls.blockingUnaryCall(channel, UNARY, options(),
                new Request(new int[] {314_159}, 0, "", true, 271_828).encode());
        assertArrayEquals(payload(314_159), reply);
    }

    @Test
    void clientStreaming() throws Exception {
        int before = seen.size();
        Collected c = new Collected();
        StreamObserver<byte[]> requests = ClientCalls.asyncClientStreamingCall(channel.newCall(STREAMING_INPUT,
                options()), c);
        for (int size : new int[] {27_182, 8, 1_828, 45_904}) {
            requests.onNext(Request.of(0, size).encode());
        }
        requests.onCompleted();
        assertEquals(Status.Code.OK, c.awaitEnd().getCode());
        assertEquals(1, c.messages.size());
        assertEquals(74_922, ByteBuffer.wrap(c.messages.get(0)).getLong(), "aggregated payload size");
        assertWentAsSaid(before, 1);
    }

    @Test
    void clientCompressedStreaming() throws Exception {
        Collected c = new Collected();
        StreamObserver<byte[]> requests = ClientCalls.asyncClientStreamingCall(channel.newCall(STREAMING_INPUT,
                options().withCompression("gzip")), c);
        requests.onNext(Request.of(0, 27_182).encode());
        requests.onNext(Request.of(0, 45_904).encode());
        requests.onCompleted();
        assertEquals(Status.Code.OK, c.awaitEnd().getCode());
        assertEquals(73_086, ByteBuffer.wrap(c.messages.get(0)).getLong());
    }

    @Test
    void serverStreaming() {
        int before = seen.size();
        int[] sizes = {31_415, 9, 2_653, 58_979};
        Iterator<byte[]> it = ClientCalls.blockingServerStreamingCall(channel, STREAMING_OUTPUT, options(),
                new Request(sizes, 0, "", false, 0).encode());
        List<Integer> got = new ArrayList<>();
        it.forEachRemaining(m -> got.add(m.length));
        assertEquals(List.of(31_415, 9, 2_653, 58_979), got, "every response, in order");
        assertWentAsSaid(before, 1);
    }

    @Test
    void pingPong() throws Exception {
        int before = seen.size();
        int[] responses = {31_415, 9, 2_653, 58_979};
        int[] requests = {27_182, 8, 1_828, 45_904};
        Collected c = new Collected();
        StreamObserver<byte[]> out = ClientCalls.asyncBidiStreamingCall(channel.newCall(FULL_DUPLEX, options()), c);
        for (int i = 0; i < 4; i++) {
            out.onNext(Request.of(responses[i], requests[i]).encode());
            assertEquals(responses[i], c.next().length, "response " + i + " before the next request");
        }
        out.onCompleted();
        assertEquals(Status.Code.OK, c.awaitEnd().getCode());
        assertWentAsSaid(before, 1);
    }

    @Test
    void emptyStream() throws Exception {
        Collected c = new Collected();
        StreamObserver<byte[]> out = ClientCalls.asyncBidiStreamingCall(channel.newCall(FULL_DUPLEX, options()), c);
        out.onCompleted();
        assertEquals(Status.Code.OK, c.awaitEnd().getCode());
        assertEquals(List.of(), c.messages, "no response");
    }

    @Test
    void customMetadata() throws Exception {
        byte[] trailing = {(byte) 0xab, (byte) 0xab, (byte) 0xab};
        Metadata sent = new Metadata();
        sent.put(ECHO_INITIAL, "test_initial_metadata_value");
        sent.put(ECHO_TRAILING, trailing);
        AtomicReference<Metadata> headers = new AtomicReference<>();
        AtomicReference<Metadata> trailers = new AtomicReference<>();
        io.grpc.Channel ch = io.grpc.ClientInterceptors.intercept(channel, MetadataUtils.newAttachHeadersInterceptor(sent),
                MetadataUtils.newCaptureMetadataInterceptor(headers, trailers));
        // unary
        assertArrayEquals(payload(314_159), ClientCalls.blockingUnaryCall(ch, UNARY, options(),
                Request.of(314_159, 271_828).encode()));
        assertEquals("test_initial_metadata_value", headers.get().get(ECHO_INITIAL));
        assertArrayEquals(trailing, trailers.get().get(ECHO_TRAILING));
        // full duplex
        headers.set(null);
        trailers.set(null);
        Collected c = new Collected();
        StreamObserver<byte[]> out = ClientCalls.asyncBidiStreamingCall(ch.newCall(FULL_DUPLEX, options()), c);
        out.onNext(Request.of(314_159, 271_828).encode());
        out.onCompleted();
        assertEquals(Status.Code.OK, c.awaitEnd().getCode());
        assertEquals(314_159, c.messages.get(0).length);
        assertEquals("test_initial_metadata_value", headers.get().get(ECHO_INITIAL));
        assertArrayEquals(trailing, trailers.get().get(ECHO_TRAILING));
    }

    @Test
    void statusCodeAndMessage() throws Exception {
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> ClientCalls.blockingUnaryCall(
                channel, UNARY, options(), new Request(new int[] {1}, 2, "test status message", false, 0).encode()));
        assertEquals(Status.Code.UNKNOWN, e.getStatus().getCode());
        assertEquals("test status message", e.getStatus().getDescription());
        Collected c = new Collected();
        StreamObserver<byte[]> out = ClientCalls.asyncBidiStreamingCall(channel.newCall(FULL_DUPLEX, options()), c);
        out.onNext(new Request(new int[] {1}, 2, "test status message", false, 0).encode());
        out.onCompleted();
        Status s = c.awaitEnd();
        assertEquals(Status.Code.UNKNOWN, s.getCode());
        assertEquals("test status message", s.getDescription());
    }

    @Test
    void specialStatusMessage() {
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> ClientCalls.blockingUnaryCall(
                channel, UNARY, options(), new Request(new int[] {1}, 2, SPECIAL_MESSAGE, false, 0).encode()));
        assertEquals(Status.Code.UNKNOWN, e.getStatus().getCode());
        assertEquals(SPECIAL_MESSAGE, e.getStatus().getDescription(), "the message, byte for byte");
    }

    @Test
    void unimplementedMethod() {
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> ClientCalls.blockingUnaryCall(
                channel, UNIMPLEMENTED_METHOD, options(), new byte[0]));
        assertEquals(Status.Code.UNIMPLEMENTED, e.getStatus().getCode());
    }

    @Test
    void unimplementedService() {
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> ClientCalls.blockingUnaryCall(
                channel, UNIMPLEMENTED_SERVICE, options(), new byte[0]));
        assertEquals(Status.Code.UNIMPLEMENTED, e.getStatus().getCode());
    }

    @Test
    void cancelAfterBegin() throws Exception {
        Collected c = new Collected();
        ClientCall<byte[], byte[]> call = channel.newCall(STREAMING_INPUT, options());
        ClientCalls.asyncClientStreamingCall(call, c);
        call.cancel("cancelled by the test", null);
        assertEquals(Status.Code.CANCELLED, c.awaitEnd().getCode());
    }

    @Test
    void cancelAfterFirstResponse() throws Exception {
        Collected c = new Collected();
        ClientCall<byte[], byte[]> call = channel.newCall(FULL_DUPLEX, options());
        StreamObserver<byte[]> out = ClientCalls.asyncBidiStreamingCall(call, c);
        out.onNext(Request.of(31_415, 27_182).encode());
        assertEquals(31_415, c.next().length);
        call.cancel("cancelled by the test", null);
        assertEquals(Status.Code.CANCELLED, c.awaitEnd().getCode());
    }

    @Test
    void timeoutOnSleepingServer() throws Exception {
        Collected c = new Collected();
        // the server never answers a request that asks for no response: the call waits on it
        StreamObserver<byte[]> out = ClientCalls.asyncBidiStreamingCall(channel.newCall(FULL_DUPLEX,
                CallOptions.DEFAULT.withDeadlineAfter(1, TimeUnit.MILLISECONDS)), c);
        try {
            out.onNext(new Request(new int[0], 0, "", false, 27_182).encode());
        } catch (IllegalStateException | StatusRuntimeException alreadyOver) {
            // the deadline may pass before the request is sent; the call ends as it must all the same
        }
        assertEquals(Status.Code.DEADLINE_EXCEEDED, c.awaitEnd().getCode());
    }

    /** Many unary calls, each checked (the soak cases, shortened). */
    @Test
    void rpcSoak() {
        int before = seen.size();
        AtomicInteger n = new AtomicInteger();
        for (int i = 0; i < 200; i++) {
            assertEquals(314_159, ClientCalls.blockingUnaryCall(channel, UNARY, options(),
                    Request.of(314_159, 271_828).encode()).length);
            n.incrementAndGet();
        }
        assertWentAsSaid(before, n.get());
    }

    /** A call's responses as they come, and its end. */
    static final class Collected implements StreamObserver<byte[]> {
        final List<byte[]> messages = java.util.Collections.synchronizedList(new ArrayList<>());
        private final BlockingQueue<byte[]> queue = new LinkedBlockingQueue<>();
        private final java.util.concurrent.CompletableFuture<Status> end = new java.util.concurrent.CompletableFuture<>();

        @Override
        public void onNext(byte[] value) {
            messages.add(value);
            queue.add(value);
        }

        @Override
        public void onError(Throwable t) {
            end.complete(Status.fromThrowable(t));
        }

        @Override
        public void onCompleted() {
            end.complete(Status.OK);
        }

        byte[] next() throws InterruptedException {
            byte[] m = queue.poll(20, TimeUnit.SECONDS);
            assertTrue(m != null, "a response within 20 s; ended: " + end.getNow(null));
            return m;
        }

        Status awaitEnd() throws Exception {
            return end.get(20, TimeUnit.SECONDS);
        }
    }
}
