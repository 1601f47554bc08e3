package io.github.sockmap4j.bench;

import io.github.sockmap4j.Sockmap;
import java.util.Locale;

/**
 * One path of {@link RttBench} alone, for a profiler or {@code strace -c} to watch:
 * {@code RttProfile PATH SIZE ITERATIONS}, PATH one of {@link PingPong.Path}'s names, or C_TCP or
 * C_REDIRECT for the C reference. Prints the p50 and CPU per round trip.
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
        if (path.startsWith("C_")) {
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
