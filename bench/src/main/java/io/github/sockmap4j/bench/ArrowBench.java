package io.github.sockmap4j.bench;

import io.github.sockmap4j.netty.SockmapNetty;
import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapChannel;
import io.github.sockmap4j.SockmapServerChannel;
import io.github.sockmap4j.arrow.ArrowBridge;
import io.github.sockmap4j.netty.grpc.SockmapGrpc;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.apache.arrow.flight.FlightClient;
import org.apache.arrow.flight.FlightGrpcUtils;
import org.apache.arrow.flight.FlightStream;
import org.apache.arrow.flight.NoOpFlightProducer;
import org.apache.arrow.flight.Ticket;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;

/**
 * 256 MiB of embeddings (16 batches of 2,731 rows of int32 id + 1536 float32) a round, three ways
 * in interleaved rounds of one run: the Arrow bridge over {@link SockmapChannel} on the fast path,
 * Arrow Flight DoGet on stock grpc-netty (epoll), and Flight DoGet on the sockmap gRPC transport.
 * Prints median throughput, ratios to stock Flight, and the reading thread's heap allocation per
 * batch on the bridge. In either {@link Topology} ({@code -Dtopology=}; on the node each client
 * dials a Service VIP: the stock path through the node's DNAT, the fast paths translated at connect).
 *
 * <p>Usage: {@code ArrowBench [rounds]} (default 5).
 */
@SuppressWarnings("try") // FlightStream.close() declares InterruptedException; callers throw Exception
public final class ArrowBench {
    private ArrowBench() {
    }

    static final int DIM = 1536;
    static final int ROWS = 2731;
    static final int BATCHES = 16;
    /** The servers' ports on the node: the bridge at the default bound, lifted, Flight stock, Flight sockmap. */
    static final int BRIDGE = 47400;
    static final int BRIDGE_UNBOUNDED = 47401;
    static final int FLIGHT_STOCK = 47402;
    static final int FLIGHT_FAST = 47403;

    static VectorSchemaRoot embeddings(BufferAllocator a) {
        return io.github.sockmap4j.arrow.Embeddings.random(a, ROWS, DIM, 1, false);
    }

    static long payload(VectorSchemaRoot root) {
        long n = 0;
        for (var v : root.getFieldVectors()) {
            n += v.getBufferSize();
        }
        return n * BATCHES;
    }

