package io.github.sockmap4j.arrow.grpc;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.colocated.SharedRegion;
import io.github.sockmap4j.colocated.grpc.ColocatedChannelBuilder;
import io.github.sockmap4j.colocated.grpc.ColocatedGrpc;
import io.github.sockmap4j.colocated.grpc.ColocatedServer;
import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerServiceDefinition;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ServerCalls;
import io.grpc.stub.StreamObserver;
import java.io.ByteArrayInputStream;
import java.io.InputStream;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.Float4Vector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.complex.FixedSizeListVector;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.arrow.vector.types.FloatingPointPrecision;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.FieldType;
import org.apache.arrow.vector.types.pojo.Schema;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Arrow batches as gRPC messages (no root): over a co-located connection that lends they arrive
 * in place and equal, their memory comes back when the roots are closed, a receiver that keeps
 * them makes the sender copy, and a sender that scribbles over a batch being read makes the
 * reader fail a bounds check, not the process; over HTTP/2 the same message is an Arrow IPC
 * stream any reader reads.
 */
class ArrowGrpcTest {
    private static final long CAPACITY = 1 << 20;
    private static final long HALF = 1 << 20;
    private static final int DIM = 1536;
    private static final int ROWS = 10;

    private final BufferAllocator clientMemory = new RootAllocator();
    private final BufferAllocator serverMemory = new RootAllocator();
    private final MethodDescriptor.Marshaller<VectorSchemaRoot> clientMarshaller = ArrowGrpc.marshaller(clientMemory);
    private final MethodDescriptor.Marshaller<VectorSchemaRoot> serverMarshaller = ArrowGrpc.marshaller(serverMemory);
    private final List<VectorSchemaRoot> keptByServer = new CopyOnWriteArrayList<>();
    private volatile boolean serverKeeps;
    private volatile CountDownLatch holdServer;
    private final AtomicReference<Throwable> serverRead = new AtomicReference<>();
    private SharedRegion clientRegion;
    private ManagedChannel channel;
    private ColocatedServer colocated;
    private Server netty;

    private MethodDescriptor<VectorSchemaRoot, VectorSchemaRoot> method(MethodDescriptor.Marshaller<VectorSchemaRoot> m) {
        return MethodDescriptor.<VectorSchemaRoot, VectorSchemaRoot>newBuilder()
                .setType(MethodDescriptor.MethodType.UNARY).setFullMethodName("test.Arrow/Echo")
                .setRequestMarshaller(m).setResponseMarshaller(m).build();
    }

    /** Echoes the batch back (a copy made here, so the request's root can be closed or kept). */
    private ServerServiceDefinition service() {
        return ServerServiceDefinition.builder("test.Arrow").addMethod(method(serverMarshaller),
                ServerCalls.asyncUnaryCall((VectorSchemaRoot in, StreamObserver<VectorSchemaRoot> out) -> {
                    try {
                        CountDownLatch hold = holdServer;
                        if (hold != null) {
                            hold.await(10, TimeUnit.SECONDS);
                            try {
                                read(in); // what the scribbled batch says, read through Arrow's checks
                            } catch (RuntimeException e) {
                                serverRead.set(e);
                            }
                        }
                        VectorSchemaRoot copy = batch(serverMemory, rowsOf(in) > 0 ? read(in).question() : "", rowsOf(in));
                        out.onNext(copy);
                        copy.close();
                        out.onCompleted();
                    } catch (Throwable t) {
                        serverRead.compareAndSet(null, t);
                        out.onError(io.grpc.Status.INTERNAL.withDescription(t.toString()).asRuntimeException());
                    } finally {
                        if (serverKeeps) {
                            keptByServer.add(in);
                        } else {
                            in.close();
                        }
                    }
                })).build();
    }

    private static int rowsOf(VectorSchemaRoot r) {
        return r.getRowCount();
    }

    private void colocated() throws Exception {
        clientRegion = SharedRegion.create("sm4j-arrow-grpc-test", CAPACITY, 2 * HALF);
        SharedRegion theirs = SharedRegion.open(clientRegion.descriptorForPeer(), CAPACITY, 2 * HALF, new int[0]);
        colocated = ColocatedServer.builder("arrow").addService(service()).buildColocated();
        colocated.server().start();
        colocated.attach(theirs);
        channel = ColocatedChannelBuilder.forRegion(clientRegion, "arrow").build();
    }

