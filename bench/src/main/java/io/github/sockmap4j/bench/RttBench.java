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
 * Ping-pong RTT of java.nio TCP, SockmapChannel over TCP, SockmapChannel redirected, a Unix
 * domain socket (the floor), and the same ping-pong in C ({@link CPingPong}) over TCP and over the
 * redirect, for 64 B, 4 KiB and 64 KiB, measured in interleaved rounds in one run. Prints the
 * median over rounds of each round's p50, p99, p99.9 and CPU time per round trip, the ratios to
 * java.nio TCP from the same run, and Java's time and CPU over C's on the same path. With
 * {@code -Dplots=DIR}, a latency-by-percentile PNG per size.
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
        String cMissing = CPingPong.unavailable();
        if (cMissing != null) {
            System.err.println("The C reference is not measured: " + cMissing);
        } else {
            for (int size : sizes) {
                CPingPong.run(sockmap, false, wait, placement, size, 0, Math.max(1000, iterations / 10));
            }
        }
        SockmapStats before = sockmap.stats();
        List<String[]> rows = new ArrayList<>();
        List<String[]> versusC = new ArrayList<>();
        for (int size : sizes) {
            int iters = size >= 65536 ? Math.max(1000, iterations / 4) : iterations;
            Map<PingPong.Path, long[]> p50 = new EnumMap<>(PingPong.Path.class);
            Map<PingPong.Path, long[]> p99 = new EnumMap<>(PingPong.Path.class);
            Map<PingPong.Path, long[]> p999 = new EnumMap<>(PingPong.Path.class);
            Map<PingPong.Path, long[]> cpu = new EnumMap<>(PingPong.Path.class);
            Map<PingPong.Path, org.HdrHistogram.Histogram> all = new EnumMap<>(PingPong.Path.class);
            boolean accelerated = true;
            boolean cAccelerated = true;
            long[][] c50 = new long[2][rounds];
            long[][] c99 = new long[2][rounds];
            long[][] c999 = new long[2][rounds];
            long[][] cCpu = new long[2][rounds];
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
                for (int c = 0; c < 2 && cMissing == null; c++) { // 0: TCP, 1: the redirect
                    if (c == 1 && !sockmap.isActive()) {
                        continue;
                    }
                    CPingPong.Result res = CPingPong.run(sockmap, c == 1, wait, placement, size, iters / 5, iters);
                    c50[c][r] = res.p50();
                    c99[c][r] = res.p99();
                    c999[c][r] = res.p999();
                    cCpu[c][r] = Math.round(res.cpuNanosPerOp());
                    if (c == 1) {
                        cAccelerated &= res.accelerated();
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
            for (int c = 0; c < 2 && cMissing == null; c++) {
                if (c == 1 && !sockmap.isActive()) {
                    continue;
                }
                double m50 = Medians.of(c50[c]);
                double m99 = Medians.of(c99[c]);
                rows.add(new String[] {size(size), (c == 0 ? "C, TCP" : "C, redirect") + (c == 1 && !cAccelerated
                        ? " (NOT ACCELERATED)" : ""), fmt(m50 / 1000), fmt(m99 / 1000), fmt(Medians.of(c999[c]) / 1000),
                        fmt(Medians.of(cCpu[c]) / 1000), ratio(m50 / base50), ratio(m99 / base99)});
            }
            if (cMissing == null) {
                double tcp50 = Medians.of(p50.get(PingPong.Path.NIO_TCP)) / Medians.of(c50[0]);
                double tcpCpu = Medians.of(cpu.get(PingPong.Path.NIO_TCP)) / Medians.of(cCpu[0]);
                String red50 = "-";
                String redCpu = "-";
                if (sockmap.isActive()) {
                    red50 = ratio(Medians.of(p50.get(PingPong.Path.SOCKMAP_REDIRECT)) / Medians.of(c50[1]));
                    redCpu = ratio(Medians.of(cpu.get(PingPong.Path.SOCKMAP_REDIRECT)) / Medians.of(cCpu[1]));
                }
                versusC.add(new String[] {size(size), red50, redCpu, ratio(tcp50), ratio(tcpCpu)});
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
        if (!versusC.isEmpty()) {
            System.out.printf(Locale.ROOT, "Java over C on the same path (SockmapChannel, redirect / C, redirect; "
                    + "java.nio TCP / C, TCP), medians over rounds:%n");
            System.out.printf(Locale.ROOT, "%-7s %18s %18s %14s %14s%n", "size", "redirect p50 J/C", "redirect CPU J/C",
                    "TCP p50 J/C", "TCP CPU J/C");
            for (String[] r : versusC) {
                System.out.printf(Locale.ROOT, "%-7s %18s %18s %14s %14s%n", (Object[]) r);
            }
        }
        SockmapStats after = sockmap.stats();
        System.out.printf(Locale.ROOT, "kernel counters during the run: %d messages / %d bytes redirected, "
                        + "%d messages passed to TCP, %d sockets registered%n",
                after.messagesRedirected() - before.messagesRedirected(),
                after.bytesRedirected() - before.bytesRedirected(),
                after.messagesPassed() - before.messagesPassed(),
                after.socketsRegistered() - before.socketsRegistered());
        System.out.println("ratios are against java.nio TCP in the same run (lower is faster); medians over rounds; "
                + "CPU us/op: the measuring process's CPU time (client and echo thread) per round trip; C rows: "
                + "src/main/c/pingpong.c, blocking read/write (MSG_DONTWAIT in a loop with -Dwait=BUSY_POLL)");
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
