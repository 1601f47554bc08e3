package io.github.sockmap4j.bench;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapStats;
import io.github.sockmap4j.admin.SockmapAdmin;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.Arrays;
import java.util.Locale;

/**
 * Streaming throughput: one writer of {@code size}-byte writes, one reader of 64 KiB reads, as
 * fast as both go, over java.nio TCP, the redirect with the in-flight bound, and the redirect
 * without it; with {@code -Dgather=N}, small writes also as gathering writes of N buffers (what a
 * coalescing writer such as Netty's flush sends). Interleaved rounds in one run; prints the median
 * GB/s, the CPU time per MiB and the ratios. In either {@link Topology} ({@code -Dtopology=}).
 *
 * <p>Usage: {@code StreamBench [rounds] [MiB-per-round] [sizes]} (defaults 5, 1024, 65536).
 */
public final class StreamBench {
    private StreamBench() {
    }

    enum Mode { NIO_TCP, REDIRECT_BOUNDED, REDIRECT_UNBOUNDED, NIO_TCP_GATHER, REDIRECT_GATHER }

    static int gather = Integer.getInteger("gather", 0);
    /** Nagle off for the writer ({@code -Dnodelay=true}), as RPC stacks run; on by default, TCP's best case for small writes. */
    static final boolean NODELAY = Boolean.getBoolean("nodelay");

    public static void main(String[] args) throws Exception {
        BenchRun run = BenchRun.of("StreamBench [rounds] [MiB-per-round] [sizes]", args);
        int rounds = run.intArg(0, 5);
        long bytes = run.longArg(1, 1024) << 20;
        int[] sizes = run.intsArg(2, 65536);
        Sockmap sockmap = Sockmap.global();
        if (!sockmap.isActive()) {
            System.err.println("The fast path is off: " + sockmap.unavailabilityCause());
            return;
        }
        try (Topology at = Topology.fromProperty(sockmap.config().pinDirectory())) {
            for (Mode m : Mode.values()) {
                at.service(port(m), !tcp(m));
            }
            run(sockmap, at, rounds, bytes, sizes);
        }
    }

    /** The port of a mode's server on the node (loopback servers take an ephemeral one). */
    static int port(Mode m) {
        return 47200 + m.ordinal();
    }

    static void run(Sockmap sockmap, Topology at, int rounds, long bytes, int[] sizes) throws Exception {
        System.out.printf(Locale.ROOT, "sockmap4j streaming, topology %s: %d rounds x %d MiB per path and size, 64 KiB "
                + "reads, %s%s%n", at.name(), rounds, bytes >> 20, BenchRun.machine(), (gather > 0 ? ", gathering writes of " + gather + " buffers" : "")
                + (NODELAY ? ", TCP_NODELAY" : ", Nagle on"));
        if (at.isNode()) {
            System.out.println(at.describe());
        }
        System.out.printf(Locale.ROOT, "%-7s %-22s %8s %10s %14s %12s %11s %11s   %s%n", "write", "path", "GB/s", "vs TCP",
                "vs unbounded", "bound hits", "CPU ms/MiB", "redirected", "rounds GB/s");
        for (int size : sizes) {
            java.util.List<Mode> modes = new java.util.ArrayList<>(java.util.List.of(Mode.NIO_TCP, Mode.REDIRECT_BOUNDED,
                    Mode.REDIRECT_UNBOUNDED));
            if (gather > 1 && size * gather <= (1 << 20)) {
                modes.add(Mode.NIO_TCP_GATHER);
                modes.add(Mode.REDIRECT_GATHER);
            }
            double[][] gbps = new double[Mode.values().length][rounds];
            double[][] cpuMsPerMiB = new double[Mode.values().length][rounds];
            long[] boundHits = new long[Mode.values().length];
            long[] redirectedBytes = new long[Mode.values().length];
            for (int r = 0; r < rounds; r++) {
                for (Mode m : modes) {
                    SockmapStats before = sockmap.stats();
                    long redirected0 = SockmapAdmin.of(sockmap.config().pinDirectory()).stats().bytesRedirected();
                    long cpu0 = PingPong.processCpuNanos();
                    gbps[m.ordinal()][r] = run(sockmap, at, m, bytes, size);
                    cpuMsPerMiB[m.ordinal()][r] = (PingPong.processCpuNanos() - cpu0) / 1e6 / (bytes >> 20);
                    boundHits[m.ordinal()] += sockmap.stats().boundHits() - before.boundHits();
                    long redirected = SockmapAdmin.of(sockmap.config().pinDirectory()).stats().bytesRedirected() - redirected0;
                    if (tcp(m) && redirected != 0) {
                        throw new IllegalStateException(m + ": " + redirected + " bytes redirected on the plain path");
                    }
                    redirectedBytes[m.ordinal()] += redirected;
                }
            }
            double base = Medians.of(gbps[Mode.NIO_TCP.ordinal()]);
            double unb = Medians.of(gbps[Mode.REDIRECT_UNBOUNDED.ordinal()]);
            for (Mode m : modes) {
                double g = Medians.of(gbps[m.ordinal()]);
                StringBuilder each = new StringBuilder();
                for (double v : gbps[m.ordinal()]) {
                    each.append(String.format(Locale.ROOT, " %.2f", v));
                }
                System.out.printf(Locale.ROOT, "%-7s %-22s %8.3f %10.2f %14.2f %12d %11.2f %10.1f%%  %s%n",
                        RttBench.size(size), m.name().toLowerCase(Locale.ROOT), g, g / base, g / unb,
                        boundHits[m.ordinal()], Medians.of(cpuMsPerMiB[m.ordinal()]),
                        100.0 * redirectedBytes[m.ordinal()] / (bytes * rounds), each);
            }
        }
        System.out.println("medians over rounds; CPU ms/MiB: this process's CPU time (writer and reader) per MiB moved; "
                + "redirected: the bytes the verdict redirected, of all the mode's bytes (the rest went by TCP)");
    }


