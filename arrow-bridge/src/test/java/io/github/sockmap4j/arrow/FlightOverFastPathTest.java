package io.github.sockmap4j.arrow;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapStats;
import io.github.sockmap4j.netty.grpc.SockmapGrpc;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.apache.arrow.flight.AsyncPutListener;
import org.apache.arrow.flight.FlightClient;
import org.apache.arrow.flight.FlightDescriptor;
import org.apache.arrow.flight.FlightGrpcUtils;
import org.apache.arrow.flight.FlightStream;
import org.apache.arrow.flight.NoOpFlightProducer;
import org.apache.arrow.flight.PutResult;
import org.apache.arrow.flight.Ticket;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Arrow Flight (gRPC-Java underneath) on the sockmap Netty transport: DoGet and DoPut of embeddings
 * batches arrive intact and the bytes go through the redirect, not the TCP stack.
 */
// FlightStream.close() declares InterruptedException; the test methods already throw Exception.
@SuppressWarnings("try")
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@Tag("kernel")
class FlightOverFastPathTest {
    static final int ROWS = 512;
    static final int DIM = 384;
    static final int BATCHES = 8;

    final List<AutoCloseable> closers = new ArrayList<>();
    BufferAllocator allocator;
    FlightClient client;

    /** Serves {@code BATCHES} embeddings batches per DoGet, checks what DoPut brings, echoes DoExchange. */
    final class Producer extends NoOpFlightProducer {
        volatile long putRows;
        volatile boolean putEqual = true;

        @Override
        public void getStream(CallContext context, Ticket ticket, ServerStreamListener listener) {
            long seed = Long.parseLong(new String(ticket.getBytes(), java.nio.charset.StandardCharsets.US_ASCII));
            try (VectorSchemaRoot root = ArrowBridgeTest.embeddings(allocator, ROWS, DIM, seed)) {
                listener.start(root);
                for (int i = 0; i < BATCHES; i++) {
                    listener.putNext();
                }
                listener.completed();
            }
        }

        @Override
        public Runnable acceptPut(CallContext context, FlightStream stream, StreamListener<PutResult> ack) {
            return () -> {
                long seed = Long.parseLong(stream.getDescriptor().getPath().get(0));
                try (VectorSchemaRoot want = ArrowBridgeTest.embeddings(allocator, ROWS, DIM, seed)) {
                    long rows = 0;
                    boolean equal = true;
                    while (stream.next()) {
                        rows += stream.getRoot().getRowCount();
                        equal &= want.equals(stream.getRoot());
                    }
                    putRows = rows;
                    putEqual = equal;
                    ack.onCompleted();
                } catch (Exception e) {
                    ack.onError(e);
                }
            };
        }

        /** DoExchange: echoes every batch back as it comes. */
        @Override
        public void doExchange(CallContext context, FlightStream reader, ServerStreamListener writer) {
            boolean started = false;
            while (reader.next()) {
                if (!started) {
                    writer.start(reader.getRoot());
                    started = true;
                }
                writer.putNext();
            }
            writer.completed();
        }
    }

    final Producer producer = new Producer();

