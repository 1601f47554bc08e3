package io.github.sockmap4j.arrow;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.SockmapChannel;
import io.github.sockmap4j.SockmapServerChannel;
import io.github.sockmap4j.testsupport.TestKernel;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.channels.Channels;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Arrow batches over a SockmapChannel pair on the fast path; every allocator closes clean. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@Tag("kernel")
class ArrowBridgeTest {
    TestKernel kernel;
    final java.util.concurrent.ExecutorService pool = Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "arrow-peer");
        t.setDaemon(true);
        return t;
    });

    @BeforeAll
    void start() throws IOException {
        kernel = TestKernel.start("arrow");
    }

    @AfterAll
    void stop() throws IOException {
        pool.shutdownNow();
        kernel.close();
    }

    /** An embeddings batch: id, text (with nulls), and a FixedSizeList of float32 of {@code dim}. */
    static VectorSchemaRoot embeddings(BufferAllocator a, int rows, int dim, long seed) {
        return Embeddings.random(a, rows, dim, seed, true);
    }

    record Pair(SockmapChannel writer, SockmapChannel reader) implements AutoCloseable {
        @Override
        public void close() throws IOException {
            writer.close();
            reader.close();
        }
    }

    Pair pair() throws IOException {
        SockmapServerChannel server = kernel.sockmap.openServerChannel();
        try (server) {
            server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0));
            SockmapChannel w = kernel.sockmap.openChannel();
            w.connect(server.getLocalAddress());
            return new Pair(w, (SockmapChannel) server.accept());
        }
    }

    /** Writes a stream of {@code batches} copies of {@code root} to {@code out} on the pool. */
    CompletableFuture<Void> sendAsync(VectorSchemaRoot root,
            org.apache.arrow.vector.dictionary.DictionaryProvider dictionaries,
            java.nio.channels.WritableByteChannel out, int batches) {
        return CompletableFuture.runAsync(() -> {
            try (ArrowStreamWriter writer = ArrowBridge.writer(root, dictionaries, out)) {
                writer.start();
                for (int i = 0; i < batches; i++) {
                    writer.writeBatch();
                }
                writer.end();
            } catch (IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        }, pool);
    }

    /** Sends {@code batches} copies of {@code root} and returns what the reader received, as IPC bytes. */
    byte[] roundTrip(VectorSchemaRoot root, int batches, BufferAllocator readAllocator) throws Exception {
        try (Pair p = pair()) {
            CompletableFuture<Void> w = sendAsync(root, null, p.writer(), batches);
            ByteArrayOutputStream again = new ByteArrayOutputStream();
            try (ArrowStreamReader reader = ArrowBridge.reader(p.reader(), readAllocator)) {
                VectorSchemaRoot got = reader.getVectorSchemaRoot();
                int n = 0;
                try (ArrowStreamWriter echo = new ArrowStreamWriter(got, null, Channels.newChannel(again))) {
                    echo.start();
                    while (reader.loadNextBatch()) {
                        assertEquals(root.getRowCount(), got.getRowCount());
                        assertTrue(root.equals(got), "batch " + n + " differs");
                        echo.writeBatch();
                        n++;
                    }
                    echo.end();
                }
                assertEquals(batches, n);
            }
            w.get(60, TimeUnit.SECONDS);
            assertTrue(p.writer().isAccelerated() || kernel.sockmap.stats().bytesRedirected() > 0,
                    "the fast path carried it");
            return again.toByteArray();
        }
    }

    static byte[] arrowBytes(VectorSchemaRoot root, int batches) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (ArrowStreamWriter w = new ArrowStreamWriter(root, null, Channels.newChannel(out))) {
            w.start();
            for (int i = 0; i < batches; i++) {
                w.writeBatch();
            }
            w.end();
        }
        return out.toByteArray();
    }

    @ParameterizedTest
    @ValueSource(ints = {384, 768, 1536})
    void embeddingBatchesArriveIdenticalAndByteForByte(int dim) throws Exception {
        try (BufferAllocator a = new RootAllocator(); VectorSchemaRoot root = embeddings(a, 500, dim, dim)) {
            byte[] received = roundTrip(root, 3, a);
            assertArrayEquals(arrowBytes(root, 3), received, "same IPC bytes as Arrow's own writer");
        }
    }

    @Test
    void emptyBatches() throws Exception {
        try (BufferAllocator a = new RootAllocator(); VectorSchemaRoot root = embeddings(a, 0, 8, 1)) {
            roundTrip(root, 2, a);
        }
    }

    @Test
    void dictionaryEncodedColumnsDecodeToWhatWasSent() throws Exception {
        try (BufferAllocator a = new RootAllocator();
             org.apache.arrow.vector.VarCharVector words = new org.apache.arrow.vector.VarCharVector("words", a);
             org.apache.arrow.vector.VarCharVector raw = new org.apache.arrow.vector.VarCharVector("topic", a)) {
            String[] vocabulary = {"retrieval", "rerank", "embed", "généré"};
            words.allocateNew();
            for (int i = 0; i < vocabulary.length; i++) {
                words.setSafe(i, vocabulary[i].getBytes(java.nio.charset.StandardCharsets.UTF_8));
            }
            words.setValueCount(vocabulary.length);
            raw.allocateNew();
            int rows = 1000;
            for (int i = 0; i < rows; i++) {
                if (i % 9 == 4) {
                    raw.setNull(i);
                } else {
                    raw.setSafe(i, vocabulary[(i * 7) % vocabulary.length].getBytes(java.nio.charset.StandardCharsets.UTF_8));
                }
            }
            raw.setValueCount(rows);
            org.apache.arrow.vector.dictionary.Dictionary dictionary = new org.apache.arrow.vector.dictionary.Dictionary(
                    words, new org.apache.arrow.vector.types.pojo.DictionaryEncoding(1L, false, null));
            var provider = new org.apache.arrow.vector.dictionary.DictionaryProvider.MapDictionaryProvider(dictionary);
            try (org.apache.arrow.vector.FieldVector encoded = (org.apache.arrow.vector.FieldVector)
                         org.apache.arrow.vector.dictionary.DictionaryEncoder.encode(raw, dictionary);
                 VectorSchemaRoot root = new VectorSchemaRoot(List.of(encoded.getField()), List.of(encoded), rows);
                 Pair p = pair()) {
                CompletableFuture<Void> w = sendAsync(root, provider, p.writer(), 1);
                try (ArrowStreamReader r = ArrowBridge.reader(p.reader(), a)) {
                    assertTrue(r.loadNextBatch());
                    org.apache.arrow.vector.FieldVector got = r.getVectorSchemaRoot().getVector(0);
                    long id = got.getField().getDictionary().getId();
                    try (org.apache.arrow.vector.ValueVector decoded = org.apache.arrow.vector.dictionary.DictionaryEncoder
                            .decode(got, r.getDictionaryVectors().get(id))) {
                        assertEquals(rows, decoded.getValueCount());
                        for (int i = 0; i < rows; i++) {
                            assertEquals(raw.getObject(i), decoded.getObject(i), "row " + i);
                        }
                    }
                    // Read the end of the stream too: a reader closed before it would leave the
                    // writer's last bytes unread, and its send fails with EPIPE.
                    assertFalse(r.loadNextBatch(), "end of stream");
                }
                w.get(30, TimeUnit.SECONDS);
            }
        }
    }

    @Test
    void aBatchOf256MiB() throws Exception {
        // 256 MiB of embeddings in one batch (1536 floats x 43,691 rows), plus ids and text.
        try (BufferAllocator a = new RootAllocator(); VectorSchemaRoot root = embeddings(a, 43_691, 1536, 7)) {
            roundTrip(root, 1, a);
        }
    }

    /** At most a few bytes per call, so Arrow's reader and writer see every partial transfer. */
    record Dribble(java.nio.channels.ByteChannel in, Random r) implements java.nio.channels.ByteChannel {
        int step(java.nio.ByteBuffer b, boolean write) throws IOException {
            int limit = b.limit();
            b.limit(Math.min(limit, b.position() + 1 + r.nextInt(1500)));
            try {
                return write ? in.write(b) : in.read(b);
            } finally {
                b.limit(limit);
            }
        }

        @Override
        public int read(java.nio.ByteBuffer dst) throws IOException {
            return step(dst, false);
        }

        @Override
        public int write(java.nio.ByteBuffer src) throws IOException {
            return step(src, true);
        }

        @Override
        public boolean isOpen() {
            return in.isOpen();
        }

        @Override
        public void close() throws IOException {
            in.close();
        }
    }

    @Test
    void partialReadsAndWritesOfEveryBatchAddUpToTheSameBatches() throws Exception {
        try (BufferAllocator a = new RootAllocator(); VectorSchemaRoot root = embeddings(a, 300, 768, 11);
             Pair p = pair()) {
            CompletableFuture<Void> w = sendAsync(root, null, new Dribble(p.writer(), new Random(1)), 3);
            try (ArrowStreamReader r = ArrowBridge.reader(new Dribble(p.reader(), new Random(2)), a)) {
                for (int i = 0; i < 3; i++) {
                    assertTrue(r.loadNextBatch(), "batch " + i);
                    assertTrue(root.equals(r.getVectorSchemaRoot()), "batch " + i + " differs");
                }
                assertTrue(!r.loadNextBatch(), "end of stream");
            }
            w.get(60, TimeUnit.SECONDS);
        }
    }

    @Test
    void arrowsOwnReaderReadsWhatTheBridgeWrote() throws Exception {
        try (BufferAllocator a = new RootAllocator(); VectorSchemaRoot root = embeddings(a, 100, 384, 2);
             Pair p = pair()) {
            CompletableFuture<Void> w = CompletableFuture.runAsync(() -> {
                try {
                    ArrowBridge.writeStream(root, p.writer());
                } catch (IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            }, pool);
            try (ArrowStreamReader r = new ArrowStreamReader(Channels.newInputStream(p.reader()), a)) {
                assertTrue(r.loadNextBatch());
                assertTrue(root.equals(r.getVectorSchemaRoot()));
                // Read to the end-of-stream marker before closing: closing earlier races the
                // writer's last write, which then fails with EPIPE.
                assertFalse(r.loadNextBatch());
            }
            w.get(30, TimeUnit.SECONDS);
        }
    }

    @Test
    void thePeerClosingMidBatchIsAClearErrorAndLeaksNothing() throws Exception {
        try (BufferAllocator a = new RootAllocator(); VectorSchemaRoot root = embeddings(a, 2000, 768, 3)) {
            byte[] all = arrowBytes(root, 1);
            try (Pair p = pair()) {
                p.writer().write(java.nio.ByteBuffer.wrap(all, 0, all.length / 2));
                p.writer().close();
                try (BufferAllocator readA = a.newChildAllocator("reader", 0, Long.MAX_VALUE);
                     ArrowStreamReader r = ArrowBridge.reader(p.reader(), readA)) {
                    IOException e = org.junit.jupiter.api.Assertions.assertThrows(IOException.class, r::loadNextBatch);
                    assertTrue(e.getMessage() != null, String.valueOf(e));
                }
            }
        }
    }

    @Test
    void heapAllocatedPerBatchDoesNotGrowWithTheBatch() throws Exception {
        com.sun.management.ThreadMXBean mx = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        long[] perBatch = new long[2];
        int[] rows = {100, 4000};
        for (int k = 0; k < 2; k++) {
            try (BufferAllocator a = new RootAllocator(); VectorSchemaRoot root = embeddings(a, rows[k], 768, k);
                 Pair p = pair()) {
                int batches = 20;
                CompletableFuture<Void> w = sendAsync(root, null, p.writer(), batches);
                try (ArrowStreamReader r = ArrowBridge.reader(p.reader(), a)) {
                    r.loadNextBatch(); // warm-up batch
                    long tid = Thread.currentThread().threadId();
                    long before = mx.getThreadAllocatedBytes(tid);
                    int n = 0;
                    while (r.loadNextBatch()) {
                        n++;
                    }
                    perBatch[k] = (mx.getThreadAllocatedBytes(tid) - before) / Math.max(1, n);
                }
                w.get(60, TimeUnit.SECONDS);
            }
        }
        long bodyBytesLarge = 4000L * 768 * 4;
        System.out.printf("arrow bridge: heap allocated per received batch: %d B at 100 rows, %d B at 4000 rows "
                + "(body %d B)%n", perBatch[0], perBatch[1], bodyBytesLarge);
        assertTrue(perBatch[1] < 64 << 10, "heap per batch " + perBatch[1] + " B");
        assertTrue(perBatch[1] < bodyBytesLarge / 100, "bodies do not pass through the heap");
    }
}
