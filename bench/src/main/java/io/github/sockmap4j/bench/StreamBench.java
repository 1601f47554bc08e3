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
 * Streaming throughput: one writer of 64 KiB chunks, one reader of 64 KiB reads, as fast as
 * both go, over java.nio TCP, the redirect with the in-flight bound, and the redirect without
 * it. Interleaved rounds in one run; prints the median GB/s and the ratios.
 *
 * <p>Usage: {@code StreamBench [rounds] [MiB-per-round]} (defaults 5 and 1024).
 */
public final class StreamBench {
    private StreamBench() {
    }

    enum Mode { NIO_TCP, REDIRECT_BOUNDED, REDIRECT_UNBOUNDED }

    public static void main(String[] args) throws Exception {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 5;
        long bytes = (args.length > 1 ? Long.parseLong(args[1]) : 1024) << 20;
        Sockmap sockmap = Sockmap.global();
        if (!sockmap.isActive()) {
            System.err.println("The fast path is off: " + sockmap.unavailabilityCause());
            return;
        }
        {
            double[][] gbps = new double[Mode.values().length][rounds];
            long[] boundHits = new long[Mode.values().length];
            for (int r = 0; r < rounds; r++) {
                for (Mode m : Mode.values()) {
                    SockmapStats before = sockmap.stats();
                    gbps[m.ordinal()][r] = run(sockmap, m, bytes);
                    boundHits[m.ordinal()] += sockmap.stats().boundHits() - before.boundHits();
                }
            }
            System.out.printf(Locale.ROOT, "sockmap4j streaming: %d rounds x %d MiB, 64 KiB writes and reads, %d CPUs, "
                    + "kernel %s%n", rounds, bytes >> 20, Runtime.getRuntime().availableProcessors(),
                    System.getProperty("os.version"));
            double base = median(gbps[Mode.NIO_TCP.ordinal()]);
            double unb = median(gbps[Mode.REDIRECT_UNBOUNDED.ordinal()]);
            System.out.printf(Locale.ROOT, "%-22s %8s %10s %14s %12s   %s%n", "path", "GB/s", "vs TCP", "vs unbounded",
                    "bound hits", "rounds GB/s");
            for (Mode m : Mode.values()) {
                double g = median(gbps[m.ordinal()]);
                StringBuilder each = new StringBuilder();
                for (double v : gbps[m.ordinal()]) {
                    each.append(String.format(Locale.ROOT, " %.2f", v));
                }
                System.out.printf(Locale.ROOT, "%-22s %8.2f %10.2f %14.2f %12d  %s%n", m.name().toLowerCase(Locale.ROOT),
                        g, g / base, g / unb, boundHits[m.ordinal()], each);
            }
        }
    }

    static double median(double[] v) {
        double[] s = v.clone();
        Arrays.sort(s);
        int n = s.length;
        return n % 2 == 1 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    }

    static double run(Sockmap sockmap, Mode mode, long bytes) throws Exception {
        try (ServerSocketChannel server = mode == Mode.NIO_TCP ? ServerSocketChannel.open()
                : sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(0)); // a port-wide rule, whose bound the unbounded mode lifts
            int port = ((InetSocketAddress) server.getLocalAddress()).getPort();
            // "Without the mechanism": the in-flight bound turned off for this port.
            io.github.sockmap4j.OptIn lift = mode == Mode.REDIRECT_UNBOUNDED
                    ? sockmap.optIn(port, null, 0, io.github.sockmap4j.Sockmap.UNBOUNDED) : null;
            try {
                return measure(sockmap, mode, server, bytes, port);
            } finally {
                if (lift != null) {
                    lift.close();
                }
            }
        }
    }

    static double measure(Sockmap sockmap, Mode mode, ServerSocketChannel server, long bytes, int port)
            throws Exception {
        {
            try (SocketChannel writer = mode == Mode.NIO_TCP ? SocketChannel.open() : sockmap.openChannel()) {
                writer.connect(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), port));
                try (SocketChannel reader = server.accept()) {
                    Thread w = new Thread(() -> {
                        ByteBuffer b = ByteBuffer.allocateDirect(64 << 10);
                        try {
                            for (long sent = 0; sent < bytes; sent += b.capacity()) {
                                b.clear();
                                while (b.hasRemaining()) {
                                    writer.write(b);
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
