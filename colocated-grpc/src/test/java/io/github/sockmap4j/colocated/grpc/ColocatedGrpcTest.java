package io.github.sockmap4j.colocated.grpc;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.colocated.MessageRing;
import io.github.sockmap4j.colocated.SharedRegion;
import io.grpc.CallOptions;
import io.grpc.ClientCall;
import io.grpc.Context;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.MetadataUtils;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.ServerCalls;
import io.grpc.stub.StreamObserver;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * gRPC's semantics over one co-located connection (no root: the rings need none): unary and
 * every kind of streaming, metadata both ways, status and trailers, deadlines, cancellation from
 * either end, flow control that a reader who asks for nothing makes the writer feel, many calls at
 * once, shutdown; and no thread left once both ends are shut down.
 */
class ColocatedGrpcTest {
    static final MethodDescriptor.Marshaller<byte[]> BYTES = new MethodDescriptor.Marshaller<>() {
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
    static final MethodDescriptor<byte[], byte[]> ECHO = method("Echo", MethodDescriptor.MethodType.UNARY);
    static final MethodDescriptor<byte[], byte[]> FAIL = method("Fail", MethodDescriptor.MethodType.UNARY);
    static final MethodDescriptor<byte[], byte[]> HANG = method("Hang", MethodDescriptor.MethodType.UNARY);
    static final MethodDescriptor<byte[], byte[]> SPRAY = method("Spray", MethodDescriptor.MethodType.SERVER_STREAMING);
    static final MethodDescriptor<byte[], byte[]> READY_SPRAY = method("ReadySpray",
            MethodDescriptor.MethodType.SERVER_STREAMING);
    static final MethodDescriptor<byte[], byte[]> SUM = method("Sum", MethodDescriptor.MethodType.CLIENT_STREAMING);
    static final MethodDescriptor<byte[], byte[]> BIDI = method("Bidi", MethodDescriptor.MethodType.BIDI_STREAMING);
    static final Metadata.Key<String> TEXT = Metadata.Key.of("x-test", Metadata.ASCII_STRING_MARSHALLER);
    static final Metadata.Key<byte[]> BIN = Metadata.Key.of("x-test-bin", Metadata.BINARY_BYTE_MARSHALLER);

    static MethodDescriptor<byte[], byte[]> method(String name, MethodDescriptor.MethodType type) {
        return MethodDescriptor.<byte[], byte[]>newBuilder().setType(type)
                .setFullMethodName(MethodDescriptor.generateFullMethodName("test.Colocated", name))
                .setRequestMarshaller(BYTES).setResponseMarshaller(BYTES).build();
    }

    final CountDownLatch hangCancelled = new CountDownLatch(1);
    final CountDownLatch hangStarted = new CountDownLatch(1);
    final CountDownLatch sprayCancelled = new CountDownLatch(1);
    final AtomicLong sprayedWhileNotReady = new AtomicLong();
    final AtomicReference<Metadata> seenHeaders = new AtomicReference<>();
    ColocatedServer server;
    ManagedChannel channel;

    ServerServiceDefinition service() {
        return ServerServiceDefinition.builder("test.Colocated")
                .addMethod(ECHO, ServerCalls.asyncUnaryCall((req, out) -> {
                    out.onNext(req);
                    out.onCompleted();
                }))
                .addMethod(FAIL, ServerCalls.asyncUnaryCall((req, out) -> {
                    Metadata t = new Metadata();
                    t.put(TEXT, "trailer-" + new String(req));
                    out.onError(Status.NOT_FOUND.withDescription("no " + new String(req)).asRuntimeException(t));
                }))
                .addMethod(HANG, ServerCalls.asyncUnaryCall((req, out) -> {
                    Context.current().addListener(c -> hangCancelled.countDown(), Runnable::run);
                    hangStarted.countDown();
                }))
                .addMethod(SPRAY, ServerCalls.asyncServerStreamingCall((req, out) -> {
                    ServerCallStreamObserver<byte[]> o = (ServerCallStreamObserver<byte[]>) out;
                    o.setOnCancelHandler(sprayCancelled::countDown);
                    int n = ByteBuffer.wrap(req).getInt();
                    int size = ByteBuffer.wrap(req).getInt(4);
                    Thread.ofPlatform().start(() -> {
                        for (int i = 0; i < n && !o.isCancelled(); i++) {
                            if (!o.isReady()) {
                                sprayedWhileNotReady.incrementAndGet();
                            }
                            byte[] m = new byte[size];
                            ByteBuffer.wrap(m).putInt(i);
                            o.onNext(m);
                        }
                        if (!o.isCancelled()) {
                            o.onCompleted();
                        }
                    });
                }))
                .addMethod(READY_SPRAY, ServerCalls.asyncServerStreamingCall((req, out) -> {
                    // as a server streaming much should: only while the call is ready, from its onReady
                    ServerCallStreamObserver<byte[]> o = (ServerCallStreamObserver<byte[]>) out;
                    int n = ByteBuffer.wrap(req).getInt();
                    byte[] m = new byte[ByteBuffer.wrap(req).getInt(4)];
                    int[] sent = {0};
                    o.setOnReadyHandler(() -> {
                        while (sent[0] < n && o.isReady()) {
                            o.onNext(m);
                            sent[0]++;
                        }
                        if (sent[0] == n) {
                            sent[0]++;
                            o.onCompleted();
                        }
                    });
                }))
                .addMethod(SUM, ServerCalls.asyncClientStreamingCall(out -> new StreamObserver<>() {
                    long sum;

                    @Override
                    public void onNext(byte[] v) {
                        sum += ByteBuffer.wrap(v).getLong();
                    }

                    @Override
                    public void onError(Throwable t) {
                    }

                    @Override
                    public void onCompleted() {
                        out.onNext(ByteBuffer.allocate(8).putLong(sum).array());
                        out.onCompleted();
                    }
                }))
                .addMethod(BIDI, ServerCalls.asyncBidiStreamingCall(out -> new StreamObserver<>() {
                    @Override
                    public void onNext(byte[] v) {
                        out.onNext(v);
                    }

                    @Override
                    public void onError(Throwable t) {
                    }

                    @Override
                    public void onCompleted() {
                        out.onCompleted();
                    }
                }))
                .build();
    }

    /** Whether both ends run the calls' callbacks on the threads that read them (gRPC's direct executor). */
    boolean direct() {
        return false;
    }

    /** The loop that reads the channel's connection (with the region's bells); null: a thread of its own. */
    ReadLoop loop() {
        return null;
    }

    /** The loop that reads the server's end; null: a thread of its own. */
    ReadLoop serverLoop() {
        return null;
    }

    @BeforeEach
    void start() throws IOException {
        ReadLoop loop = loop();
        ReadLoop serverLoop = serverLoop();
        SharedRegion mine = SharedRegion.create("sm4j-grpc-test", 1 << 20, 0, loop != null || serverLoop != null);
        SharedRegion theirs = SharedRegion.open(mine.descriptorForPeer(), 1 << 20, 0, mine.bellsForPeer());
        ColocatedServer.Builder serverBuilder = ColocatedServer.builder("test").addService(service())
                .intercept(new io.grpc.ServerInterceptor() {
                    @Override
                    public <Q, R> io.grpc.ServerCall.Listener<Q> interceptCall(io.grpc.ServerCall<Q, R> call,
                            Metadata headers, io.grpc.ServerCallHandler<Q, R> next) {
                        seenHeaders.set(headers);
                        return next.startCall(new io.grpc.ForwardingServerCall.SimpleForwardingServerCall<>(call) {
                            @Override
                            public void sendHeaders(Metadata h) {
                                String v = headers.get(TEXT);
                                if (v != null) {
                                    h.put(TEXT, "echo-" + v);
                                }
                                super.sendHeaders(h);
                            }
                        }, headers);
                    }
                });
        if (direct()) {
            serverBuilder.directExecutor();
        }
        serverBuilder.readOn(serverLoop);
        server = serverBuilder.buildColocated();
        server.server().start();
        server.attach(theirs);
        ColocatedChannelBuilder channelBuilder = ColocatedChannelBuilder.forRegion(mine, "test").readOn(loop);
        channel = (direct() ? channelBuilder.directExecutor() : channelBuilder).build();
    }

    @AfterEach
    void stop() throws InterruptedException {
        channel.shutdownNow();
        server.server().shutdownNow();
        assertTrue(channel.awaitTermination(10, TimeUnit.SECONDS), "the channel terminated");
        assertTrue(server.server().awaitTermination(10, TimeUnit.SECONDS), "the server terminated");
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!readerThreads().isEmpty() && System.nanoTime() < deadline) {
            Thread.onSpinWait();
        }
        assertEquals(List.of(), readerThreads(), "no connection's thread left");
        afterStop();
    }

