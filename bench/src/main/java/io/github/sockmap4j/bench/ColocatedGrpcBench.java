package io.github.sockmap4j.bench;

import io.github.sockmap4j.colocated.SharedRegion;
import io.github.sockmap4j.colocated.grpc.ColocatedChannelBuilder;
import io.github.sockmap4j.colocated.grpc.ColocatedGrpc;
import io.github.sockmap4j.colocated.grpc.ColocatedServer;
import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.inprocess.InProcessChannelBuilder;
import io.grpc.inprocess.InProcessServerBuilder;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.HdrHistogram.Histogram;

/**
 * gRPC calls in one JVM, one caller, gRPC's default executor on both ends: in-process (no
 * kernel, no HTTP/2: the ceiling), stock grpc-netty over TCP loopback, and the co-located
 * transport over one shared region's rings. Unary at each size: CPU of both ends a call (the
 * process's), p50 and p99; a server stream of 4,096 messages of 64 KiB: CPU a MiB and MB/s.
 * Medians of rounds taken in turns; ratios against TCP and against in-process. No root.
 *
 * <p>Usage: {@code ColocatedGrpcBench [ROUNDS] [CALLS] [SIZES]} (default 5 20000 1024,65536).
 */
public final class ColocatedGrpcBench {
    /**
     * {@code -Dkinds=colocated,...}: only these (the ratios then need the kinds they divide by);
     * {@code agreed} is the same transport picked by the agreement on a TCP connection;
     * {@code agreed-handed} the same with each reply handed to its blocking caller by the
     * connection's reader ({@code -Dsockmap4j.colocated.callerReadsMicros=0}), as before the
     * caller read it itself.
     */
    private static final List<String> KINDS = List.of(System.getProperty("kinds", "in-process,tcp,colocated").split(","));

    /** {@code -Dstream=false}: unary calls only (for a profile of them). */
    private static final boolean STREAM = Boolean.parseBoolean(System.getProperty("stream", "true"));

    private ColocatedGrpcBench() {
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

    private static Pair open(String kind) throws Exception {
        switch (kind) {
            case "in-process" -> {
                String name = "bench-" + System.nanoTime();
                Server s = InProcessServerBuilder.forName(name).addService(BenchEchoService.service()).build().start();
                return new Pair(s, InProcessChannelBuilder.forName(name).build());
            }
            case "tcp" -> {
                Server s = NettyServerBuilder.forAddress(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0))
                        .addService(BenchEchoService.service()).build().start();
                int port = ((InetSocketAddress) s.getListenSockets().get(0)).getPort();
                return new Pair(s, NettyChannelBuilder.forAddress(InetAddress.getLoopbackAddress().getHostAddress(), port)
                        .usePlaintext().build());
            }
            case "colocated" -> {
                ColocatedServer cs = ColocatedServer.builder("bench").addService(BenchEchoService.service())
                        .buildColocated();
                Server s = cs.server().start();
                SharedRegion mine = SharedRegion.create("sm4j-bench", 4 << 20);
                cs.attach(SharedRegion.open(mine.descriptorForPeer(), 4 << 20));
                return new Pair(s, ColocatedChannelBuilder.forRegion(mine, "bench").build());
            }
            case "agreed" -> {
                // the same rings, picked by the agreement on a TCP connection (ColocatedGrpc), as
                // SockmapGrpc.configure does unless -Dsockmap4j.colocated=false; the rings as large as above
                if (System.getProperty(ColocatedGrpc.RING_BYTES) == null) {
                    System.setProperty(ColocatedGrpc.RING_BYTES, Integer.toString(4 << 20));
                }
                Server s = ColocatedGrpc.configure(NettyServerBuilder.forAddress(
                        new InetSocketAddress(InetAddress.getLoopbackAddress(), 0))
                        .addService(BenchEchoService.service())).build().start();
                int port = ((InetSocketAddress) s.getListenSockets().get(0)).getPort();
                ManagedChannel ch = ColocatedGrpc.configure(NettyChannelBuilder.forAddress(
                        InetAddress.getLoopbackAddress().getHostAddress(), port)).usePlaintext().build();
                long before = ColocatedGrpc.upgrades();
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
                while (ColocatedGrpc.upgrades() < before + 2) { // both ends: the calls measured are co-located
                    if (System.nanoTime() > deadline) {
                        throw new IllegalStateException("no co-located connection was agreed: " + ColocatedGrpc.fallbacks());
                    }
                    unary(ch, new byte[8]);
                }
                return new Pair(s, ch);
            }
            case "agreed-handed" -> {
                // as "agreed", with a blocking caller's reply handed over by the connection's reader
                // instead of read by the caller itself (-Dsockmap4j.colocated.callerReadsMicros=0)
                System.setProperty(ColocatedGrpc.CALLER_READS_MICROS, "0");
                try {
                    Pair p = open("agreed");
                    unary(p.channel(), new byte[8]); // the co-located transport has started
                    return p;
                } finally {
                    System.clearProperty(ColocatedGrpc.CALLER_READS_MICROS);
                }
            }
            default -> throw new IllegalArgumentException(kind);
        }
    }

