package io.github.sockmap4j.bench;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapStats;
import io.github.sockmap4j.plots.Plots;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Ping-pong RTT of java.nio TCP, SockmapChannel over TCP, SockmapChannel redirected and a Unix
 * domain socket (the floor), for
 * 64 B, 4 KiB and 64 KiB, measured in interleaved rounds in one run. Prints the median over
 * rounds of each round's p50, p99, p99.9 and CPU time per round trip, and the ratios to java.nio
 * TCP from the same run. With {@code -Dplots=DIR}, a latency-by-percentile PNG per size.
 *
 * <p>Usage: {@code RttBench [rounds] [iterations-per-round] [sizes]} (defaults 7, 20000, 64,4096,65536).
 */
public final class RttBench {
    private RttBench() {
    }

    public static void main(String[] args) throws Exception {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 7;
        PingPong.Wait wait = PingPong.Wait.valueOf(System.getProperty("wait", "BLOCKING"));
        PingPong.Placement placement = PingPong.Placement.valueOf(System.getProperty("placement", "ANY"));
        int iterations = args.length > 1 ? Integer.parseInt(args[1]) : 20_000;
        String plotDir = System.getProperty("plots");
        Sockmap sockmap = Sockmap.global();
        if (!sockmap.isActive()) {
            System.err.println("The fast path is off: " + sockmap.unavailabilityCause());
            System.err.println("Only plain paths can be measured; run scripts/bench.sh as root.");
        }
        int[] sizes = args.length > 2 ? Arrays.stream(args[2].split(",")).mapToInt(Integer::parseInt).toArray()
                : new int[] {64, 4096, 65536};
        System.out.printf(Locale.ROOT, "sockmap4j RTT benchmark: %d rounds x %d round trips per path and size, "
                + "%d CPUs, kernel %s, %s, wait %s, placement %s%n", rounds, iterations, Runtime.getRuntime().availableProcessors(),
                System.getProperty("os.version"), Runtime.version(), wait, placement);
        // One discarded pass over every path and size, so that no measured round pays for the JIT.
        for (int size : sizes) {
            for (PingPong.Path p : PingPong.Path.values()) {
                if (!redirected(p) || sockmap.isActive()) {
                    PingPong.run(sockmap, p, wait, placement, size, 0, Math.max(1000, iterations / 10));
                }
            }
        }
        SockmapStats before = sockmap.stats();
        List<String[]> rows = new ArrayList<>();
        for (int size : sizes) {
            int iters = size >= 65536 ? Math.max(1000, iterations / 4) : iterations;
            Map<PingPong.Path, long[]> p50 = new EnumMap<>(PingPong.Path.class);
            Map<PingPong.Path, long[]> p99 = new EnumMap<>(PingPong.Path.class);
            Map<PingPong.Path, long[]> p999 = new EnumMap<>(PingPong.Path.class);
            Map<PingPong.Path, long[]> cpu = new EnumMap<>(PingPong.Path.class);
            Map<PingPong.Path, org.HdrHistogram.Histogram> all = new EnumMap<>(PingPong.Path.class);
            boolean accelerated = true;
            for (PingPong.Path p : PingPong.Path.values()) {
                p50.put(p, new long[rounds]);
                p99.put(p, new long[rounds]);
                p999.put(p, new long[rounds]);
                cpu.put(p, new long[rounds]);
                all.put(p, new org.HdrHistogram.Histogram(java.util.concurrent.TimeUnit.SECONDS.toNanos(10), 3));
            }
            for (int r = 0; r < rounds; r++) {
                for (PingPong.Path p : PingPong.Path.values()) {
                    if (redirected(p) && !sockmap.isActive()) {
                        continue;
                    }
                    PingPong.Result res = PingPong.run(sockmap, p, wait, placement, size, iters / 5, iters);
                    p50.get(p)[r] = res.p50();
                    p99.get(p)[r] = res.p99();
                    p999.get(p)[r] = res.p999();
                    cpu.get(p)[r] = Math.round(res.cpuNanosPerOp());
                    all.get(p).add(res.histogram());
                    if (redirected(p)) {
                        accelerated &= res.accelerated();
                    }
                }
            }
            double base50 = Medians.of(p50.get(PingPong.Path.NIO_TCP));
            double base99 = Medians.of(p99.get(PingPong.Path.NIO_TCP));
            for (PingPong.Path p : PingPong.Path.values()) {
                if (redirected(p) && !sockmap.isActive()) {
                    continue;
                }
                double m50 = Medians.of(p50.get(p));
                double m99 = Medians.of(p99.get(p));
                rows.add(new String[] {size(size), p.label + (redirected(p) && !accelerated
                        ? " (NOT ACCELERATED)" : ""),
                        fmt(m50 / 1000), fmt(m99 / 1000), fmt(Medians.of(p999.get(p)) / 1000), fmt(Medians.of(cpu.get(p)) / 1000),
                        ratio(m50 / base50), ratio(m99 / base99)});
            }
            if (plotDir != null) {
                Map<String, org.HdrHistogram.Histogram> series = Plots.series();
                for (PingPong.Path p : PingPong.Path.values()) {
                    if (all.get(p).getTotalCount() > 0) {
                        series.put(p.label, all.get(p));
                    }
                }
                java.nio.file.Path file = java.nio.file.Path.of(plotDir, "rtt-" + size(size).replace(" ", "") + ".png");
                Plots.percentiles(file, "ping-pong RTT, " + size(size) + " (all rounds)", series, 1, false);
                System.out.println("plot: " + file);
            }
        }
        System.out.printf(Locale.ROOT, "%-7s %-28s %9s %9s %9s %12s %10s %10s%n", "size", "path", "p50 us", "p99 us",
                "p99.9 us", "CPU us/op", "p50 ratio", "p99 ratio");
        for (String[] r : rows) {
            System.out.printf(Locale.ROOT, "%-7s %-28s %9s %9s %9s %12s %10s %10s%n", (Object[]) r);
        }
        SockmapStats after = sockmap.stats();
        System.out.printf(Locale.ROOT, "kernel counters during the run: %d messages / %d bytes redirected, "
                        + "%d messages passed to TCP, %d sockets registered%n",
                after.messagesRedirected() - before.messagesRedirected(),
                after.bytesRedirected() - before.bytesRedirected(),
                after.messagesPassed() - before.messagesPassed(),
                after.socketsRegistered() - before.socketsRegistered());
        System.out.println("ratios are against java.nio TCP in the same run (lower is faster); medians over rounds; "
                + "CPU us/op: this process's CPU time (client and echo thread) per round trip");
    }

    static boolean redirected(PingPong.Path p) {
        return p == PingPong.Path.SOCKMAP_REDIRECT || p == PingPong.Path.SOCKMAP_REDIRECT_UNBOUNDED;
    }


    static String fmt(double us) {
        return String.format(Locale.ROOT, "%.1f", us);
    }

    static String ratio(double r) {
        return String.format(Locale.ROOT, "%.2f", r);
    }

    static String size(int size) {
        return size >= 1024 ? (size / 1024) + " KiB" : size + " B";
    }
}
