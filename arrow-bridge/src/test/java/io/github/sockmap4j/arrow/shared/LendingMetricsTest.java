package io.github.sockmap4j.arrow.shared;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.arrow.Embeddings;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.junit.jupiter.api.Test;

/**
 * The lending meters and JFR events follow real agreements over a TCP connection on loopback (no
 * root): one that lends a batch, one whose heap the receiver does not map, counted and recorded at
 * both ends, the meters also after a collection when nothing keeps their binder.
 */
class LendingMetricsTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(10);

    /**
     * Runs the collector until it has cleared a weak reference: a meter whose state only a weak
     * reference held would stop following its count after this.
     */
    static void collectGarbage() {
        java.lang.ref.WeakReference<Object> canary = new java.lang.ref.WeakReference<>(new Object());
        long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(10);
        while (canary.get() != null) {
            assertTrue(System.nanoTime() < deadline, "a collection that clears weak references");
            System.gc();
        }
    }

    private static double count(SimpleMeterRegistry r, String name, String outcome) {
        return outcome == null ? r.get(name).functionCounter().count()
                : r.get(name).tag("outcome", outcome).functionCounter().count();
    }

    @Test
    void agreementsBatchesAndBytesAreCounted() throws Exception {
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        new LendingMetrics().bindTo(registry);
        collectGarbage(); // nothing keeps the binder: the meters follow the counts all the same
        String agreements = "sockmap4j.arrow.lending.agreements";
        assertEquals(Lending.Reason.values().length + 1, registry.find(agreements).functionCounters().size());
        double lent = count(registry, agreements, "lent");
        double tooLarge = count(registry, agreements, "too_large");
        double batches = count(registry, "sockmap4j.arrow.lending.batches", null);
        double bytes = count(registry, "sockmap4j.arrow.lending.bytes", null);
        ExecutorService other = Executors.newCachedThreadPool();
        java.nio.file.Path jfr = java.nio.file.Files.createTempFile("sm4j-lending", ".jfr");
        jdk.jfr.Recording recording = new jdk.jfr.Recording();
        recording.enable("io.github.sockmap4j.ArrowLending");
        recording.start();
        try (recording; ServerSocketChannel server = ServerSocketChannel.open()
                .bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
             BufferAllocator allocator = new RootAllocator()) {
            for (long maxHeap : new long[] {16L << 20, 1L << 20}) {
                try (SocketChannel c = SocketChannel.open(server.getLocalAddress()); SocketChannel s = server.accept()) {
                    CompletableFuture<Lending.Agreed<BatchReceiver>> accepted = CompletableFuture.supplyAsync(() -> {
                        try {
                            return Lending.accept(s, maxHeap, TIMEOUT);
                        } catch (java.io.IOException e) {
                            throw new java.io.UncheckedIOException(e);
                        }
                    }, other);
                    Lending.Agreed<BatchSender> offered = Lending.offer(c, 8L << 20, TIMEOUT);
                    Lending.Agreed<BatchReceiver> got = accepted.get(20, TimeUnit.SECONDS);
                    if (offered.lent()) {
                        try (BatchSender sender = offered.end(); BatchReceiver receiver = got.end();
                             VectorSchemaRoot root = Embeddings.random(sender.allocator(), 10, 4, 1, false)) {
                            sender.send(root);
                            receiver.receive(allocator, TIMEOUT).close();
                        }
                    }
                }
            }
            recording.stop();
            recording.dump(jfr);
        } finally {
            other.shutdownNow();
        }
        List<jdk.jfr.consumer.RecordedEvent> events;
        try {
            events = jdk.jfr.consumer.RecordingFile.readAllEvents(jfr);
        } finally {
            java.nio.file.Files.delete(jfr);
        }
        assertEquals(2, events.stream().filter(e -> "LENT".equals(e.getString("outcome"))).count(),
                "JFR has both ends of the first connection lending");
        assertEquals(2, events.stream().filter(e -> "TOO_LARGE".equals(e.getString("outcome"))
                && e.getString("details").contains("at most " + (1L << 20))).count(), "JFR has both ends' reason");
        assertEquals(lent + 2, count(registry, agreements, "lent"), "both ends of the first connection lent");
        assertEquals(tooLarge + 2, count(registry, agreements, "too_large"), "both ends of the second said why not");
        assertEquals(batches + 1, count(registry, "sockmap4j.arrow.lending.batches", null));
        assertTrue(count(registry, "sockmap4j.arrow.lending.bytes", null) > bytes, "the batch's bytes");
        assertTrue(Lending.lastFallback(Lending.Reason.TOO_LARGE).contains("at most " + (1L << 20)),
                Lending.lastFallback(Lending.Reason.TOO_LARGE));
    }
}
