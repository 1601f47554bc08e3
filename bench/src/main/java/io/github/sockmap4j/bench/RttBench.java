package io.github.sockmap4j.bench;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapStats;
import io.github.sockmap4j.plots.Plots;
import java.util.EnumMap;
import java.util.HashMap;
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
        BenchRun run = BenchRun.of("RttBench [rounds] [iterations-per-round] [sizes]", args);
        int rounds = run.intArg(0, 7);
        int iterations = run.intArg(1, 20_000);
        int[] sizes = run.intsArg(2, 64, 4096, 65536);
        PingPong.Wait wait = PingPong.Wait.valueOf(System.getProperty("wait", "BLOCKING"));
        PingPong.Placement placement = PingPong.Placement.valueOf(System.getProperty("placement", "ANY"));
        String plotDir = System.getProperty("plots");
        Sockmap sockmap = Sockmap.global();
        if (!sockmap.isActive()) {
            System.err.println("The fast path is off: " + sockmap.unavailabilityCause());
            System.err.println("Only plain paths can be measured; run scripts/bench.sh as root.");
        }
        BenchRun.header(String.format(Locale.ROOT, "sockmap4j RTT benchmark: %d rounds x %d round trips per path and "
                + "size, wait %s, placement %s", rounds, iterations, wait, placement));
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
        BenchRun.Table table = new BenchRun.Table(2, "size", "path", "p50 us", "p99 us", "p99.9 us", "CPU us/op",
                "p50 ratio", "p99 ratio");
        BenchRun.Table versusC = new BenchRun.Table(1, "size", "redirect p50 J/C", "redirect CPU J/C", "TCP p50 J/C",
                "TCP CPU J/C");
        for (int size : sizes) {
            int iters = size >= 65536 ? Math.max(1000, iterations / 4) : iterations;
            BenchRun.Rounds<String> figures = new BenchRun.Rounds<>();
            Map<PingPong.Path, org.HdrHistogram.Histogram> all = new EnumMap<>(PingPong.Path.class);
            Map<String, Boolean> accelerated = new HashMap<>();
            for (PingPong.Path p : PingPong.Path.values()) {
                all.put(p, new org.HdrHistogram.Histogram(java.util.concurrent.TimeUnit.SECONDS.toNanos(10), 3));
            }
            for (int r = 0; r < rounds; r++) {
                for (PingPong.Path p : PingPong.Path.values()) {
                    if (redirected(p) && !sockmap.isActive()) {
                        continue;
                    }
                    PingPong.Result res = PingPong.run(sockmap, p, wait, placement, size, iters / 5, iters);
                    put(figures, p.label, res.p50(), res.p99(), res.p999(), res.cpuNanosPerOp());
                    all.get(p).add(res.histogram());
                    accelerated.merge(p.label, !redirected(p) || res.accelerated(), Boolean::logicalAnd);
                }
                for (int c = 0; c < 2 && cMissing == null; c++) { // 0: TCP, 1: the redirect
                    if (c == 1 && !sockmap.isActive()) {
                        continue;
                    }
                    CPingPong.Result res = CPingPong.run(sockmap, c == 1, wait, placement, size, iters / 5, iters);
                    put(figures, C_PATHS[c], res.p50(), res.p99(), res.p999(), res.cpuNanosPerOp());
                    accelerated.merge(C_PATHS[c], c == 0 || res.accelerated(), Boolean::logicalAnd);
                }
            }
            String base = PingPong.Path.NIO_TCP.label;
            for (String path : accelerated.keySet().stream().sorted(RttBench::inTableOrder).toList()) {
                table.row(size(size), path + (accelerated.get(path) ? "" : " (NOT ACCELERATED)"),
                        us(figures, path, "p50"), us(figures, path, "p99"), us(figures, path, "p99.9"),
                        us(figures, path, "cpu"),
                        BenchRun.ratio(figures.median(path, "p50"), figures.median(base, "p50")),
                        BenchRun.ratio(figures.median(path, "p99"), figures.median(base, "p99")));
            }
            if (cMissing == null) {
                String redirect = PingPong.Path.SOCKMAP_REDIRECT.label;
                boolean both = sockmap.isActive();
                versusC.row(size(size),
                        both ? BenchRun.ratio(figures.median(redirect, "p50"), figures.median(C_PATHS[1], "p50")) : "-",
                        both ? BenchRun.ratio(figures.median(redirect, "cpu"), figures.median(C_PATHS[1], "cpu")) : "-",
                        BenchRun.ratio(figures.median(base, "p50"), figures.median(C_PATHS[0], "p50")),
                        BenchRun.ratio(figures.median(base, "cpu"), figures.median(C_PATHS[0], "cpu")));
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
        table.print();
        if (cMissing == null) {
            System.out.println("Java over C on the same path (SockmapChannel, redirect / C, redirect; "
                    + "java.nio TCP / C, TCP), medians over rounds:");
            versusC.print();
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

    private static final String[] C_PATHS = {"C, TCP", "C, redirect"};

    private static void put(BenchRun.Rounds<String> figures, String path, long p50, long p99, long p999, double cpu) {
        figures.put(path, "p50", p50);
        figures.put(path, "p99", p99);
        figures.put(path, "p99.9", p999);
        figures.put(path, "cpu", cpu);
    }

    /** A median in µs from nanoseconds. */
    private static String us(BenchRun.Rounds<String> figures, String path, String metric) {
        return BenchRun.fmt(figures.median(path, metric) / 1000);
    }

    /** The Java paths in their enum's order, then the C ones. */
    private static int inTableOrder(String a, String b) {
        return Integer.compare(order(a), order(b));
    }

    private static int order(String path) {
        for (PingPong.Path p : PingPong.Path.values()) {
            if (p.label.equals(path)) {
                return p.ordinal();
            }
        }
        return PingPong.Path.values().length + java.util.Arrays.asList(C_PATHS).indexOf(path);
    }

    static boolean redirected(PingPong.Path p) {
        return p == PingPong.Path.SOCKMAP_REDIRECT || p == PingPong.Path.SOCKMAP_REDIRECT_UNBOUNDED;
    }


    static String size(int size) {
        return size >= 1024 ? (size / 1024) + " KiB" : size + " B";
    }
}
