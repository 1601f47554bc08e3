package io.github.sockmap4j.bench;

import io.github.sockmap4j.arrow.grpc.ArrowGrpc;
import io.github.sockmap4j.colocated.grpc.ColocatedGrpc;
import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerServiceDefinition;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ServerCalls;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.HdrHistogram.Histogram;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.Float4Vector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.types.FloatingPointPrecision;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.Schema;

/**
 * Arrow record batches as gRPC messages ({@link ArrowGrpc}'s marshaller) in one JVM, one caller,
 * gRPC's default executors: a unary call sends a batch of one float column, the server reads
 * every value of it in place and answers with a batch of one row. Three kinds, in turns: stock
 * grpc-netty over TCP loopback ({@code tcp}); the co-located transport as the agreement picks it
 * on that TCP connection, the batch copied through its rings ({@code colocated}); the same with
 * each end lending ({@code -Dsockmap4j.colocated.lendBytes}, {@code lent}: the batch's body left
 * in the connection's heap). Each size: CPU of both ends a call (the process's), p50 and p99;
 * medians of rounds, ratios against TCP and against the copied co-located call. No root.
 *
 * <p>Usage: {@code ArrowGrpcBench [ROUNDS] [MIB A SIZE A ROUND] [SIZES]} (default 5 256
 * 65536,1048576,16777216); {@code -Dlend=BYTES} each end's half of the heap (default 64 MiB).
 */
@SuppressWarnings("restricted") // MemorySegment.reinterpret over ArrowBuf memory (--enable-native-access)
public final class ArrowGrpcBench {
    private static final List<String> KINDS = List.of(System.getProperty("kinds", "tcp,colocated,lent").split(","));
    private static final String LEND = System.getProperty("lend", Long.toString(64L << 20));
    private static final int MAX_MESSAGE = 256 << 20;

    private final BufferAllocator allocator = new RootAllocator();
    private final MethodDescriptor<VectorSchemaRoot, VectorSchemaRoot> send;

    private ArrowGrpcBench() {
        MethodDescriptor.Marshaller<VectorSchemaRoot> arrow = ArrowGrpc.marshaller(allocator);
        send = MethodDescriptor.<VectorSchemaRoot, VectorSchemaRoot>newBuilder()
                .setType(MethodDescriptor.MethodType.UNARY).setFullMethodName("bench.Arrow/Send")
                .setRequestMarshaller(arrow).setResponseMarshaller(arrow).build();
    }

    private static final Schema SCHEMA = new Schema(List.of(
            Field.notNullable("v", new ArrowType.FloatingPoint(FloatingPointPrecision.SINGLE))));