    /**
     * The in-flight bound lifted for the connections of the server bound at {@code bound}: a rule
     * for its address and port, as specific as the one its server channel made at bind, which
     * it replaces while open (a port-wide rule would lose to that one).
     */
    static io.github.sockmap4j.OptIn liftBound(Sockmap sockmap, InetSocketAddress bound) throws IOException {
        return bound.getAddress().isAnyLocalAddress()
                ? sockmap.optIn(bound.getPort(), null, 0, Sockmap.UNBOUNDED)
                : sockmap.optIn(bound.getPort(), bound.getAddress(), bound.getAddress().getAddress().length * 8,
                        Sockmap.UNBOUNDED);
    }

    static boolean tcp(Mode m) {
        return m == Mode.NIO_TCP || m == Mode.NIO_TCP_GATHER;
    }

    static double run(Sockmap sockmap, Topology at, Mode mode, long bytes, int size) throws Exception {
        try (ServerSocketChannel server = at.server(() -> tcp(mode) ? ServerSocketChannel.open()
                : sockmap.openServerChannel())) {
            server.bind(at.bind(port(mode))); // a rule for the address and port, whose bound the unbounded mode lifts
            InetSocketAddress bound = (InetSocketAddress) server.getLocalAddress();
            int port = bound.getPort();
            // "Without the mechanism": the in-flight bound turned off for this port.
            io.github.sockmap4j.OptIn lift = mode == Mode.REDIRECT_UNBOUNDED
                    ? liftBound(sockmap, bound) : null;
            try {
                return measure(sockmap, mode, server, bytes, at.dial(port(mode), bound), at, size);
            } finally {
                if (lift != null) {
                    lift.close();
                }
            }
        }
    }

    static double measure(Sockmap sockmap, Mode mode, ServerSocketChannel server, long bytes, InetSocketAddress dial,
                          Topology at, int size) throws Exception {
        boolean gathering = mode == Mode.NIO_TCP_GATHER || mode == Mode.REDIRECT_GATHER;
        {
            try (SocketChannel writer = at.client(() -> tcp(mode) ? SocketChannel.open() : sockmap.openChannel())) {
                writer.connect(dial);
                writer.setOption(java.net.StandardSocketOptions.TCP_NODELAY, NODELAY);
                try (SocketChannel reader = server.accept()) {
                    Thread w = new Thread(() -> {
                        ByteBuffer b = ByteBuffer.allocateDirect(size);
                        ByteBuffer[] many = new ByteBuffer[gathering ? gather : 0];
                        for (int i = 0; i < many.length; i++) {
                            many[i] = ByteBuffer.allocateDirect(size);
                        }
                        try {
                            if (gathering) {
                                for (long sent = 0; sent < bytes; sent += (long) size * gather) {
                                    for (ByteBuffer x : many) {
                                        x.clear();
                                    }
                                    long left = (long) size * gather;
                                    while (left > 0) {
                                        left -= writer.write(many);
                                    }
                                }
                            } else {
                                for (long sent = 0; sent < bytes; sent += size) {
                                    b.clear();
                                    while (b.hasRemaining()) {
                                        writer.write(b);
                                    }
                                }
                            }
                        } catch (IOException e) {
                            throw new java.io.UncheckedIOException(e);
                        }
                    }, "stream-writer");
                    ByteBuffer in = ByteBuffer.allocateDirect(64 << 10);
                    long t0 = System.nanoTime();
                    w.start();
                    long got = 0;
                    while (got < bytes) {
                        in.clear();
                        int n = reader.read(in);
                        if (n < 0) {
                            throw new IOException("early end of stream");
                        }
                        got += n;
                    }
                    long t = System.nanoTime() - t0;
                    w.join();
                    return bytes / (t / 1e9) / 1e9;
                }
            }
        }
    }
}