    /** What a variant checks and frees once both ends are shut down. */
    void afterStop() {
    }

    /** The connections' readers (not the process's hand-over listener or agreement pool, which other tests start). */
    static List<String> readerThreads() {
        return Thread.getAllStackTraces().keySet().stream().map(Thread::getName)
                .filter(n -> n.startsWith("sockmap4j-colocated-") && !n.equals("sockmap4j-colocated-handover")
                        && !n.equals("sockmap4j-colocated-agree")).toList();
    }

    byte[] echo(byte[] m) {
        return ClientCalls.blockingUnaryCall(channel, ECHO, CallOptions.DEFAULT.withDeadlineAfter(10, TimeUnit.SECONDS), m);
    }

    @Test
    void unaryCallsOfEverySizeComeBackWhole() {
        for (int size : new int[] {0, 1, 1024, 300_000, 4 << 20 - 64}) {
            byte[] m = new byte[size];
            Arrays.fill(m, (byte) size);
            if (size > 0) {
                m[size - 1] = 7;
            }
            assertArrayEquals(m, echo(m), "a message of " + size + " bytes");
        }
    }

    @Test
    void metadataGoesBothWays() {
        Metadata headers = new Metadata();
        headers.put(TEXT, "hello");
        headers.put(BIN, new byte[] {0, 1, 2, (byte) 255});
        AtomicReference<Metadata> responseHeaders = new AtomicReference<>();
        AtomicReference<Metadata> trailers = new AtomicReference<>();
        io.grpc.Channel ch = io.grpc.ClientInterceptors.intercept(channel,
                MetadataUtils.newAttachHeadersInterceptor(headers),
                MetadataUtils.newCaptureMetadataInterceptor(responseHeaders, trailers));
        ClientCalls.blockingUnaryCall(ch, ECHO, CallOptions.DEFAULT, new byte[] {1});
        assertEquals("hello", seenHeaders.get().get(TEXT));
        assertArrayEquals(new byte[] {0, 1, 2, (byte) 255}, seenHeaders.get().get(BIN));
        assertEquals("echo-hello", responseHeaders.get().get(TEXT));
        assertTrue(seenHeaders.get().get(Metadata.Key.of("user-agent", Metadata.ASCII_STRING_MARSHALLER))
                .contains("sockmap4j-colocated"));
    }