    private static long cpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
                .getProcessCpuTime();
    }

    public static void main(String[] args) throws Exception {
        BenchRun run = BenchRun.of("ColocatedGrpcBench [ROUNDS] [CALLS] [SIZES]", args);
        int rounds = run.intArg(0, 5);
        int calls = run.intArg(1, 20_000);
        int[] sizes = run.intsArg(2, 1024, 65536);
        BenchRun.header("gRPC in one JVM, one caller, default executors: in-process, grpc-netty over TCP loopback, "
                + "the co-located rings");
        BenchRun.Rounds<String> f = new BenchRun.Rounds<>();
        for (int r = 0; r < rounds; r++) {
            for (int k = 0; k < KINDS.size(); k++) {
                String kind = KINDS.get((k + r) % KINDS.size());
                try (Pair p = open(kind)) {
                    for (int size : sizes) {
                        byte[] req = new byte[size];
                        for (int i = 0; i < calls / 10; i++) {
                            unary(p.channel(), req);
                        }
                        Histogram h = new Histogram(3);
                        long c0 = cpuNanos();
                        for (int i = 0; i < calls; i++) {
                            long t0 = System.nanoTime();
                            unary(p.channel(), req);
                            h.recordValue(System.nanoTime() - t0);
                        }
                        long cpu = cpuNanos() - c0;
                        String key = kind + " unary " + size;
                        f.put(key, "cpu", cpu / 1000.0 / calls);
                        f.put(key, "p50", h.getValueAtPercentile(50) / 1000.0);
                        f.put(key, "p99", h.getValueAtPercentile(99) / 1000.0);
                    }
                    if (!STREAM) {
                        continue;
                    }
                    stream(p.channel()); // warm
                    long c0 = cpuNanos();
                    long t0 = System.nanoTime();
                    long bytes = stream(p.channel());
                    double secs = (System.nanoTime() - t0) / 1e9;
                    double mib = bytes / (double) (1 << 20);
                    f.put(kind + " stream", "cpu", (cpuNanos() - c0) / 1000.0 / mib);
                    f.put(kind + " stream", "mbs", bytes / 1e6 / secs);
                }
            }
        }
        BenchRun.Table t = new BenchRun.Table(2, "transport", "call", "CPU us", "(rounds)", "p50 us", "p99 us",
                "CPU/TCP", "CPU/in-process", "p50/in-process");
        for (int size : sizes) {
            for (String kind : KINDS) {
                String key = kind + " unary " + size;
                double cpu = f.median(key, "cpu");
                t.row(kind, "unary " + size + " B", BenchRun.fmt(cpu), f.range(key, "cpu"), BenchRun.fmt(f.median(key, "p50")),
                        BenchRun.fmt(f.median(key, "p99")), BenchRun.ratio(cpu, f.median("tcp unary " + size, "cpu")),
                        BenchRun.ratio(cpu, f.median("in-process unary " + size, "cpu")),
                        BenchRun.ratio(f.median(key, "p50"), f.median("in-process unary " + size, "p50")));
            }
        }
        t.print();
        BenchRun.Table s = new BenchRun.Table(1, "transport", "stream CPU us/MiB", "(rounds)", "MB/s", "CPU/TCP");
        for (String kind : STREAM ? KINDS : List.<String>of()) {
            double cpu = f.median(kind + " stream", "cpu");
            s.row(kind, BenchRun.fmt(cpu), f.range(kind + " stream", "cpu"), BenchRun.fmt(f.median(kind + " stream", "mbs")),
                    BenchRun.ratio(cpu, f.median("tcp stream", "cpu")));
        }
        s.print();
        System.out.println("(medians of " + rounds + " rounds of " + calls + " calls a size, the transports in turns; "
                + "stream: " + BenchEchoService.STREAM_MESSAGES + " messages of 64 KiB)");
        long idle = Long.getLong("idle", 0);
        if (idle > 0) {
            idle(idle);
        }
    }

    /**
     * {@code -Didle=SECONDS}: the process's CPU over that long with 10 channels of {@code
     * -DidleKind} (default colocated) open, a server each, and no call, against the same time with
     * none, in turns (3 each). Each window starts 5 s after the channels were opened or closed: the
     * JIT's compilations and the agreements' last tasks of that work are not idle time.
     */
    private static final long SETTLE_MILLIS = 5_000;

    private static void idle(long seconds) throws Exception {
        String kind = System.getProperty("idleKind", "colocated");
        double[] with = new double[3];
        double[] without = new double[3];
        for (int r = 0; r < 3; r++) {
            List<Pair> open = new java.util.ArrayList<>();
            for (int i = 0; i < 10; i++) {
                Pair p = open(kind);
                unary(p.channel(), new byte[8]);
                open.add(p);
            }
            Thread.sleep(SETTLE_MILLIS);
            long c0 = cpuNanos();
            Thread.sleep(TimeUnit.SECONDS.toMillis(seconds));
            with[r] = (cpuNanos() - c0) / 1e7 / seconds; // percent of a CPU
            open.forEach(Pair::close);
            Thread.sleep(SETTLE_MILLIS);
            c0 = cpuNanos();
            Thread.sleep(TimeUnit.SECONDS.toMillis(seconds));
            without[r] = (cpuNanos() - c0) / 1e7 / seconds;
        }
        System.out.printf(java.util.Locale.ROOT, "idle, %d s: 10 %s channels open %.3f%% of a CPU, none %.3f%% "
                + "(medians of 3 in turns)%n", seconds, kind, Medians.of(with), Medians.of(without));
    }

    private static void unary(ManagedChannel ch, byte[] req) {
        ClientCalls.blockingUnaryCall(ch, BenchEchoService.UNARY, CallOptions.DEFAULT, req);
    }

    private static long stream(ManagedChannel ch) {
        long bytes = 0;
        Iterator<byte[]> it = ClientCalls.blockingServerStreamingCall(ch, BenchEchoService.STREAM, CallOptions.DEFAULT,
                new byte[1]);
        while (it.hasNext()) {
            bytes += it.next().length;
        }
        return bytes;
    }
}
