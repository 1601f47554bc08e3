package io.github.sockmap4j.bench;

import io.github.sockmap4j.Sockmap;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.concurrent.TimeUnit;
import org.HdrHistogram.Histogram;

/**
 * Ping-pong round trips over one loopback connection: the client writes {@code size} bytes,
 * the server echoes them, the client reads them back. Both ends run in this JVM on blocking
 * channels with direct buffers.
 */
public final class PingPong {
    /** Which channels carry the connection. */
    public enum Path {
        /** JDK java.nio channels; the port is not opted in. */
        NIO_TCP("java.nio TCP"),
        /** sockmap4j channels on a port that is not opted in: the channel's own cost. */
        SOCKMAP_TCP("SockmapChannel, TCP"),
        /** sockmap4j channels on an opted-in port: the redirect, with the in-flight bound. */
        SOCKMAP_REDIRECT("SockmapChannel, redirect"),
        /** The same with the in-flight bound turned off for the port ({@code Sockmap.UNBOUNDED}). */
        SOCKMAP_REDIRECT_UNBOUNDED("SockmapChannel, no bound"),
        /** JDK java.nio channels over a Unix domain socket: the floor a same-host byte stream can reach. */
        UNIX_DOMAIN("Unix socket (floor)");

        public final String label;

        Path(String label) {
            this.label = label;
        }
    }

    /** How each end waits for its peer's bytes. */
    public enum Wait {
        /** Blocking channels: each message wakes a sleeping thread, as most services run. */
        BLOCKING,
        /** Non-blocking channels polled in a loop: no wake-ups, only the path's own cost. */
        BUSY_POLL
    }

    /** Which CPUs the client and the echo thread run on. */
    public enum Placement {
        /** Wherever the scheduler puts them. */
        ANY(-1, -1),
        /** Both on CPU 0: a wake-up needs no inter-processor interrupt. */
        SAME_CPU(0, 0),
        /** Client on CPU 0, echo on CPU 1: every wake-up crosses CPUs. */
        CROSS_CPU(0, 1);

        final int clientCpu;
        final int echoCpu;

        Placement(int clientCpu, int echoCpu) {
            this.clientCpu = clientCpu;
            this.echoCpu = echoCpu;
        }
    }

    /**
     * One run's latencies in nanoseconds, and the process CPU time per round trip (both ends: the
     * client and the echo thread run in this JVM).
     */
    public record Result(Path path, int size, long p50, long p99, long p999, long count, boolean accelerated,
                         double cpuNanosPerOp, Histogram histogram) {
    }

    static long processCpuNanos() {
        java.lang.management.OperatingSystemMXBean os = java.lang.management.ManagementFactory.getOperatingSystemMXBean();
        return os instanceof com.sun.management.OperatingSystemMXBean sun ? sun.getProcessCpuTime() : -1;
    }

    private static Sockmap plain;

    private PingPong() {
    }

    private static synchronized Sockmap plainSockmap(Sockmap like) throws IOException {
        if (plain == null) {
            plain = Sockmap.open(like.config().withDisabled(true).withRequired(false));
        }
        return plain;
    }

