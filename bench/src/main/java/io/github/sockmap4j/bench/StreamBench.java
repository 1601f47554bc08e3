package io.github.sockmap4j.bench;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapStats;
import java.io.IOException;
import java.net.InetAddress;
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
 * GB/s, the CPU time per MiB and the ratios.
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
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 5;
        long bytes = (args.length > 1 ? Long.parseLong(args[1]) : 1024) << 20;
        int[] sizes = args.length > 2 ? Arrays.stream(args[2].split(",")).mapToInt(Integer::parseInt).toArray()
                : new int[] {65536};
        Sockmap sockmap = Sockmap.global();
        if (!sockmap.isActive()) {
            System.err.println("The fast path is off: " + sockmap.unavailabilityCause());
            return;
        }
        System.out.printf(Locale.ROOT, "sockmap4j streaming: %d rounds x %d MiB per path and size, 64 KiB reads, %d CPUs, "
                + "kernel %s%s%n", rounds, bytes >> 20, Runtime.getRuntime().availableProcessors(),
                System.getProperty("os.version"), (gather > 0 ? ", gathering writes of " + gather + " buffers" : "")
                + (NODELAY ? ", TCP_NODELAY" : ", Nagle on"));
        System.out.printf(Locale.ROOT, "%-7s %-22s %8s %10s %14s %12s %11s   %s%n", "write", "path", "GB/s", "vs TCP",
                "vs unbounded", "bound hits", "CPU ms/MiB", "rounds GB/s");
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
            for (int r = 0; r < rounds; r++) {
                for (Mode m : modes) {
                    SockmapStats before = sockmap.stats();
                    long cpu0 = PingPong.processCpuNanos();
                    gbps[m.ordinal()][r] = run(sockmap, m, bytes, size);
                    cpuMsPerMiB[m.ordinal()][r] = (PingPong.processCpuNanos() - cpu0) / 1e6 / (bytes >> 20);
                    boundHits[m.ordinal()] += sockmap.stats().boundHits() - before.boundHits();
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
                System.out.printf(Locale.ROOT, "%-7s %-22s %8.3f %10.2f %14.2f %12d %11.2f  %s%n", RttBench.size(size),
                        m.name().toLowerCase(Locale.ROOT), g, g / base, g / unb, boundHits[m.ordinal()],
                        Medians.of(cpuMsPerMiB[m.ordinal()]), each);
            }
        }
        System.out.println("medians over rounds; CPU ms/MiB: this process's CPU time (writer and reader) per MiB moved");
    }


    static boolean tcp(Mode m) {
        return m == Mode.NIO_TCP || m == Mode.NIO_TCP_GATHER;
    }

    static double run(Sockmap sockmap, Mode mode, long bytes, int size) throws Exception {
        try (ServerSocketChannel server = tcp(mode) ? ServerSocketChannel.open()
                : sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(0)); // a port-wide rule, whose bound the unbounded mode lifts
            int port = ((InetSocketAddress) server.getLocalAddress()).getPort();
            // "Without the mechanism": the in-flight bound turned off for this port.
            io.github.sockmap4j.OptIn lift = mode == Mode.REDIRECT_UNBOUNDED
                    ? sockmap.optIn(port, null, 0, io.github.sockmap4j.Sockmap.UNBOUNDED) : null;
            try {
                return measure(sockmap, mode, server, bytes, port, size);
            } finally {
                if (lift != null) {
                    lift.close();
                }
            }
        }
    }

    static double measure(Sockmap sockmap, Mode mode, ServerSocketChannel server, long bytes, int port, int size)
            throws Exception {
        boolean gathering = mode == Mode.NIO_TCP_GATHER || mode == Mode.REDIRECT_GATHER;
        {
            try (SocketChannel writer = tcp(mode) ? SocketChannel.open() : sockmap.openChannel()) {
                writer.connect(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), port));
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
