package io.github.sockmap4j.bench;

import io.github.sockmap4j.OptIn;
import io.github.sockmap4j.Sockmap;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import org.HdrHistogram.Histogram;

/**
 * What the fast path costs as it grows, in interleaved rounds of one run:
 * <ul>
 *   <li>connect + accept + close of a connection, with its port opted in (the sockops
 *       program registers both sockets at the handshake) and not (plain TCP), in either
 *       {@link Topology} ({@code -Dtopology=}; on the node the client dials a Service VIP:
 *       translated at connect when opted in, the node's DNAT when not);</li>
 *   <li>64 B ping-pong RTT over the redirect with 10 and with 10,000 sockets in the SOCKHASH
 *       (the others idle connections of the same opted-in port), on loopback.</li>
 * </ul>
 *
 * <p>Usage: {@code ScaleBench [rounds] [connections-per-round] [rtt-iterations]} (defaults 5, 2000, 20000).
 */
public final class ScaleBench {
    private ScaleBench() {
    }

    public static void main(String[] args) throws Exception {
        BenchRun run = BenchRun.of("ScaleBench [rounds] [connections-per-round] [rtt-iterations]", args);
        int rounds = run.intArg(0, 5);
        int conns = run.intArg(1, 2000);
        int iterations = run.intArg(2, 20_000);
        int manySockets = Integer.getInteger("sockets", 10_000);
        Sockmap sockmap = Sockmap.global();
        if (!sockmap.isActive()) {
            System.err.println("The fast path is off: " + sockmap.unavailabilityCause() + "; run scripts/bench.sh scale as root.");
            System.exit(1);
        }
        System.out.printf(Locale.ROOT, "sockmap4j scale benchmark: %d rounds; %d connections per round and path; "
                + "RTT %d round trips at %d vs %,d sockets; %s%n", rounds, conns, iterations, 10,
                manySockets, BenchRun.machine());

        // connect + accept
        double[][] connUs = new double[2][rounds];
        double[][] connP99 = new double[2][rounds];
        String topology;
        try (Topology at = Topology.fromProperty(sockmap.config().pinDirectory())) {
            topology = at.name();
            at.service(CONNECT_PORT, false);
            at.service(CONNECT_PORT + 1, true);
            connectAccept(sockmap, at, false, Math.max(200, conns / 5));
            connectAccept(sockmap, at, true, Math.max(200, conns / 5));
            for (int r = 0; r < rounds; r++) {
                for (int fast = 0; fast < 2; fast++) {
                    Histogram h = connectAccept(sockmap, at, fast == 1, conns);
                    connUs[fast][r] = h.getValueAtPercentile(50) / 1000.0;
                    connP99[fast][r] = h.getValueAtPercentile(99) / 1000.0;
                }
            }
        }

        // RTT with few and many sockets in the map
        double[][] rtt50 = new double[2][rounds];
        double[][] rtt99 = new double[2][rounds];
        double[][] rtt999 = new double[2][rounds];
        long[] inMap = new long[2];
        PingPong.run(sockmap, PingPong.Path.SOCKMAP_REDIRECT, PingPong.Wait.BLOCKING, PingPong.Placement.ANY, 64, 0,
                Math.max(1000, iterations / 5));
        for (int r = 0; r < rounds; r++) {
            for (int many = 0; many < 2; many++) {
                try (Idle idle = Idle.open(sockmap, many == 1 ? manySockets : 10)) {
                    long registered = sockmap.stats().socketsInMap();
                    if (registered < idle.size()) {
                        throw new IllegalStateException(idle.size() + " idle sockets but " + registered + " in the map");
                    }
                    inMap[many] = registered + 2; // and the ping-pong pair
                    PingPong.Result res = PingPong.run(sockmap, PingPong.Path.SOCKMAP_REDIRECT, PingPong.Wait.BLOCKING,
                            PingPong.Placement.ANY, 64, iterations / 5, iterations);
                    if (!res.accelerated()) {
                        throw new IllegalStateException("the ping-pong pair was not accelerated");
                    }
                    rtt50[many][r] = res.p50() / 1000.0;
                    rtt99[many][r] = res.p99() / 1000.0;
                    rtt999[many][r] = res.p999() / 1000.0;
                }
            }
        }
        System.out.printf(Locale.ROOT, "%-44s %9s %9s %9s %8s%n", "", "p50 us", "p99 us", "p99.9 us", "ratio");
        System.out.printf(Locale.ROOT, "%-44s %9.1f %9.1f %9s %8s%n", "connect+accept+close, plain TCP, " + topology,
                Medians.of(connUs[0]), Medians.of(connP99[0]), "", "");
        System.out.printf(Locale.ROOT, "%-44s %9.1f %9.1f %9s %8.2f%n", "connect+accept+close, opted in, " + topology,
                Medians.of(connUs[1]), Medians.of(connP99[1]), "", Medians.of(connUs[1]) / Medians.of(connUs[0]));
        System.out.printf(Locale.ROOT, "%-44s %9.1f %9.1f %9.1f %8s%n",
                String.format(Locale.ROOT, "64 B RTT, redirect, %,d sockets in the map", inMap[0]),
                Medians.of(rtt50[0]), Medians.of(rtt99[0]), Medians.of(rtt999[0]), "");
        System.out.printf(Locale.ROOT, "%-44s %9.1f %9.1f %9.1f %8.2f%n",
                String.format(Locale.ROOT, "64 B RTT, redirect, %,d sockets in the map", inMap[1]),
                Medians.of(rtt50[1]), Medians.of(rtt99[1]), Medians.of(rtt999[1]), Medians.of(rtt50[1]) / Medians.of(rtt50[0]));
        System.out.println("medians over rounds; ratios: opted-in / plain, and many / few sockets (p50)");
    }