    @BeforeEach
    void start() throws Exception {
        allocator = new RootAllocator();
        ExecutorService exec = Executors.newCachedThreadPool();
        closers.add(() -> allocator.close());
        closers.add(exec::shutdownNow);
        Server server = SockmapGrpc.configure(NettyServerBuilder.forAddress(
                        new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0)))
                .maxInboundMessageSize(64 << 20)
                .addService(FlightGrpcUtils.createFlightService(allocator, producer, null, exec))
                .build().start();
        closers.add(() -> server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS));
        ManagedChannel ch = SockmapGrpc.configure(NettyChannelBuilder.forAddress("127.0.0.1", server.getPort()))
                .usePlaintext().maxInboundMessageSize(64 << 20).build();
        closers.add(() -> ch.shutdownNow().awaitTermination(10, TimeUnit.SECONDS));
        client = FlightGrpcUtils.createFlightClient(allocator, ch);
        closers.add(client);
    }

    @AfterEach
    void close() throws Exception {
        for (int i = closers.size() - 1; i >= 0; i--) {
            closers.get(i).close();
        }
    }

    static long batchBytes() {
        return (long) ROWS * DIM * Float.BYTES;
    }

    /**
     * The redirect carried at least one batch's worth of the exchange. Not all of it: while the
     * in-flight bound holds a connection back its sends go by TCP (docs/in-flight-bound.md): 5–53%
     * of the bytes in the runs so far. Equality of every batch is checked by each test.
     */
    void assertRedirected(SockmapStats before, long payload) {
        SockmapStats after = Sockmap.global().stats();
        long redirected = after.bytesRedirected() - before.bytesRedirected();
        assertTrue(redirected >= batchBytes(), "redirected " + redirected + " B of a " + payload
                + " B payload: " + before + " -> " + after);
    }

    @Test
    void doGetBringsEveryBatchIntactThroughTheRedirect() throws Exception {
        SockmapStats before = Sockmap.global().stats();
        try (FlightStream stream = client.getStream(new Ticket("42".getBytes(java.nio.charset.StandardCharsets.US_ASCII)));
                VectorSchemaRoot want = ArrowBridgeTest.embeddings(allocator, ROWS, DIM, 42)) {
            int n = 0;
            while (stream.next()) {
                assertTrue(want.equals(stream.getRoot()), "batch " + n + " differs");
                n++;
            }
            assertEquals(BATCHES, n);
        }
        assertRedirected(before, BATCHES * batchBytes());
    }

    @Test
    void doPutDeliversEveryBatchIntactThroughTheRedirect() throws Exception {
        SockmapStats before = Sockmap.global().stats();
        try (VectorSchemaRoot root = ArrowBridgeTest.embeddings(allocator, ROWS, DIM, 7)) {
            FlightClient.ClientStreamListener put = client.startPut(FlightDescriptor.path("7"), root,
                    new AsyncPutListener());
            for (int i = 0; i < BATCHES; i++) {
                put.putNext();
            }
            put.completed();
            put.getResult();
        }
        assertEquals((long) ROWS * BATCHES, producer.putRows);
        assertTrue(producer.putEqual, "a batch arrived different from what was sent");
        assertRedirected(before, BATCHES * batchBytes());
    }

    @Test
    void concurrentGetsShareTheConnection() throws Exception {
        SockmapStats before = Sockmap.global().stats();
        List<java.util.concurrent.CompletableFuture<Integer>> all = new ArrayList<>();
        for (int s = 0; s < 4; s++) {
            long seed = 100 + s;
            all.add(java.util.concurrent.CompletableFuture.supplyAsync(() -> {
                try (FlightStream stream = client.getStream(
                                new Ticket(Long.toString(seed).getBytes(java.nio.charset.StandardCharsets.US_ASCII)));
                        VectorSchemaRoot want = ArrowBridgeTest.embeddings(allocator, ROWS, DIM, seed)) {
                    int n = 0;
                    while (stream.next()) {
                        if (!want.equals(stream.getRoot())) {
                            throw new AssertionError("stream " + seed + " batch " + n + " differs");
                        }
                        n++;
                    }
                    return n;
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            }));
        }
        for (var f : all) {
            assertEquals(BATCHES, f.get(60, TimeUnit.SECONDS));
        }
        assertRedirected(before, 4 * BATCHES * batchBytes());
    }

    @Test
    void doExchangeEchoesEveryBatchThroughTheRedirect() throws Exception {
        SockmapStats before = Sockmap.global().stats();
        try (VectorSchemaRoot root = ArrowBridgeTest.embeddings(allocator, ROWS, DIM, 9);
                FlightClient.ExchangeReaderWriter x = client.doExchange(FlightDescriptor.command(new byte[] {1}))) {
            x.getWriter().start(root);
            for (int i = 0; i < BATCHES; i++) {
                x.getWriter().putNext();
                assertTrue(x.getReader().next(), "echo " + i + " missing");
                assertTrue(root.equals(x.getReader().getRoot()), "echo " + i + " differs");
            }
            x.getWriter().completed();
            assertTrue(!x.getReader().next(), "more echoes than batches");
            x.getResult();
        }
        assertRedirected(before, 2 * BATCHES * batchBytes());
    }
}
