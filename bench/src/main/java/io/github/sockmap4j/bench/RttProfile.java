package io.github.sockmap4j.bench;

import io.github.sockmap4j.netty.SockmapNetty;
import io.github.sockmap4j.Sockmap;
import java.util.Locale;

/**
 * One path of {@link RttBench} alone, for a profiler or {@code strace -c} to watch:
 * {@code RttProfile PATH SIZE ITERATIONS}, PATH one of {@link PingPong.Path}'s names, or C_TCP or
 * C_REDIRECT for the C reference, NETTY_STOCK or NETTY_FAST for NettyGrpcBench's 64 B echo (one
 * event loop; {@code -Dloops=N} for more), GRPC_STOCK or GRPC_FAST for its 1 KiB unary call (in
 * either {@link Topology}, {@code -Dtopology=}).
 * Prints the p50 and CPU per round trip.
 */
public final class RttProfile {
    private RttProfile() {
    }

    public static void main(String[] args) throws Exception {
        String path = args[0];
        int size = Integer.parseInt(args[1]);
        int iterations = Integer.parseInt(args[2]);
        PingPong.Wait wait = PingPong.Wait.valueOf(System.getProperty("wait", "BLOCKING"));
        PingPong.Placement placement = PingPong.Placement.valueOf(System.getProperty("placement", "ANY"));
        Sockmap sockmap = Sockmap.global();
        long p50;
        double cpu;
        if (path.startsWith("NETTY_") || path.startsWith("GRPC_")) {
            boolean fast = path.endsWith("_FAST");
            io.netty.channel.EventLoopGroup group = new io.netty.channel.MultiThreadIoEventLoopGroup(
                    Integer.getInteger("loops", 1), io.netty.channel.epoll.EpollIoHandler.newFactory());
            try {
                boolean netty = path.startsWith("NETTY_");
                NettyGrpcBench.Transport t = fast ? NettyGrpcBench.Transport.SOCKMAP : NettyGrpcBench.Transport.TCP;
                try (Topology at = Topology.fromProperty(sockmap.config().pinDirectory())) {
                    NettyGrpcBench.Kind k = netty ? NettyGrpcBench.Kind.ECHO : NettyGrpcBench.Kind.GRPC;
                    at.service(NettyGrpcBench.port(t, k), fast);
                    if (netty) {
                        NettyGrpcBench.echo(group, at, t, iterations / 10);
                    } else {
                        NettyGrpcBench.unary(group, at, t, iterations / 10);
                    }
                    long cpu0 = PingPong.processCpuNanos();
                    org.HdrHistogram.Histogram h = netty ? NettyGrpcBench.echo(group, at, t, iterations)
                            : NettyGrpcBench.unary(group, at, t, iterations);
                    cpu = (PingPong.processCpuNanos() - cpu0) / (double) iterations;
                    p50 = h.getValueAtPercentile(50);
                }
            } finally {
                SockmapNetty.shutdown(java.time.Duration.ofSeconds(10), group);
            }
        } else if (path.startsWith("C_")) {
            CPingPong.Result r = CPingPong.run(sockmap, path.equals("C_REDIRECT"), wait, placement, size,
                    iterations / 10, iterations);
            p50 = r.p50();
            cpu = r.cpuNanosPerOp();
        } else {
            PingPong.Result r = PingPong.run(sockmap, PingPong.Path.valueOf(path), wait, placement, size,
                    iterations / 10, iterations);
            p50 = r.p50();
            cpu = r.cpuNanosPerOp();
        }
        System.out.printf(Locale.ROOT, "%s %d B: p50 %.1f us, CPU %.1f us per round trip%n", path, size, p50 / 1000.0,
                cpu / 1000.0);
    }
}