    /** Runs {@code warmup} then {@code iterations} round trips of {@code size} bytes. */
    public static Result run(Sockmap sockmap, Path path, Wait wait, Placement placement, int size, int warmup,
                             int iterations) throws Exception {
        boolean spin = wait == Wait.BUSY_POLL;
        java.nio.file.Path unixPath = path == Path.UNIX_DOMAIN
                ? java.nio.file.Files.createTempDirectory("sm4j-bench").resolve("pingpong.sock") : null;
        try (ServerSocketChannel server = openServer(sockmap, path)) {
            io.github.sockmap4j.OptIn lift = null;
            SocketChannel client;
            if (unixPath != null) {
                server.bind(java.net.UnixDomainSocketAddress.of(unixPath));
                client = SocketChannel.open(java.net.StandardProtocolFamily.UNIX);
            } else {
                server.bind(new InetSocketAddress(0)); // a port-wide rule, whose bound the unbounded path lifts
                int port = ((InetSocketAddress) server.getLocalAddress()).getPort();
                lift = path == Path.SOCKMAP_REDIRECT_UNBOUNDED
                        ? sockmap.optIn(port, null, 0, io.github.sockmap4j.Sockmap.UNBOUNDED) : null;
                client = path == Path.NIO_TCP ? SocketChannel.open() : sockmap.openChannel();
            }
            try (client) {
                if (unixPath != null) {
                    client.connect(java.net.UnixDomainSocketAddress.of(unixPath));
                } else {
                    client.connect(new InetSocketAddress(InetAddress.getByName("127.0.0.1"),
                            ((InetSocketAddress) server.getLocalAddress()).getPort()));
                    client.setOption(java.net.StandardSocketOptions.TCP_NODELAY, true);
                }
                try (SocketChannel side = server.accept()) {
                    if (unixPath == null) {
                        side.setOption(java.net.StandardSocketOptions.TCP_NODELAY, true);
                    }
                    if (spin) {
                        client.configureBlocking(false);
                        side.configureBlocking(false);
                    }
                    Thread echo = new Thread(() -> {
                        Affinity.pin(placement.echoCpu);
                        echo(side, size);
                    }, "pingpong-echo");
                    echo.setDaemon(true);
                    echo.start();
                    boolean accelerated = client instanceof io.github.sockmap4j.SockmapChannel sc && sc.isAccelerated();
                    Affinity.pin(placement.clientCpu);
                    ByteBuffer out = ByteBuffer.allocateDirect(size);
                    ByteBuffer in = ByteBuffer.allocateDirect(size);
                    Histogram h = new Histogram(TimeUnit.SECONDS.toNanos(10), 3);
                    long cpu0 = 0;
                    for (int i = 0; i < warmup + iterations; i++) {
                        if (i == warmup) {
                            cpu0 = processCpuNanos();
                        }
                        long t0 = System.nanoTime();
                        out.clear();
                        while (out.hasRemaining()) {
                            if (client.write(out) == 0) {
                                Thread.onSpinWait();
                            }
                        }
                        in.clear();
                        while (in.hasRemaining()) {
                            int n = client.read(in);
                            if (n < 0) {
                                throw new IOException("echo ended early");
                            }
                            if (n == 0) {
                                Thread.onSpinWait();
                            }
                        }
                        long t = System.nanoTime() - t0;
                        if (i >= warmup) {
                            h.recordValue(Math.min(t, h.getHighestTrackableValue()));
                        }
                    }
                    double cpuPerOp = (processCpuNanos() - cpu0) / (double) iterations;
                    Affinity.unpin();
                    client.configureBlocking(true);
                    client.shutdownOutput();
                    echo.join(10_000);
                    return new Result(path, size, h.getValueAtPercentile(50), h.getValueAtPercentile(99),
                            h.getValueAtPercentile(99.9), h.getTotalCount(), accelerated, cpuPerOp, h);
                }
            } finally {
                if (lift != null) {
                    lift.close();
                }
            }
        } finally {
            if (unixPath != null) {
                java.nio.file.Files.deleteIfExists(unixPath);
                java.nio.file.Files.deleteIfExists(unixPath.getParent());
            }
        }
    }

    private static ServerSocketChannel openServer(Sockmap sockmap, Path path) throws IOException {
        return switch (path) {
            case NIO_TCP -> ServerSocketChannel.open();
            case UNIX_DOMAIN -> ServerSocketChannel.open(java.net.StandardProtocolFamily.UNIX);
            case SOCKMAP_REDIRECT, SOCKMAP_REDIRECT_UNBOUNDED -> sockmap.openServerChannel();
            // A sockmap4j server channel of a Sockmap that is off: same code, no opt-in.
            case SOCKMAP_TCP -> plainSockmap(sockmap).openServerChannel();
        };
    }

    private static void echo(SocketChannel ch, int size) {
        ByteBuffer buf = ByteBuffer.allocateDirect(size);
        try {
            while (true) {
                buf.clear();
                while (buf.hasRemaining()) {
                    int n = ch.read(buf);
                    if (n < 0) {
                        return;
                    }
                    if (n == 0) {
                        Thread.onSpinWait();
                    }
                }
                buf.flip();
                while (buf.hasRemaining()) {
                    if (ch.write(buf) == 0) {
                        Thread.onSpinWait();
                    }
                }
            }
        } catch (IOException e) {
            // The client closed: the run is over.
        }
    }
}
