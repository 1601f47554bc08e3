package io.github.sockmap4j.examples;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapStats;
import io.github.sockmap4j.arrow.Embeddings;
import io.github.sockmap4j.netty.grpc.SockmapGrpc;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
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
import org.apache.arrow.vector.VectorUnloader;
import org.apache.arrow.vector.VectorLoader;
import org.apache.arrow.vector.ipc.message.ArrowRecordBatch;
import org.apache.arrow.vector.types.pojo.Schema;

/**
 * Arrow Flight, unchanged, on the sockmap gRPC transport: a client puts embeddings batches into an
 * in-memory Flight server (DoPut), gets them back (DoGet), checks they are equal, and prints what
 * went through the redirect. The only sockmap4j lines are the two {@code SockmapGrpc.configure}.
 *
 * <p>Usage: {@code FlightDemo [batches] [rows] [dim]} (defaults 16, 2048, 768).
 */
@SuppressWarnings("try") // FlightStream.close() declares InterruptedException; main throws Exception
public final class FlightDemo {
    private FlightDemo() {
    }

    /** Keeps what DoPut brings, by descriptor path, and serves it back on DoGet with that ticket. */
    static final class Store extends NoOpFlightProducer {
        final BufferAllocator allocator;
        final Map<String, List<ArrowRecordBatch>> batches = new ConcurrentHashMap<>();
        final Map<String, Schema> schemas = new ConcurrentHashMap<>();

        Store(BufferAllocator allocator) {
            this.allocator = allocator;
        }

        @Override
        public Runnable acceptPut(CallContext context, FlightStream stream, StreamListener<PutResult> ack) {
            return () -> {
                String key = stream.getDescriptor().getPath().get(0);
                List<ArrowRecordBatch> kept = new ArrayList<>();
                schemas.put(key, stream.getSchema());
                while (stream.next()) {
                    kept.add(new VectorUnloader(stream.getRoot()).getRecordBatch());
                }
                batches.put(key, kept);
                ack.onCompleted();
            };
        }

        @Override
        public void getStream(CallContext context, Ticket ticket, ServerStreamListener listener) {
            String key = new String(ticket.getBytes(), java.nio.charset.StandardCharsets.UTF_8);
            try (VectorSchemaRoot root = VectorSchemaRoot.create(schemas.get(key), allocator)) {
                listener.start(root);
                VectorLoader loader = new VectorLoader(root);
                for (ArrowRecordBatch b : batches.get(key)) {
                    loader.load(b);
                    listener.putNext();
                }
                listener.completed();
            }
        }

        void clear() {
            batches.values().forEach(list -> list.forEach(ArrowRecordBatch::close));
            batches.clear();
        }
    }

    public static void main(String[] args) throws Exception {
        int batches = args.length > 0 ? Integer.parseInt(args[0]) : 16;
        int rows = args.length > 1 ? Integer.parseInt(args[1]) : 2048;
        int dim = args.length > 2 ? Integer.parseInt(args[2]) : 768;
        Sockmap sockmap = Sockmap.global();
        System.out.println(sockmap.isActive() ? "fast path: active"
                : "fast path: off (" + sockmap.unavailabilityCause() + "); Flight runs over plain TCP");
        ExecutorService exec = Executors.newCachedThreadPool();
        try (BufferAllocator allocator = new RootAllocator()) {
            Store store = new Store(allocator);
            Server server = SockmapGrpc.configure(NettyServerBuilder.forAddress(
                            new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)))
                    .maxInboundMessageSize(256 << 20)
                    .addService(FlightGrpcUtils.createFlightService(allocator, store, null, exec))
                    .build().start();
            ManagedChannel channel = SockmapGrpc.configure(NettyChannelBuilder.forAddress(
                    InetAddress.getLoopbackAddress().getHostAddress(), server.getPort()))
                    .usePlaintext().maxInboundMessageSize(256 << 20).build();
            try (FlightClient client = FlightGrpcUtils.createFlightClient(allocator, channel);
                    VectorSchemaRoot root = Embeddings.random(allocator, rows, dim, 1, false)) {
                SockmapStats before = sockmap.stats();
                long t0 = System.nanoTime();
                FlightClient.ClientStreamListener put = client.startPut(FlightDescriptor.path("embeddings"), root,
                        new AsyncPutListener());
                for (int i = 0; i < batches; i++) {
                    put.putNext();
                }
                put.completed();
                put.getResult();
                long t1 = System.nanoTime();
                int same = 0;
                try (FlightStream got = client.getStream(new Ticket("embeddings".getBytes(
                        java.nio.charset.StandardCharsets.UTF_8)))) {
                    while (got.next()) {
                        same += root.equals(got.getRoot()) ? 1 : 0;
                    }
                }
                long t2 = System.nanoTime();
                SockmapStats after = sockmap.stats();
                double mib = (double) rows * dim * Float.BYTES * batches / (1 << 20);
                System.out.printf(Locale.ROOT, "DoPut %d batches (%.1f MiB of embeddings) in %.0f ms, DoGet in %.0f ms;"
                        + " %d of %d came back equal%n", batches, mib, (t1 - t0) / 1e6, (t2 - t1) / 1e6, same, batches);
                System.out.printf(Locale.ROOT, "through the redirect: %.1f MiB; passed to TCP: %.1f MiB%n",
                        (after.bytesRedirected() - before.bytesRedirected()) / 1048576.0,
                        (after.bytesPassed() - before.bytesPassed()) / 1048576.0);
                store.clear();
                if (same != batches) {
                    throw new IllegalStateException((batches - same) + " of " + batches + " batches came back different");
                }
            } finally {
                channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
                server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
            }
        } finally {
            exec.shutdownNow();
        }
    }
}