    /** Bytes per second through the bridge; {@code heapPerBatch[0]} gets the reader's allocation per batch. */
    static double bridge(Sockmap sockmap, Topology at, boolean unbounded, VectorSchemaRoot root,
            BufferAllocator allocator, ExecutorService pool, long[] heapPerBatch) throws Exception {
        SockmapChannel w;
        SockmapChannel r;
        io.github.sockmap4j.OptIn lift = null;
        int nodePort = unbounded ? BRIDGE_UNBOUNDED : BRIDGE;
        try (SockmapServerChannel server = at.server(sockmap::openServerChannel)) {
            server.bind(at.bind(nodePort));
            InetSocketAddress bound = (InetSocketAddress) server.getLocalAddress();
            if (unbounded) {
                lift = StreamBench.liftBound(sockmap, bound);
            }
            w = at.client(sockmap::openChannel);
            w.connect(at.dial(nodePort, bound));
            r = (SockmapChannel) server.accept();
        }
        try (w; r; AutoCloseable l = lift) {
            long t0 = System.nanoTime();
            CompletableFuture<Void> sent = CompletableFuture.runAsync(() -> {
                try (ArrowStreamWriter writer = ArrowBridge.writer(root, w)) {
                    writer.start();
                    for (int i = 0; i < BATCHES; i++) {
                        writer.writeBatch();
                    }
                    writer.end();
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            }, pool);
            var mx = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
            long rows = 0;
            long heap0 = 0;
            int batches = 0;
            try (ArrowStreamReader reader = ArrowBridge.reader(r, allocator)) {
                reader.getVectorSchemaRoot();
                heap0 = mx.getCurrentThreadAllocatedBytes();
                while (reader.loadNextBatch()) {
                    rows += reader.getVectorSchemaRoot().getRowCount();
                    batches++;
                }
                heapPerBatch[0] = (mx.getCurrentThreadAllocatedBytes() - heap0) / Math.max(1, batches);
            }
            sent.get(120, TimeUnit.SECONDS);
            double secs = (System.nanoTime() - t0) / 1e9;
            check(rows);
            return payload(root) / secs;
        }
    }

    static void check(long rows) {
        if (rows != (long) ROWS * BATCHES) {
            throw new IllegalStateException("received " + rows + " rows, sent " + (long) ROWS * BATCHES);
        }
    }

    /** Bytes per second through one Flight DoGet of every batch. */
    static double flight(boolean fast, Topology at, EventLoopGroup group, VectorSchemaRoot root,
            BufferAllocator allocator, ExecutorService pool) throws Exception {
        NoOpFlightProducer producer = new NoOpFlightProducer() {
            @Override
            public void getStream(CallContext context, Ticket ticket, ServerStreamListener listener) {
                listener.start(root);
                for (int i = 0; i < BATCHES; i++) {
                    listener.putNext();
                }
                listener.completed();
            }
        };
        int nodePort = fast ? FLIGHT_FAST : FLIGHT_STOCK;
        NettyServerBuilder sb = NettyServerBuilder.forAddress(at.bind(nodePort))
                .maxInboundMessageSize(64 << 20)
                .withOption(io.netty.channel.ChannelOption.SO_REUSEADDR, true)
                .addService(FlightGrpcUtils.createFlightService(allocator, producer, null, pool));
        Server server;
        if (fast) {
            SockmapGrpc.configure(sb, group, group).channelFactory(at.in(1, SockmapNetty.serverChannelFactory()));
        } else {
            sb.channelFactory(at.in(1, EpollServerSocketChannel::new)).bossEventLoopGroup(group)
                    .workerEventLoopGroup(group);
        }
        server = sb.build().start();
        InetSocketAddress dial = at.dial(nodePort, (InetSocketAddress) server.getListenSockets().getFirst());
        NettyChannelBuilder cb = NettyChannelBuilder.forAddress(dial.getHostString(), dial.getPort());
        if (fast) {
            SockmapGrpc.configure(cb, group).channelFactory(at.in(0, SockmapNetty.socketChannelFactory()));
        } else {
            cb.channelFactory(at.in(0, EpollSocketChannel::new)).eventLoopGroup(group);
        }
        ManagedChannel ch = cb.usePlaintext().maxInboundMessageSize(64 << 20).build();
        try (FlightClient client = FlightGrpcUtils.createFlightClient(allocator, ch)) {
            long t0 = System.nanoTime();
            long rows = 0;
            try (FlightStream stream = client.getStream(new Ticket(new byte[] {1}))) {
                while (stream.next()) {
                    rows += stream.getRoot().getRowCount();
                }
            }
            double secs = (System.nanoTime() - t0) / 1e9;
            check(rows);
            return payload(root) / secs;
        } finally {
            ch.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
            server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
        }
    }

    static String rounds(double[] v) {
        StringBuilder b = new StringBuilder();
        for (double x : v) {
            b.append(String.format(Locale.ROOT, "%.2f ", x));
        }
        return b.toString().trim();
    }

    public static void main(String[] args) throws Exception {
        BenchRun run = BenchRun.of("ArrowBench [rounds]", args);
        // Flight over gRPC's HTTP/2 on the fast path, as measured before the co-located transport (on by default)
        System.setProperty(io.github.sockmap4j.colocated.grpc.ColocatedGrpc.SWITCH, "false");
        int rounds = run.intArg(0, 5);
        Sockmap sockmap = Sockmap.global();
        if (!sockmap.isActive()) {
            System.err.println("The fast path is off: " + sockmap.unavailabilityCause());
            return;
        }
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(2, EpollIoHandler.newFactory());
        ExecutorService pool = Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r, "arrow-bench");
            t.setDaemon(true);
            return t;
        });
        try (Topology at = Topology.fromProperty(sockmap.config().pinDirectory());
             BufferAllocator allocator = new RootAllocator(); VectorSchemaRoot root = embeddings(allocator)) {
            at.service(BRIDGE, true);
            at.service(BRIDGE_UNBOUNDED, true);
            at.service(FLIGHT_STOCK, false);
            at.service(FLIGHT_FAST, true);
            double[][] gbps = new double[4][rounds];
            long[] heap = new long[rounds];
            long[] h = new long[1];
            for (int warm = 0; warm < 3; warm++) { // discarded passes of each for the JIT
                bridge(sockmap, at, warm == 1, root, allocator, pool, h);
                flight(false, at, group, root, allocator, pool);
                flight(true, at, group, root, allocator, pool);
            }
            long redirected = 0;
            long passed = 0;
            long boundHits = 0;
            for (int r = 0; r < rounds; r++) {
                gbps[0][r] = flight(false, at, group, root, allocator, pool) / 1e9;
                io.github.sockmap4j.SockmapStats before = sockmap.stats();
                gbps[1][r] = bridge(sockmap, at, false, root, allocator, pool, h) / 1e9;
                io.github.sockmap4j.SockmapStats after = sockmap.stats();
                redirected += after.bytesRedirected() - before.bytesRedirected();
                passed += after.bytesPassed() - before.bytesPassed();
                boundHits += after.boundHits() - before.boundHits();
                heap[r] = h[0];
                gbps[2][r] = flight(true, at, group, root, allocator, pool) / 1e9;
                gbps[3][r] = bridge(sockmap, at, true, root, allocator, pool, h) / 1e9;
            }
            System.out.printf(Locale.ROOT, "sockmap4j Arrow benchmark, topology %s: %d rounds of %.1f MiB (%d batches of "
                    + "%d x %d float32), %s%n", at.name(), rounds, payload(root) / 1048576.0, BATCHES, ROWS,
                    DIM, BenchRun.machine());
            if (at.isNode()) {
                System.out.println(at.describe());
            }
            double stock = Medians.of(gbps[0]);
            System.out.printf(Locale.ROOT, "%-44s %8s %8s   %s%n", "path", "GB/s", "ratio", "rounds GB/s");
            String[] names = {"Flight DoGet, stock grpc-netty (epoll)", "Arrow bridge, default bound (credit)",
                    "Flight DoGet, sockmap gRPC transport", "Arrow bridge, in-flight bound lifted"};
            for (int p = 0; p < 4; p++) {
                double m = Medians.of(gbps[p]);
                System.out.printf(Locale.ROOT, "%-44s %8.2f %8.2f   %s%n", names[p], m, m / stock, rounds(gbps[p]));
            }
            System.out.printf(Locale.ROOT, "bridge at the default bound: %.4f%% of its bytes redirected (%d B), "
                    + "%d B by TCP, %d bound hits%n", 100.0 * redirected / Math.max(1, redirected + passed), redirected,
                    passed, boundHits);
            System.out.printf(Locale.ROOT, "bridge reader heap allocated per batch: median %.0f B (rounds: %s)%n",
                    Medians.of(heap), java.util.Arrays.toString(heap));
            System.out.println("medians over rounds; ratio = path / stock Flight (higher is faster)");
        } finally {
            SockmapNetty.shutdown(java.time.Duration.ofSeconds(10), group);
            pool.shutdownNow();
        }
    }
}