    /** The connect + accept servers' ports on the node: plain, and opted in (its VIP in the Service map). */
    static final int CONNECT_PORT = 47300;

    /**
     * {@code n} connect + accept + close latencies in ns (the accepted side closes first, so no
     * TIME_WAIT piles up on client ports); on the node every client socket is made in pod 0 by one
     * thread that has entered it.
     */
    static Histogram connectAccept(Sockmap sockmap, Topology at, boolean optIn, int n) throws Exception {
        Histogram h = new Histogram(TimeUnit.SECONDS.toNanos(10), 3);
        int nodePort = CONNECT_PORT + (optIn ? 1 : 0);
        try (ServerSocketChannel server = at.server(ServerSocketChannel::open)) {
            server.setOption(java.net.StandardSocketOptions.SO_REUSEADDR, true);
            server.bind(at.bind(nodePort), 64);
            InetSocketAddress bound = (InetSocketAddress) server.getLocalAddress();
            OptIn opt = optIn ? sockmap.optIn(bound.getPort()) : null;
            try {
                InetSocketAddress addr = at.dial(nodePort, bound);
                long registered0 = sockmap.stats().socketsRegistered();
                at.client(() -> {
                    for (int i = 0; i < n; i++) {
                        long t0 = System.nanoTime();
                        SocketChannel c = SocketChannel.open(addr);
                        SocketChannel s = server.accept();
                        s.close();
                        c.close();
                        h.recordValue(Math.min(System.nanoTime() - t0, h.getHighestTrackableValue()));
                    }
                    return null;
                });
                long registered = sockmap.stats().socketsRegistered() - registered0;
                if (optIn ? registered < 2L * n : registered != 0) {
                    throw new IllegalStateException(registered + " sockets registered for " + n + " connections, opted in: "
                            + optIn);
                }
            } finally {
                if (opt != null) {
                    opt.close();
                }
            }
        }
        return h;
    }

    /** Idle connections of an opted-in port, enough to put {@code sockets} sockets (two per connection) in the map. */
    static final class Idle implements AutoCloseable {
        private final ServerSocketChannel server;
        private final OptIn opt;
        private final List<SocketChannel> open = new ArrayList<>();

        private Idle(ServerSocketChannel server, OptIn opt) {
            this.server = server;
            this.opt = opt;
        }

        static Idle open(Sockmap sockmap, int sockets) throws Exception {
            ServerSocketChannel server = ServerSocketChannel.open();
            server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0), 1024);
            Idle idle = new Idle(server, sockmap.optIn(((InetSocketAddress) server.getLocalAddress()).getPort()));
            try {
                for (int i = 0; i < sockets / 2; i++) {
                    idle.open.add(SocketChannel.open(server.getLocalAddress()));
                    idle.open.add(server.accept());
                }
            } catch (Exception e) {
                idle.close();
                throw e;
            }
            return idle;
        }

        int size() {
            return open.size();
        }

        @Override
        public void close() throws java.io.IOException {
            for (SocketChannel c : open) {
                c.close();
            }
            opt.close();
            server.close();
        }
    }

}