    /** A batch of {@code bytes / 4} floats, the caller's to close. */
    private VectorSchemaRoot batch(int bytes) {
        VectorSchemaRoot root = VectorSchemaRoot.create(SCHEMA, allocator);
        Float4Vector v = (Float4Vector) root.getVector(0);
        int n = bytes / Float.BYTES;
        v.allocateNew(n);
        MemorySegment data = segment(v.getDataBuffer(), (long) n * Float.BYTES);
        for (int i = 0; i < n; i++) {
            data.setAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, i, i);
        }
        v.getValidityBuffer().setOne(0L, (n + 7) / 8L);
        v.setValueCount(n);
        root.setRowCount(n);
        return root;
    }

    private static MemorySegment segment(ArrowBuf b, long bytes) {
        return MemorySegment.ofAddress(b.memoryAddress()).reinterpret(bytes);
    }

    /** What the server does with a batch: reads every value where it lies, answers their sum. */
    private ServerServiceDefinition service() {
        return ServerServiceDefinition.builder("bench.Arrow")
                .addMethod(send, ServerCalls.asyncUnaryCall((req, out) -> {
                    double sum = 0;
                    try (req) {
                        Float4Vector v = (Float4Vector) req.getVector(0);
                        MemorySegment data = segment(v.getDataBuffer(), (long) v.getValueCount() * Float.BYTES);
                        for (long i = 0, n = v.getValueCount(); i < n; i++) {
                            sum += data.getAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, i);
                        }
                    }
                    try (VectorSchemaRoot answer = VectorSchemaRoot.create(SCHEMA, allocator)) {
                        Float4Vector a = (Float4Vector) answer.getVector(0);
                        a.allocateNew(1);
                        a.set(0, (float) sum);
                        a.setValueCount(1);
                        answer.setRowCount(1);
                        out.onNext(answer); // read into its message here
                    }
                    out.onCompleted();
                }))
                .build();
    }

    /** A server and a channel to it, of one kind. */
    private record Pair(Server server, ManagedChannel channel) implements AutoCloseable {
        @Override
        public void close() {
            channel.shutdownNow();
            server.shutdownNow();
            try {
                channel.awaitTermination(10, TimeUnit.SECONDS);
                server.awaitTermination(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    private Pair open(String kind) throws Exception {
        boolean colocated = !kind.equals("tcp");
        if (!List.of("tcp", "colocated", "lent").contains(kind)) {
            throw new IllegalArgumentException("no kind '" + kind + "': tcp, colocated, lent");
        }
        // the agreement reads the setting at each end as it agrees: set for "lent" only
        if (kind.equals("lent")) {
            System.setProperty(ColocatedGrpc.LEND_BYTES, LEND);
        } else {
            System.setProperty(ColocatedGrpc.LEND_BYTES, "0");
        }
        NettyServerBuilder sb = NettyServerBuilder.forAddress(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0))
                .addService(service()).maxInboundMessageSize(MAX_MESSAGE);
        Server s = (colocated ? ColocatedGrpc.configure(sb) : sb).build().start();
        int port = ((InetSocketAddress) s.getListenSockets().get(0)).getPort();
        NettyChannelBuilder cb = NettyChannelBuilder.forAddress(InetAddress.getLoopbackAddress().getHostAddress(), port)
                .usePlaintext().maxInboundMessageSize(MAX_MESSAGE);
        ManagedChannel ch = (colocated ? ColocatedGrpc.configure(cb) : cb).build();
        Pair p = new Pair(s, ch);
        if (colocated) {
            long before = ColocatedGrpc.upgrades();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            try (VectorSchemaRoot small = batch(64)) {
                while (ColocatedGrpc.upgrades() < before + 2) { // both ends: the calls measured are co-located
                    if (System.nanoTime() > deadline) {
                        p.close();
                        throw new IllegalStateException("no co-located connection was agreed: " + ColocatedGrpc.fallbacks());
                    }
                    call(ch, small);
                }
            }
        }
        return p;
    }

    private void call(ManagedChannel ch, VectorSchemaRoot batch) {
        ClientCalls.blockingUnaryCall(ch, send, CallOptions.DEFAULT, batch).close();
    }

    private static long cpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
                .getProcessCpuTime();
    }

    public static void main(String[] args) throws Exception {
        BenchRun run = BenchRun.of("ArrowGrpcBench [ROUNDS] [MIB A SIZE A ROUND] [SIZES]", args);
        int rounds = run.intArg(0, 5);
        long budget = run.longArg(1, 256) << 20;
        int[] sizes = run.intsArg(2, 65536, 1 << 20, 16 << 20);
        BenchRun.header("Arrow batches as gRPC messages in one JVM, one caller, default executors: grpc-netty over TCP "
                + "loopback, the co-located rings copying, the co-located connection lending (" + LEND + " B an end)");
        new ArrowGrpcBench().measure(rounds, budget, sizes);
    }

    private void measure(int rounds, long budget, int[] sizes) throws Exception {
        BenchRun.Rounds<String> f = new BenchRun.Rounds<>();
        long lentBefore = ColocatedGrpc.messagesLent();
        for (int r = 0; r < rounds; r++) {
            for (int k = 0; k < KINDS.size(); k++) {
                String kind = KINDS.get((k + r) % KINDS.size());
                try (Pair p = open(kind)) {
                    for (int size : sizes) {
                        int calls = (int) Math.max(20, budget / size);
                        try (VectorSchemaRoot batch = batch(size)) {
                            for (int i = 0; i < Math.max(10, calls / 10); i++) {
                                call(p.channel(), batch);
                            }
                            long lent = ColocatedGrpc.messagesLent();
                            Histogram h = new Histogram(3);
                            long c0 = cpuNanos();
                            for (int i = 0; i < calls; i++) {
                                long t0 = System.nanoTime();
                                call(p.channel(), batch);
                                h.recordValue(System.nanoTime() - t0);
                            }
                            long cpu = cpuNanos() - c0;
                            String key = kind + " " + size;
                            f.put(key, "cpu", cpu / 1000.0 / calls);
                            f.put(key, "p50", h.getValueAtPercentile(50) / 1000.0);
                            f.put(key, "p99", h.getValueAtPercentile(99) / 1000.0);
                            f.put(key, "lent", (ColocatedGrpc.messagesLent() - lent) / (double) calls);
                        }
                    }
                }
            }
        }
        System.clearProperty(ColocatedGrpc.LEND_BYTES);
        BenchRun.Table t = new BenchRun.Table(2, "transport", "batch", "CPU us", "(rounds)", "p50 us", "p99 us",
                "lent a call", "CPU/TCP", "CPU/copied", "p50/copied");
        for (int size : sizes) {
            for (String kind : KINDS) {
                String key = kind + " " + size;
                double cpu = f.median(key, "cpu");
                String copied = "colocated " + size;
                t.row(kind, size + " B", BenchRun.fmt(cpu), f.range(key, "cpu"), BenchRun.fmt(f.median(key, "p50")),
                        BenchRun.fmt(f.median(key, "p99")), String.format(java.util.Locale.ROOT, "%.2f", f.median(key, "lent")),
                        f.has("tcp " + size) ? BenchRun.ratio(cpu, f.median("tcp " + size, "cpu")) : "-",
                        f.has(copied) ? BenchRun.ratio(cpu, f.median(copied, "cpu")) : "-",
                        f.has(copied) ? BenchRun.ratio(f.median(key, "p50"), f.median(copied, "p50")) : "-");
            }
        }
        t.print();
        System.out.println("(medians of " + rounds + " rounds, the kinds in turns; calls a size a round: "
                + "the MiB given / the size, at least 20; lent a call: messages lent, both ways; "
                + (ColocatedGrpc.messagesLent() - lentBefore) + " lent in all)");
        allocator.close();
    }
}