    private void http2() throws Exception {
        netty = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0)).addService(service()).build().start();
        channel = NettyChannelBuilder.forAddress("127.0.0.1", netty.getPort()).usePlaintext().build();
    }

    @AfterEach
    void stop() throws InterruptedException {
        keptByServer.forEach(VectorSchemaRoot::close);
        if (channel != null) {
            channel.shutdownNow();
            assertTrue(channel.awaitTermination(10, TimeUnit.SECONDS));
        }
        for (Server s : new Server[] {colocated == null ? null : colocated.server(), netty}) {
            if (s != null) {
                s.shutdownNow();
                assertTrue(s.awaitTermination(10, TimeUnit.SECONDS));
            }
        }
        assertEquals(0, clientMemory.getAllocatedMemory(), "the client's roots all closed");
        assertEquals(0, serverMemory.getAllocatedMemory(), "the server's roots all closed");
        clientMemory.close();
        serverMemory.close();
    }

    /** A question's candidates: ids, scores, 1,536-float vectors and chunks, the question in the schema's metadata. */
    static VectorSchemaRoot batch(BufferAllocator a, String question, int rows) {
        Schema schema = new Schema(List.of(
                Field.notNullable("id", new ArrowType.Int(32, true)),
                Field.notNullable("score", new ArrowType.FloatingPoint(FloatingPointPrecision.SINGLE)),
                new Field("embedding", FieldType.notNullable(new ArrowType.FixedSizeList(DIM)), List.of(new Field("item",
                        FieldType.notNullable(new ArrowType.FloatingPoint(FloatingPointPrecision.SINGLE)), null))),
                Field.notNullable("chunk", ArrowType.Utf8.INSTANCE)), Map.of("question", question));
        VectorSchemaRoot root = VectorSchemaRoot.create(schema, a);
        IntVector ids = (IntVector) root.getVector("id");
        Float4Vector scores = (Float4Vector) root.getVector("score");
        FixedSizeListVector emb = (FixedSizeListVector) root.getVector("embedding");
        VarCharVector chunks = (VarCharVector) root.getVector("chunk");
        ids.allocateNew(rows);
        scores.allocateNew(rows);
        chunks.allocateNew(rows);
        emb.setInitialCapacity(rows);
        emb.allocateNew();
        Float4Vector items = (Float4Vector) emb.getDataVector();
        for (int i = 0; i < rows; i++) {
            ids.set(i, i * 7 + question.length());
            scores.set(i, 1f / (i + 1));
            chunks.setSafe(i, ("chunk " + i + " of " + question).getBytes(StandardCharsets.UTF_8));
            emb.setNotNull(i);
            for (int d = 0; d < DIM; d++) {
                items.setSafe(i * DIM + d, i + d / 1000f);
            }
        }
        items.setValueCount(rows * DIM);
        root.setRowCount(rows);
        return root;
    }

    record Read(String question, int[] ids, float[] firstFloats, String[] chunks) {
    }

    static Read read(VectorSchemaRoot r) {
        int n = r.getRowCount();
        int[] ids = new int[n];
        float[] first = new float[n];
        String[] chunks = new String[n];
        FixedSizeListVector emb = (FixedSizeListVector) r.getVector("embedding");
        Float4Vector items = (Float4Vector) emb.getDataVector();
        for (int i = 0; i < n; i++) {
            ids[i] = ((IntVector) r.getVector("id")).get(i);
            first[i] = items.get(i * DIM + DIM - 1);
            chunks[i] = new String(((VarCharVector) r.getVector("chunk")).get(i), StandardCharsets.UTF_8);
        }
        return new Read(r.getSchema().getCustomMetadata().getOrDefault("question", ""), ids, first, chunks);
    }

    private void assertSame(Read want, Read got) {
        assertEquals(want.question(), got.question());
        assertArrayEquals(want.ids(), got.ids());
        assertArrayEquals(want.firstFloats(), got.firstFloats());
        assertArrayEquals(want.chunks(), got.chunks());
    }

    private Read echo(String question) {
        try (VectorSchemaRoot sent = batch(clientMemory, question, ROWS)) {
            Read want = read(sent);
            try (VectorSchemaRoot back = ClientCalls.blockingUnaryCall(channel, method(clientMarshaller),
                    CallOptions.DEFAULT.withDeadlineAfter(10, TimeUnit.SECONDS), sent)) {
                Read got = read(back);
                assertSame(want, got);
                return got;
            }
        }
    }

    @Test
    void batchesCrossLentAndTheirMemoryComesBack() throws Exception {
        colocated();
        long lent = ColocatedGrpc.messagesLent();
        long noRoom = ColocatedGrpc.lendingNoRoom();
        for (int i = 0; i < 100; i++) { // 60 KiB a batch, each way, through halves of 1 MiB
            echo("question " + i);
        }
        assertEquals(200, ColocatedGrpc.messagesLent() - lent, "every request and reply lent");
        assertEquals(0, ColocatedGrpc.lendingNoRoom() - noRoom, "closed roots gave their memory back");
    }

    @Test
    void overHttp2TheMessageIsAnArrowStreamAnyReaderReads() throws Exception {
        http2();
        long lent = ColocatedGrpc.messagesLent();
        echo("over HTTP/2");
        assertEquals(0, ColocatedGrpc.messagesLent() - lent, "nothing to lend over HTTP/2");
        try (VectorSchemaRoot sent = batch(clientMemory, "as bytes", 3);
             InputStream bytes = clientMarshaller.stream(sent);
             ArrowStreamReader reader = new ArrowStreamReader(bytes, clientMemory)) {
            Read want = read(sent);
            assertTrue(reader.loadNextBatch());
            assertSame(want, read(reader.getVectorSchemaRoot()));
        }
    }

    @Test
    void aReceiverThatKeepsBatchesMakesTheSenderCopyNotWait() throws Exception {
        colocated();
        serverKeeps = true;
        long noRoom = ColocatedGrpc.lendingNoRoom();
        for (int i = 0; i < 40; i++) { // 40 x 60 KiB kept: more than the client's half
            echo("kept " + i);
        }
        assertTrue(ColocatedGrpc.lendingNoRoom() - noRoom > 0, "once the client's half was full, batches went as bytes");
        serverKeeps = false;
        keptByServer.forEach(VectorSchemaRoot::close);
        keptByServer.clear();
        echo("after"); // its reply carries the server's give-backs (sent without a wake) to the client
        long lent = ColocatedGrpc.messagesLent();
        echo("after, lent");
        assertEquals(2, ColocatedGrpc.messagesLent() - lent, "given back, the batches are lent again");
    }

    @Test
    void aSenderThatScribblesOverALentBatchFailsTheReaderNotTheProcess() throws Exception {
        colocated();
        holdServer = new CountDownLatch(1);
        long before = ColocatedGrpc.messagesLent();
        Thread scribbler = Thread.ofPlatform().start(() -> {
            try {
                // once the request is lent (it is in the client's half), overwrite the whole half with
                // ints that grow by a million: every offset, length and validity bit is now the sender's invention
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                while (ColocatedGrpc.messagesLent() == before && System.nanoTime() < deadline) {
                    Thread.onSpinWait();
                }
                MemorySegment half = clientRegion.heap().asSlice(0, HALF);
                for (long at = 0; at < HALF; at += 4) {
                    half.set(java.lang.foreign.ValueLayout.JAVA_INT, at, (int) (at * 250_000));
                }
            } finally {
                holdServer.countDown();
            }
        });
        try (VectorSchemaRoot sent = batch(clientMemory, "scribbled", ROWS)) {
            // the reply may come (the copy the server made from garbage) or the call may fail; either way nothing crashes
            try (VectorSchemaRoot back = ClientCalls.blockingUnaryCall(channel, method(clientMarshaller),
                    CallOptions.DEFAULT.withDeadlineAfter(10, TimeUnit.SECONDS), sent)) {
                back.getRowCount();
            } catch (io.grpc.StatusRuntimeException expected) {
                // the server's handler failed on what it read
            }
        }
        scribbler.join();
        holdServer = null;
        Throwable t = serverRead.get();
        assertTrue(t instanceof RuntimeException, "reading the scribbled batch failed in Arrow's checks: " + t);
        echo("after the scribble"); // the connection, and the process, go on
    }

    /**
     * A marshaller writes and parses a schema once for a run of batches of it: the batches whose
     * schema repeats, changes and comes back arrive with the schema they were sent with, lent and
     * over HTTP/2; a repeated one is the schema the batch before it arrived with.
     */
    @Test
    void batchesWhoseSchemaRepeatsOrChangesArriveWithTheirOwn() throws Exception {
        for (boolean lent : new boolean[] {true, false}) {
            if (lent) {
                colocated();
            } else {
                channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
                http2();
            }
            Schema before = null;
            for (String q : new String[] {"a", "a", "b", "a", "a"}) {
                try (VectorSchemaRoot sent = batch(clientMemory, q, ROWS);
                     VectorSchemaRoot back = ClientCalls.blockingUnaryCall(channel, method(clientMarshaller),
                             CallOptions.DEFAULT.withDeadlineAfter(10, TimeUnit.SECONDS), sent)) {
                    assertSame(read(sent), read(back));
                    assertEquals(sent.getSchema(), back.getSchema(), "lent " + lent);
                    if (before != null && before.equals(back.getSchema())) {
                        org.junit.jupiter.api.Assertions.assertSame(before, back.getSchema(), "parsed once, lent " + lent);
                    }
                    before = back.getSchema();
                }
            }
        }
    }

    /** A dictionary batch (which a batch sent here never carries) is refused, naming what to send instead. */
    @Test
    void aStreamWithADictionaryIsRefusedNamingWhatToSend() throws Exception {
        java.io.ByteArrayOutputStream bytes = new java.io.ByteArrayOutputStream();
        try (VarCharVector words = new VarCharVector("words", clientMemory);
             IntVector codes = new IntVector("codes", FieldType.notNullable(new ArrowType.Int(32, true)), clientMemory)) {
            words.allocateNew(2);
            words.setSafe(0, "yes".getBytes(StandardCharsets.UTF_8));
            words.setSafe(1, "no".getBytes(StandardCharsets.UTF_8));
            words.setValueCount(2);
            org.apache.arrow.vector.types.pojo.DictionaryEncoding encoding =
                    new org.apache.arrow.vector.types.pojo.DictionaryEncoding(1, false, new ArrowType.Int(32, true));
            org.apache.arrow.vector.dictionary.DictionaryProvider.MapDictionaryProvider provider =
                    new org.apache.arrow.vector.dictionary.DictionaryProvider.MapDictionaryProvider();
            provider.put(new org.apache.arrow.vector.dictionary.Dictionary(words, encoding));
            codes.allocateNew(3);
            codes.set(0, 0);
            codes.set(1, 1);
            codes.set(2, 0);
            codes.setValueCount(3);
            Field field = new Field("answer", new FieldType(false, new ArrowType.Int(32, true), encoding), null);
            try (VectorSchemaRoot root = new VectorSchemaRoot(List.of(field), List.of(codes), 3);
                 org.apache.arrow.vector.ipc.ArrowStreamWriter w = new org.apache.arrow.vector.ipc.ArrowStreamWriter(
                         root, provider, java.nio.channels.Channels.newChannel(bytes))) {
                w.start();
                w.writeBatch();
                w.end();
            }
        }
        RuntimeException e = assertThrows(RuntimeException.class,
                () -> serverMarshaller.parse(new ByteArrayInputStream(bytes.toByteArray())));
        assertTrue(e.getMessage().contains("decoded vector"), e.getMessage());
        assertEquals(0, serverMemory.getAllocatedMemory());
    }

    /** A batch whose metadata claims a body longer than the message is refused before any of it is allocated. */
    @Test
    void aBatchLongerThanItsMessageIsRefusedBeforeItIsAllocated() throws Exception {
        byte[] whole;
        try (VectorSchemaRoot sent = batch(clientMemory, "cut", ROWS); InputStream in = clientMarshaller.stream(sent)) {
            whole = in.readAllBytes();
        }
        RuntimeException e = assertThrows(RuntimeException.class, () -> serverMarshaller.parse(
                new ByteArrayInputStream(java.util.Arrays.copyOf(whole, whole.length / 2))));
        assertTrue(e.getMessage().contains("says a body of"), e.getMessage());
        assertEquals(0, serverMemory.getAllocatedMemory());
    }

    @Test
    void aStreamThatIsNotAnArrowBatchIsRefusedClearly() {
        RuntimeException e = assertThrows(RuntimeException.class,
                () -> serverMarshaller.parse(new ByteArrayInputStream(new byte[] {1, 2, 3, 4, 5, 6, 7, 8})));
        assertTrue(e.getMessage().contains("Arrow IPC"), e.getMessage());
    }
}