    @Test
    void statusAndTrailersReachTheClient() {
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class,
                () -> ClientCalls.blockingUnaryCall(channel, FAIL, CallOptions.DEFAULT, "thing".getBytes()));
        assertEquals(Status.Code.NOT_FOUND, e.getStatus().getCode());
        assertEquals("no thing", e.getStatus().getDescription());
        assertEquals("trailer-thing", e.getTrailers().get(TEXT));
    }

    @Test
    void aDeadlineEndsTheCallAtBothEnds() throws InterruptedException {
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> ClientCalls.blockingUnaryCall(
                channel, HANG, CallOptions.DEFAULT.withDeadlineAfter(200, TimeUnit.MILLISECONDS), new byte[] {1}));
        assertEquals(Status.Code.DEADLINE_EXCEEDED, e.getStatus().getCode());
        assertTrue(hangCancelled.await(10, TimeUnit.SECONDS), "the server's context was cancelled");
    }

    @Test
    void aClientCancelReachesTheServer() throws InterruptedException {
        ClientCall<byte[], byte[]> call = channel.newCall(SPRAY, CallOptions.DEFAULT);
        CountDownLatch first = new CountDownLatch(1);
        AtomicReference<Status> closedWith = new AtomicReference<>();
        CountDownLatch closed = new CountDownLatch(1);
        call.start(new ClientCall.Listener<>() {
            @Override
            public void onMessage(byte[] message) {
                first.countDown();
                call.request(1);
            }

            @Override
            public void onClose(Status status, Metadata trailers) {
                closedWith.set(status);
                closed.countDown();
            }
        }, new Metadata());
        call.request(1);
        call.sendMessage(ByteBuffer.allocate(8).putInt(Integer.MAX_VALUE).putInt(64).array());
        call.halfClose();
        assertTrue(first.await(10, TimeUnit.SECONDS));
        call.cancel("the client is done", null);
        assertTrue(closed.await(10, TimeUnit.SECONDS));
        assertEquals(Status.Code.CANCELLED, closedWith.get().getCode());
        assertTrue(sprayCancelled.await(10, TimeUnit.SECONDS), "the server saw the cancel");
    }

    @Test
    void streamsOfEveryKindKeepOrder() throws Exception {
        Iterator<byte[]> it = ClientCalls.blockingServerStreamingCall(channel, SPRAY, CallOptions.DEFAULT,
                ByteBuffer.allocate(8).putInt(1000).putInt(100).array());
        int i = 0;
        while (it.hasNext()) {
            assertEquals(i++, ByteBuffer.wrap(it.next()).getInt());
        }
        assertEquals(1000, i);

        CountDownLatch done = new CountDownLatch(1);
        AtomicLong sum = new AtomicLong();
        StreamObserver<byte[]> req = ClientCalls.asyncClientStreamingCall(channel.newCall(SUM, CallOptions.DEFAULT),
                observer(v -> sum.set(ByteBuffer.wrap(v).getLong()), done));
        for (long k = 1; k <= 1000; k++) {
            req.onNext(ByteBuffer.allocate(8).putLong(k).array());
        }
        req.onCompleted();
        assertTrue(done.await(10, TimeUnit.SECONDS));
        assertEquals(500_500, sum.get());

        CountDownLatch bidiDone = new CountDownLatch(1);
        List<Integer> back = java.util.Collections.synchronizedList(new ArrayList<>());
        StreamObserver<byte[]> bidi = ClientCalls.asyncBidiStreamingCall(channel.newCall(BIDI, CallOptions.DEFAULT),
                observer(v -> back.add(ByteBuffer.wrap(v).getInt()), bidiDone));
        for (int k = 0; k < 500; k++) {
            bidi.onNext(ByteBuffer.allocate(4).putInt(k).array());
        }
        bidi.onCompleted();
        assertTrue(bidiDone.await(10, TimeUnit.SECONDS));
        assertEquals(java.util.stream.IntStream.range(0, 500).boxed().toList(), back);
    }

    static StreamObserver<byte[]> observer(java.util.function.Consumer<byte[]> each, CountDownLatch done) {
        return new StreamObserver<>() {
            @Override
            public void onNext(byte[] v) {
                each.accept(v);
            }

            @Override
            public void onError(Throwable t) {
                done.countDown();
            }

            @Override
            public void onCompleted() {
                done.countDown();
            }
        };
    }

    /**
     * A client that asks for no message: the server's stream stops being ready within the window,
     * so a server that respects isReady holds; the messages it sent anyway wait at the server,
     * not in the client.
     */
    @Test
    void aReaderThatTakesNothingMakesTheWriterWait() throws Exception {
        ClientCall<byte[], byte[]> call = channel.newCall(SPRAY, CallOptions.DEFAULT);
        CountDownLatch closed = new CountDownLatch(1);
        AtomicLong got = new AtomicLong();
        call.start(new ClientCall.Listener<>() {
            @Override
            public void onMessage(byte[] message) {
                got.incrementAndGet();
            }

            @Override
            public void onClose(Status status, Metadata trailers) {
                closed.countDown();
            }
        }, new Metadata());
        call.sendMessage(ByteBuffer.allocate(8).putInt(200).putInt(64 * 1024).array());
        call.halfClose();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (sprayedWhileNotReady.get() == 0 && System.nanoTime() < deadline) {
            Thread.onSpinWait();
        }
        assertTrue(sprayedWhileNotReady.get() > 0, "the server's stream stopped being ready");
        assertEquals(0, got.get(), "nothing delivered before it was asked for");
        call.request(Integer.MAX_VALUE);
        assertTrue(closed.await(20, TimeUnit.SECONDS), "the stream ended; messages delivered: " + got.get());
        assertEquals(200, got.get(), "every message once asked for");
    }

    @Test
    void manyCallersAtOnce() throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(8);
        try {
            List<Future<?>> all = new ArrayList<>();
            for (int t = 0; t < 8; t++) {
                int base = t;
                all.add(pool.submit(() -> {
                    for (int i = 0; i < 500; i++) {
                        byte[] m = ByteBuffer.allocate(16).putInt(base).putInt(i).array();
                        assertArrayEquals(m, echo(m));
                    }
                    return null;
                }));
            }
            for (Future<?> f : all) {
                f.get(60, TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
        }
    }

    /**
     * A server that sends only while its call is ready (from onReady, as a server streaming much
     * should) streams 1,024 messages of 64 KiB, 64 MiB, to a blocking caller, several calls in a row:
     * the window it waits for always comes back.
     */
    @Test
    void aServerSendingOnlyWhileReadyStreamsToTheEnd() {
        for (int call = 0; call < 4; call++) {
            Iterator<byte[]> it = ClientCalls.blockingServerStreamingCall(channel, READY_SPRAY,
                    CallOptions.DEFAULT.withDeadlineAfter(30, TimeUnit.SECONDS),
                    ByteBuffer.allocate(8).putInt(1024).putInt(64 * 1024).array());
            int n = 0;
            while (it.hasNext()) {
                assertEquals(64 * 1024, it.next().length);
                n++;
            }
            assertEquals(1024, n, "call " + call);
        }
    }

    /**
     * A message is read into the frame it is sent in, sized as its stream says: one whose stream
     * says less than it holds, more, or nothing arrives whole, in one frame or in several.
     */
    @Test
    void aMessageArrivesWholeWhateverItsStreamSaysOfItsSize() throws Exception {
        java.util.Random random = new java.util.Random(7);
        for (int size : new int[] {0, 1000, 300_000}) {
            byte[] m = new byte[size];
            random.nextBytes(m);
            for (int says : new int[] {0, size / 2, size + 17}) {
                MethodDescriptor.Marshaller<byte[]> lying = new MethodDescriptor.Marshaller<>() {
                    @Override
                    public InputStream stream(byte[] value) {
                        return new java.io.FilterInputStream(new ByteArrayInputStream(value)) {
                            @Override
                            public int available() {
                                return says;
                            }
                        };
                    }

                    @Override
                    public byte[] parse(InputStream stream) {
                        return BYTES.parse(stream);
                    }
                };
                MethodDescriptor<byte[], byte[]> echo = ECHO.toBuilder(lying, BYTES).build();
                assertArrayEquals(m, ClientCalls.blockingUnaryCall(channel, echo,
                        CallOptions.DEFAULT.withDeadlineAfter(10, TimeUnit.SECONDS), m), size + " B said to be " + says);
            }
        }
    }

    /**
     * A unary call is one batch each way, blocking or not: its headers, message and half-close
     * wake the server once, and the reply's headers, message and trailers the client once, with
     * gRPC's retries on (the channel's default), whose stream flushes after every message.
     */
    @Test
    void aUnaryCallIsOneBatchEachWay() throws Exception {
        assertArrayEquals(new byte[] {0}, echo(new byte[] {0})); // the transport is up
        int calls = 50;
        for (boolean blocking : new boolean[] {false, true}) {
            long before = MessageRing.batchesPublished();
            for (int i = 0; i < calls; i++) {
                byte[] m = ByteBuffer.allocate(8).putInt(i).array();
                byte[] reply = blocking ? echo(m)
                        : ClientCalls.futureUnaryCall(channel.newCall(ECHO, CallOptions.DEFAULT), m).get(10, TimeUnit.SECONDS);
                assertArrayEquals(m, reply);
            }
            // the count is the process's: an earlier test's stream that ends late (a cancel) adds one
            long batches = MessageRing.batchesPublished() - before;
            assertTrue(batches >= 2L * calls && batches <= 2L * calls + calls / 10, (blocking ? "blocking" : "future")
                    + " unary calls: " + batches + " batches ended with a wake, both ways, for " + calls + " calls");
        }
    }

    /**
     * A blocking stub's caller reads its own reply from the ring (one thread woken instead of two);
     * with {@code -Dsockmap4j.colocated.callerReadsMicros=0} the connection's reader hands it over.
     */
    @Test
    void aBlockingCallerReadsItsOwnReplyUnlessTurnedOff() throws Exception {
        long before = ColocatedConnection.callerReads();
        for (int i = 0; i < 200; i++) {
            byte[] m = ByteBuffer.allocate(8).putInt(i).array();
            assertArrayEquals(m, echo(m));
        }
        assertTrue(ColocatedConnection.callerReads() > before, "a caller read its own reply");

        System.setProperty(ColocatedGrpc.CALLER_READS_MICROS, "0");
        SharedRegion mine = SharedRegion.create("sm4j-grpc-test", 1 << 20);
        ManagedChannel off;
        try {
            server.attach(SharedRegion.open(mine.descriptorForPeer(), 1 << 20));
            off = ColocatedChannelBuilder.forRegion(mine, "test-off").build();
            ClientCalls.blockingUnaryCall(off, ECHO, CallOptions.DEFAULT, new byte[] {1}); // the transport starts here
        } finally {
            System.clearProperty(ColocatedGrpc.CALLER_READS_MICROS);
        }
        try {
            long was = ColocatedConnection.callerReads();
            for (int i = 0; i < 50; i++) {
                byte[] m = ByteBuffer.allocate(8).putInt(i).array();
                assertArrayEquals(m, ClientCalls.blockingUnaryCall(off, ECHO, CallOptions.DEFAULT, m));
            }
            assertEquals(was, ColocatedConnection.callerReads(), "turned off, no caller read");
        } finally {
            off.shutdownNow();
            assertTrue(off.awaitTermination(10, TimeUnit.SECONDS));
        }
    }

    /** A blocking caller interrupted while it waits (reading its reply or not) ends its call CANCELLED, at both ends. */
    @Test
    void anInterruptedBlockingCallerCancelsItsCall() throws Exception {
        AtomicReference<Throwable> failed = new AtomicReference<>();
        Thread caller = Thread.ofPlatform().start(() -> {
            try {
                ClientCalls.blockingUnaryCall(channel, HANG, CallOptions.DEFAULT, new byte[] {1});
            } catch (Throwable t) {
                failed.set(t);
            }
        });
        assertTrue(hangStarted.await(10, TimeUnit.SECONDS), "the server has the call");
        caller.interrupt();
        caller.join(TimeUnit.SECONDS.toMillis(10));
        assertFalse(caller.isAlive(), "the caller returned");
        StatusRuntimeException e = assertInstanceOf(StatusRuntimeException.class, failed.get());
        assertEquals(Status.Code.CANCELLED, e.getStatus().getCode());
        assertTrue(hangCancelled.await(10, TimeUnit.SECONDS), "the server saw the cancel");
    }

    /**
     * Another call's frames that come while a blocking caller reads its reply are left to the
     * connection's reader: that call's callbacks (on the reader, under a direct executor) never
     * run on the blocking caller's thread, and both calls get everything in order.
     */
    @Test
    void anotherCallsCallbacksNeverRunOnABlockingCallersThread() throws Exception {
        java.util.Set<Thread> streamThreads = java.util.concurrent.ConcurrentHashMap.newKeySet();
        AtomicReference<Thread> blockingCaller = new AtomicReference<>();
        CountDownLatch streamDone = new CountDownLatch(1);
        AtomicReference<Throwable> streamFailed = new AtomicReference<>();
        java.util.concurrent.atomic.AtomicInteger next = new java.util.concurrent.atomic.AtomicInteger();
        ClientCalls.asyncServerStreamingCall(channel.newCall(SPRAY, CallOptions.DEFAULT),
                ByteBuffer.allocate(8).putInt(20_000).putInt(64).array(), new StreamObserver<>() {
                    @Override
                    public void onNext(byte[] v) {
                        streamThreads.add(Thread.currentThread());
                        if (ByteBuffer.wrap(v).getInt() != next.getAndIncrement()) {
                            streamFailed.compareAndSet(null, new AssertionError("out of order at " + next.get()));
                        }
                    }

                    @Override
                    public void onError(Throwable t) {
                        streamFailed.set(t);
                        streamDone.countDown();
                    }

                    @Override
                    public void onCompleted() {
                        streamDone.countDown();
                    }
                });
        ExecutorService one = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "blocking-caller");
            blockingCaller.set(t);
            return t;
        });
        try {
            Future<Integer> calls = one.submit(() -> {
                int n = 0;
                do {
                    byte[] m = ByteBuffer.allocate(8).putInt(n).array();
                    assertArrayEquals(m, echo(m));
                    n++;
                } while (streamDone.getCount() > 0);
                return n;
            });
            assertTrue(streamDone.await(60, TimeUnit.SECONDS), "the stream ended");
            calls.get(60, TimeUnit.SECONDS); // every echo came back whole
        } finally {
            one.shutdownNow();
        }
        assertEquals(null, streamFailed.get());
        assertEquals(20_000, next.get(), "every message of the stream");
        assertFalse(streamThreads.contains(blockingCaller.get()), "no stream callback on the blocking caller's thread");
    }

    /**
     * A call whose own message callback cancels it (a handler's outgoing call, whose context ends
     * once its reply is used) ends as the server ended it: a reply's message is published with its
     * trailers, and the cancel runs after what was read. Replies of two frames each.
     */
    @Test
    void aCallCancelledByItsMessageCallbackEndsAsTheServerEndedIt() throws Exception {
        byte[] big = new byte[300_000];
        big[299_999] = 9;
        for (int i = 0; i < 50; i++) {
            Context.CancellableContext ctx = Context.current().withCancellation();
            java.util.concurrent.CompletableFuture<Status> end = new java.util.concurrent.CompletableFuture<>();
            ctx.run(() -> ClientCalls.asyncUnaryCall(channel.newCall(ECHO, CallOptions.DEFAULT), big, new StreamObserver<>() {
                @Override
                public void onNext(byte[] v) {
                    ctx.cancel(null); // the reply is used: the context that made the call ends
                }

                @Override
                public void onError(Throwable t) {
                    end.complete(Status.fromThrowable(t));
                }

                @Override
                public void onCompleted() {
                    end.complete(Status.OK);
                }
            }));
            assertEquals(Status.Code.OK, end.get(10, TimeUnit.SECONDS).getCode(), "call " + i);
        }
    }

    @Test
    void aServerShutdownLetsCallsFinishAndRefusesNewOnes() throws Exception {
        assertArrayEquals(new byte[] {1}, echo(new byte[] {1}));
        server.server().shutdown();
        assertTrue(server.server().awaitTermination(10, TimeUnit.SECONDS));
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> echo(new byte[] {2}));
        assertEquals(Status.Code.UNAVAILABLE, e.getStatus().getCode());
    }
}
