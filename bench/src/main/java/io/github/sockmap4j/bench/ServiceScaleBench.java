package io.github.sockmap4j.bench;

import io.github.sockmap4j.admin.Rule;
import io.github.sockmap4j.admin.SockmapAdmin;
import io.github.sockmap4j.agent.NodeAgent;
import io.github.sockmap4j.testbed.Cgroup2;
import io.github.sockmap4j.testbed.NodeBed;
import java.io.BufferedReader;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;

/**
 * What the Service map's size costs a connect: connect + first 8-byte round trip from pod 0 to
 * a Service VIP translated to pod 1, with 10 Services in the map and with 50,000, against the
 * same connect to pod 1's IP (no translation), in one run. C peers ({@code podpingpong
 * connects}/{@code acceptor}) on the node bed, a node agent on the pods' cgroup; both on CPU 0
 * and 1 as the scheduler puts them. Medians of per-round p50 and p99.
 *
 * <p>Usage: {@code ServiceScaleBench ROUNDS CONNECTS SERVICES}; run by {@code scripts/bench.sh services}.
 */
public final class ServiceScaleBench {
    static final int PORT = 46410;
    static final String VIP = "10.96.0.30";

    private ServiceScaleBench() {
    }

    public static void main(String[] args) throws Exception {
        BenchRun run = BenchRun.of("ServiceScaleBench ROUNDS CONNECTS SERVICES", args);
        int rounds = run.intArg(0, 5);
        int connects = run.intArg(1, 1000);
        int many = run.intArg(2, 50_000);
        Path binary = Path.of(System.getProperty("sockmap4j.bench.podpp", "target/c/podpingpong"));
        String pod1 = NodeBed.podAddress(1);
        Path cgroup = Cgroup2.create("svcscale");
        Path pins = Path.of("/sys/fs/bpf").resolve(Cgroup2.uniqueName("svcscale"));
        // The kernel counts each program's runs and run time meanwhile: what the programs cost a connect.
        java.io.Closeable stats = SockmapAdmin.enableKernelRunStats();
        try (stats; NodeBed bed = NodeBed.create("ss", 2);
             NodeAgent agent = NodeAgent.start(new NodeAgent.Options(pins, List.of(cgroup), null, 65535, false))) {
            agent.hold(io.github.sockmap4j.agent.Owner.named("bench"), List.of(new Rule(PORT, null, 0, 0)));
            InetSocketAddress endpoint = new InetSocketAddress(InetAddress.ofLiteral(pod1), PORT);
            SockmapAdmin.of(pins).putService(new SockmapAdmin.Service(new InetSocketAddress(InetAddress.ofLiteral(VIP), PORT),
                    List.of(endpoint), List.of(), false));
            fill(pins, 1, 9, endpoint); // with the VIP: 10 Services
            Process acceptor = NodeRttBench.start(NodeRttBench.inCgroup(cgroup, NodeBed.in(bed.pod(1), List.of(
                    binary.toString(), "acceptor", pod1, Integer.toString(PORT), "-1"))));
            try (BufferedReader a = NodeRttBench.reader(acceptor)) {
                String ready = a.readLine();
                if (ready == null || !ready.startsWith("port=")) {
                    throw new IOException("the acceptor did not start: " + ready);
                }
                double[][] pod = new double[2][rounds];
                double[][] few = new double[2][rounds];
                double[][] lots = new double[2][rounds];
                for (int r = 0; r < rounds; r++) {
                    // Both sizes in each round, in turns first: the round's noise falls on both.
                    boolean lotsFirst = r % 2 == 1;
                    if (lotsFirst) {
                        fill(pins, 11, many - 10, endpoint);
                        record(lots, r, once(bed, binary, cgroup, VIP, connects));
                    }
                    unfill(pins, 11, many - 10);
                    record(few, r, once(bed, binary, cgroup, VIP, connects));
                    record(pod, r, once(bed, binary, cgroup, pod1, connects));
                    if (!lotsFirst) {
                        fill(pins, 11, many - 10, endpoint);
                        record(lots, r, once(bed, binary, cgroup, VIP, connects));
                    }
                }
                long services = SockmapAdmin.of(pins).services().size();
                System.out.printf(Locale.ROOT, "Service map size: %d rounds of %d connects (connect + first 8-byte "
                        + "round trip, pod 0 to pod 1), medians of per-round p50/p99 in µs; %d Services at the end%n%n",
                        rounds, connects, services);
                System.out.println("| dial | Services in the map | p50 | p99 | p50 / 10 Services | p99 / 10 Services |");
                System.out.println("|---|---:|---:|---:|---:|---:|");
                row("pod 1's IP", "-", pod, few);
                row("the VIP", "10", few, few);
                row("the VIP", Integer.toString(many), lots, few);
                programRuns(pins, 3L * rounds * connects);
            } finally {
                acceptor.destroyForcibly();
                acceptor.waitFor(10, TimeUnit.SECONDS);
            }
        } finally {
            SockmapAdmin.of(pins).removePins();
            while (!Files.readString(cgroup.resolve("cgroup.procs")).isBlank()) {
                Thread.onSpinWait(); // the last peers exiting
            }
            Files.delete(cgroup);
        }
    }

