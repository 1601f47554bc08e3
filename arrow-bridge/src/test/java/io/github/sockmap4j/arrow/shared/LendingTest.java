package io.github.sockmap4j.arrow.shared;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.arrow.ArrowBridge;
import io.github.sockmap4j.arrow.Embeddings;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The lending agreement over a TCP connection on loopback (no root): lent where both ends may,
 * and where they may not (a heap too large, a proxy between them, a peer of another protocol),
 * each end told why and the connection left as it was, an Arrow stream then flowing over it.
 */
class LendingTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(5);
    private ServerSocketChannel server;
    private BufferAllocator allocator;
    private final List<AutoCloseable> toClose = new ArrayList<>();
    /** The other ends and the relay run here: the common pool has one thread on two CPUs. */
    private final java.util.concurrent.ExecutorService others = java.util.concurrent.Executors.newCachedThreadPool();

    @BeforeEach
    void listen() throws IOException {
        server = ServerSocketChannel.open().bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
        allocator = new RootAllocator();
    }

    @AfterEach
    void nothingLeft() throws Exception {
        for (int i = toClose.size() - 1; i >= 0; i--) {
            toClose.get(i).close();
        }
        others.shutdownNow();
        server.close();
        allocator.close();
        assertEquals(List.of(), leftOver(), "a region or a listener of the agreement is left");
    }

    /** This process's lending regions (descriptors, mappings) and the agreement's listeners. */
    private static List<String> leftOver() throws IOException {
        List<String> found = new ArrayList<>(Mapped.regions("sm4j-arrow-lending"));
        Files.readAllLines(Path.of("/proc/net/unix")).stream().filter(l -> l.contains("@sm4j-arrow-")).forEach(found::add);
        return found;
    }

    private SocketChannel[] pair(InetSocketAddress to) throws IOException {
        SocketChannel c = SocketChannel.open(to);
        SocketChannel s = server.accept();
        toClose.add(c);
        toClose.add(s);
        return new SocketChannel[] {c, s};
    }

    private InetSocketAddress address() throws IOException {
        return (InetSocketAddress) server.getLocalAddress();
    }

    @Test
    void twoEndsOfOneUserLendABatchAndTheConnectionStaysTheLifeline() throws Exception {
        SocketChannel[] p = pair(address());
        CompletableFuture<Lending.Agreed<BatchReceiver>> accepted = CompletableFuture.supplyAsync(() -> {
            try {
                return Lending.accept(p[1], 16L << 20, TIMEOUT);
            } catch (IOException e) {
                throw new RuntimeException(e);
            }
        }, others);
        Lending.Agreed<BatchSender> offered = Lending.offer(p[0], 8L << 20, TIMEOUT);
        Lending.Agreed<BatchReceiver> got = accepted.get(10, TimeUnit.SECONDS);
        assertTrue(offered.lent(), offered.why());
        assertTrue(got.lent(), got.why());
        try (BatchSender sender = offered.end(); BatchReceiver receiver = got.end();
             VectorSchemaRoot root = Embeddings.random(sender.allocator(), 100, 32, 5, true)) {
            sender.send(root);
            try (VectorSchemaRoot in = receiver.receive(allocator, TIMEOUT)) {
                assertNotNull(in);
                assertEquals(root.contentToTSVString(), in.contentToTSVString());
            }
        }
    }

    /** Both ends' agreements, run at once; then an Arrow stream from p[0] to p[1] over the same connection. */
    private void bothFallBackAndTheStreamFlows(SocketChannel sending, SocketChannel receiving, long heap, long maxHeap,
                                               Lending.Reason reason) throws Exception {
        CompletableFuture<Lending.Agreed<BatchReceiver>> accepted = CompletableFuture.supplyAsync(() -> {
            try {
                return Lending.accept(receiving, maxHeap, TIMEOUT);
            } catch (IOException e) {
                throw new RuntimeException(e);
            }
        }, others);
        Lending.Agreed<BatchSender> offered = Lending.offer(sending, heap, TIMEOUT);
        Lending.Agreed<BatchReceiver> got = accepted.get(10, TimeUnit.SECONDS);
        assertFalse(offered.lent());
        assertFalse(got.lent());
        assertEquals(reason, offered.reason(), offered.why());
        assertEquals(reason, got.reason(), got.why());
        try (VectorSchemaRoot root = Embeddings.random(allocator, 50, 8, 6, true)) {
            CompletableFuture<String> read = CompletableFuture.supplyAsync(() -> {
                try (ArrowStreamReader r = ArrowBridge.reader(receiving, allocator)) {
                    assertTrue(r.loadNextBatch());
                    return r.getVectorSchemaRoot().contentToTSVString();
                } catch (IOException e) {
                    throw new RuntimeException(e);
                }
            }, others);
            try (ArrowStreamWriter w = ArrowBridge.writer(root, sending)) {
                w.start();
                w.writeBatch();
                w.end();
            }
            assertEquals(root.contentToTSVString(), read.get(10, TimeUnit.SECONDS), "the stream after the agreement");
        }
    }

    @Test
    void aHeapLargerThanTheReceiverMapsLendsNothingAndTheStreamFlows() throws Exception {
        SocketChannel[] p = pair(address());
        bothFallBackAndTheStreamFlows(p[0], p[1], 8L << 20, 1L << 20, Lending.Reason.TOO_LARGE);
    }

    @Test
    void aProxyBetweenTheEndsLendsNothingAndTheStreamFlows() throws Exception {
        try (ServerSocketChannel relay = ServerSocketChannel.open()
                .bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0))) {
            CompletableFuture<Void> relaying = CompletableFuture.runAsync(() -> {
                try (SocketChannel in = relay.accept(); SocketChannel out = SocketChannel.open(address())) {
                    CompletableFuture<Void> back = CompletableFuture.runAsync(() -> copy(out, in), others);
                    copy(in, out);
                    back.join();
                } catch (IOException e) {
                    throw new RuntimeException(e);
                }
            }, others);
            SocketChannel c = SocketChannel.open(relay.getLocalAddress());
            SocketChannel s = server.accept();
            toClose.add(c);
            toClose.add(s);
            bothFallBackAndTheStreamFlows(c, s, 8L << 20, 16L << 20, Lending.Reason.PROXIED);
            relaying.get(10, TimeUnit.SECONDS); // the stream's ends closed both connections
        }
    }

    private static void copy(SocketChannel from, SocketChannel to) {
        ByteBuffer b = ByteBuffer.allocate(8192);
        try {
            while (from.read(b) >= 0) {
                b.flip();
                while (b.hasRemaining()) {
                    to.write(b);
                }
                b.clear();
            }
            to.shutdownOutput();
        } catch (IOException ended) {
            // one side went: the relay ends
        }
    }

    @Test
    void aPeerOfAnotherProtocolIsToldSoAndTheSenderFallsBack() throws Exception {
        SocketChannel[] p = pair(address());
        CompletableFuture<Lending.Agreed<BatchSender>> offered = CompletableFuture.supplyAsync(() -> {
            try {
                return Lending.offer(p[0], 8L << 20, TIMEOUT);
            } catch (IOException e) {
                throw new RuntimeException(e);
            }
        }, others);
        ByteBuffer hello = ByteBuffer.allocate(64);
        p[1].read(hello);
        assertTrue(new String(hello.array(), 0, hello.position(), StandardCharsets.US_ASCII).startsWith("SM4J-ARROW-LEND 1 "));
        p[1].write(ByteBuffer.wrap("HTTP/1.1 400 Bad Request\n".getBytes(StandardCharsets.US_ASCII)));
        Lending.Agreed<BatchSender> got = offered.get(10, TimeUnit.SECONDS);
        assertFalse(got.lent());
        assertEquals(Lending.Reason.OTHER_VERSION, got.reason(), got.why());

        SocketChannel[] q = pair(address());
        q[0].write(ByteBuffer.wrap("GET / HTTP/1.1\n".getBytes(StandardCharsets.US_ASCII)));
        Lending.Agreed<BatchReceiver> refused = Lending.accept(q[1], 16L << 20, TIMEOUT);
        assertEquals(Lending.Reason.OTHER_VERSION, refused.reason(), refused.why());
    }

    @Test
    void aPeerThatNeverAnswersEndsTheAgreementAtItsTimeWithTheConnectionClosed() throws Exception {
        SocketChannel[] p = pair(address());
        IOException e = assertThrows(IOException.class, () -> Lending.offer(p[0], 8L << 20, Duration.ofMillis(300)));
        assertTrue(e.getMessage().contains("did not answer"), e.getMessage());
        assertFalse(p[0].isOpen(), "the connection's bytes can no longer be told apart: it is closed");
    }
}