    /**
     * Each program's runs and run time over the whole run (bpftool's view of the pinned programs),
     * and all of them per connect: the kernel side's own cost, free of the scheduling noise that
     * the connect times carry.
     */
    private static void programRuns(Path pins, long connects) throws IOException, InterruptedException {
        System.out.printf(Locale.ROOT, "%n| program | runs | ns per run | ns per connect (%d connects) |%n", connects);
        System.out.println("|---|---:|---:|---:|");
        long total = 0;
        try (var files = Files.list(pins)) {
            for (Path prog : files.filter(f -> f.getFileName().toString().startsWith("prog_")).sorted().toList()) {
                Process p = new ProcessBuilder("bpftool", "-j", "prog", "show", "pinned", prog.toString())
                        .redirectErrorStream(true).start();
                String out = new String(p.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
                p.waitFor(30, TimeUnit.SECONDS);
                long ns = field(out, "run_time_ns");
                long runs = field(out, "run_cnt");
                total += ns;
                System.out.printf(Locale.ROOT, "| %s | %d | %.0f | %.0f |%n", prog.getFileName(), runs,
                        runs == 0 ? 0.0 : (double) ns / runs, (double) ns / connects);
            }
        }
        System.out.printf(Locale.ROOT, "| all | | | %.0f |%n", (double) total / connects);
    }

    private static long field(String json, String name) {
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("\"" + name + "\":(\\d+)").matcher(json);
        return m.find() ? Long.parseLong(m.group(1)) : 0;
    }

    private static void record(double[][] into, int round, long[] p) {
        into[0][round] = p[0] / 1e3;
        into[1][round] = p[1] / 1e3;
    }

    private static void row(String dial, String services, double[][] v, double[][] base) {
        double p50 = Medians.of(v[0]);
        double p99 = Medians.of(v[1]);
        System.out.printf(Locale.ROOT, "| %s | %s | %.1f | %.1f | %.2f | %.2f |%n", dial, services, p50, p99,
                p50 / Medians.of(base[0]), p99 / Medians.of(base[1]));
    }

    /** Services {@code 10.97.x.y:PORT} number {@code from} to {@code from + count - 1}, all to {@code endpoint}. */
    private static void fill(Path pins, int from, int count, InetSocketAddress endpoint) throws IOException {
        for (int i = from; i < from + count; i++) {
            SockmapAdmin.of(pins).putService(new SockmapAdmin.Service(vip(i), List.of(endpoint), List.of(), false));
        }
    }

    private static void unfill(Path pins, int from, int upTo) throws IOException {
        for (int i = from; i < from + upTo; i++) {
            SockmapAdmin.of(pins).removeService(vip(i));
        }
    }

    private static InetSocketAddress vip(int i) {
        return new InetSocketAddress(InetAddress.ofLiteral("10.97." + (i >> 8 & 0xff) + "." + (i & 0xff)), PORT);
    }

    private static long[] once(NodeBed bed, Path binary, Path cgroup, String dial, int connects)
            throws IOException, InterruptedException {
        Process c = NodeRttBench.start(NodeRttBench.inCgroup(cgroup, NodeBed.in(bed.pod(0), List.of(binary.toString(),
                "connects", dial, Integer.toString(PORT), Integer.toString(connects / 10), Integer.toString(connects),
                "-1"))));
        try (BufferedReader out = NodeRttBench.reader(c)) {
            String line = out.readLine();
            if (line == null || !c.waitFor(120, TimeUnit.SECONDS) || c.exitValue() != 0) {
                throw new IOException("the connects to " + dial + " failed: " + line);
            }
            String[] f = line.trim().split(" ");
            return new long[] {Long.parseLong(f[0].substring(4)), Long.parseLong(f[1].substring(4))};
        } finally {
            c.destroyForcibly();
        }
    }
}
