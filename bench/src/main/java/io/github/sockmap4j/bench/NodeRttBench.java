package io.github.sockmap4j.bench;

import io.github.sockmap4j.SockmapStats;
import io.github.sockmap4j.admin.Rule;
import io.github.sockmap4j.admin.SockmapAdmin;
import io.github.sockmap4j.agent.NodeAgent;
import io.github.sockmap4j.testbed.Cgroup2;
import io.github.sockmap4j.testbed.NodeBed;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Round trips between pods of a node-shaped bed ({@link NodeBed}: a node namespace, pods routed
 * through it, kube-proxy-style iptables NAT), C peers ({@code src/main/c/podpingpong.c}) in
 * separate processes, a node agent attached to the pods' cgroup. Each path against the plain
 * path it would otherwise take, in the same run, in three placements (the scheduler's, both on
 * one CPU, across CPUs); medians of per-round p50 and p99.
 *
 * <ul>
 *   <li>pod IP, port opted in (redirected) vs not;
 *   <li>a server elsewhere (pod 2, outside the agent's cgroup, as another node's pod), port opted
 *       in, with every address a local peer (the client is registered, its sends miss) and with
 *       the local peers narrowed to the node's pods (the client stays off the map), vs not opted in;
 *   <li>a Service VIP through the node's DNAT, port opted in but the VIP not in the Service map,
 *       the same two ways, vs not opted in;
 *   <li>a Service VIP in the Service map (translated at connect, redirected) vs the VIP not opted in.
 * </ul>
 *
 * <p>With {@code -Dplots=DIR}, a latency-by-percentile PNG per placement (every round's round
 * trips) of the pod IP and the VIP, each redirected and plain, and of the JVM ends.
 *
 * Usage: {@code NodeRttBench ROUNDS ITERATIONS SIZE}; run by {@code scripts/bench.sh node}.
 */
public final class NodeRttBench {
    static final int ON = 46400;
    static final int OFF = 46401;
    /** The port SockmapChannel servers bind (they opt it in themselves, as an application does). */
    static final int ON_JVM = 46402;
    static final String VIP_ON = "10.96.0.20";
    static final String VIP_OFF = "10.96.0.21";
    static final String VIP_MAPPED = "10.96.0.22";
    /** The node's pods 0 and 1 (pod 2 stands for another node's). */
    static final List<SockmapAdmin.Network> LOCAL = List.of(
            new SockmapAdmin.Network(InetAddress.ofLiteral(NodeBed.podAddress(0)), 32),
            new SockmapAdmin.Network(InetAddress.ofLiteral(NodeBed.podAddress(1)), 32));
    /** The cases a plot shows. */
    static final List<String> PLOTTED = List.of("pod IP, redirected", "pod IP, plain", "VIP in the Service map, redirected",
            "VIP by DNAT, plain", "SockmapChannel, pod IP, redirected", "java.nio, pod IP, plain");
    static final List<SockmapAdmin.Network> EVERYWHERE = List.of(new SockmapAdmin.Network(InetAddress.ofLiteral("::"), 0));

    /**
     * Where a case's client dials, which pod serves it, whether its server is in the agent's
     * cgroup, and whether the local peers are narrowed to the node's pods (as the agent keeps
     * them with --kubernetes) or every address (the pins' default).
     */
    record Case(String name, String dial, int port, int serverPod, boolean covered, boolean narrowed, String baseline,
                String peer) {
        Case(String name, String dial, int port, int serverPod, boolean covered, boolean narrowed, String baseline) {
            this(name, dial, port, serverPod, covered, narrowed, baseline, "c");
        }
    }

    private NodeRttBench() {
    }

    public static void main(String[] args) throws Exception {
        BenchRun run = BenchRun.of("NodeRttBench ROUNDS ITERATIONS SIZE", args);
        int rounds = run.intArg(0, 5);
        int iterations = run.intArg(1, 20_000);
        int size = run.intArg(2, 64);
        Path binary = podPingPong();
        String pod1 = NodeBed.podAddress(1);
        String pod2 = NodeBed.podAddress(2);
        List<Case> cases = List.of(
                new Case("pod IP, redirected", pod1, ON, 1, true, true, "pod IP, plain"),
                new Case("pod IP, plain", pod1, OFF, 1, true, true, null),
                new Case("server elsewhere, opted in, every address local", pod2, ON, 2, false, false,
                        "server elsewhere, plain"),
                new Case("server elsewhere, opted in, local peers the node's pods", pod2, ON, 2, false, true,
                        "server elsewhere, plain"),
                new Case("server elsewhere, plain", pod2, OFF, 2, false, true, null),
                new Case("VIP by DNAT, opted in, not in the map, every address local", VIP_ON, ON, 1, true, false,
                        "VIP by DNAT, plain"),
                new Case("VIP by DNAT, opted in, not in the map, local peers the node's pods", VIP_ON, ON, 1, true,
                        true, "VIP by DNAT, plain"),
                new Case("VIP by DNAT, plain", VIP_OFF, OFF, 1, true, true, null),
                new Case("VIP in the Service map, redirected", VIP_MAPPED, ON, 1, true, true, "VIP by DNAT, plain"),
                new Case("SockmapChannel, pod IP, redirected", pod1, ON_JVM, 1, true, true, "java.nio, pod IP, plain",
                        "sockmap"),
                new Case("java.nio, pod IP, plain", pod1, OFF, 1, true, true, null, "nio"));
        // -Dcases=NAME;NAME... (or SM4J_BENCH_CASES, names having spaces) runs only those cases; a case's
        // plain baseline must be named too.
        String only = System.getProperty("cases", System.getenv("SM4J_BENCH_CASES"));
        if (only != null) {
            List<String> names = List.of(only.split(";"));
            cases = cases.stream().filter(c -> names.contains(c.name())).toList();
        }
        Path cgroup = Cgroup2.create("nodertt");
        Path pins = Path.of("/sys/fs/bpf").resolve(Cgroup2.uniqueName("nodertt"));
        try (NodeBed bed = NodeBed.create("rt", 3)) {
            bed.service(VIP_ON, ON, pod1 + ":" + ON);
            bed.service(VIP_OFF, OFF, pod1 + ":" + OFF);
            bed.service(VIP_MAPPED, ON, pod1 + ":" + ON);
            try (NodeAgent agent = NodeAgent.start(new NodeAgent.Options(pins, List.of(cgroup), null, 65535, false))) {
                agent.hold(io.github.sockmap4j.agent.Owner.named("bench"), List.of(new Rule(ON, null, 0, 0)));
                SockmapAdmin.of(pins).putService(new SockmapAdmin.Service(new InetSocketAddress(
                        InetAddress.ofLiteral(VIP_MAPPED), ON), List.of(new InetSocketAddress(
                        InetAddress.ofLiteral(pod1), ON)), List.of(), false));
                run(bed, binary, cgroup, pins, cases, rounds, iterations, size);
            } finally {
                SockmapAdmin.of(pins).removePins();
            }
        } finally {
            while (!Files.readString(cgroup.resolve("cgroup.procs")).isBlank()) {
                Thread.onSpinWait(); // the last peers exiting
            }
            Files.delete(cgroup);
        }
    }

    private static void run(NodeBed bed, Path binary, Path cgroup, Path pins, List<Case> cases, int rounds,
                            int iterations, int size) throws Exception {
        System.out.printf(Locale.ROOT, "Node-shaped bed: %d rounds of %d round trips of %d B per case and placement"
                + " (peers in separate pods, warmed up by %d round trips, a JVM by at least %d; medians of per-round"
                + " p50/p99, µs)%n%n", rounds, iterations, size, iterations / 10, JVM_WARMUP);
        String plots = System.getProperty("plots");
        // -Dplacements=ANY,SAME_CPU... measures only those placements.
        List<PingPong.Placement> placements = System.getProperty("placements") == null
                ? List.of(PingPong.Placement.values())
                : java.util.Arrays.stream(System.getProperty("placements").split(",")).map(PingPong.Placement::valueOf)
                        .toList();
        for (PingPong.Placement placement : placements) {
            Map<String, org.HdrHistogram.Histogram> all = io.github.sockmap4j.plots.Plots.series();
            for (String name : PLOTTED) {
                all.put(name, new org.HdrHistogram.Histogram(TimeUnit.SECONDS.toNanos(10), 3));
            }
            Map<String, double[][]> figures = new LinkedHashMap<>();
            Map<String, long[]> carried = new LinkedHashMap<>();
            for (int r = 0; r < rounds; r++) {
                for (Case c : cases) {
                    SockmapAdmin.of(pins).setLocalPeers(c.narrowed() ? LOCAL : EVERYWHERE);
                    SockmapStats before = SockmapAdmin.of(pins).stats();
                    long[] p = once(bed, binary, cgroup, pins, c, size, iterations, placement, all.get(c.name()));
                    SockmapStats after = SockmapAdmin.of(pins).stats();
                    figures.computeIfAbsent(c.name(), k -> new double[2][rounds]);
                    figures.get(c.name())[0][r] = p[0] / 1e3;
                    figures.get(c.name())[1][r] = p[1] / 1e3;
                    long[] k = carried.computeIfAbsent(c.name(), x -> new long[2]);
                    k[0] += after.messagesRedirected() - before.messagesRedirected();
                    k[1] += after.messagesPassed() - before.messagesPassed();
                }
            }
            System.out.printf(Locale.ROOT, "placement %s%n", placement);
            System.out.printf(Locale.ROOT, "| path | p50 | p99 | p50 / plain | p99 / plain | messages redirected | by TCP |%n");
            System.out.printf(Locale.ROOT, "|---|---:|---:|---:|---:|---:|---:|%n");
            for (Case c : cases) {
                double p50 = Medians.of(figures.get(c.name())[0]);
                double p99 = Medians.of(figures.get(c.name())[1]);
                String r50 = "";
                String r99 = "";
                if (c.baseline() != null) {
                    r50 = String.format(Locale.ROOT, "%.2f", p50 / Medians.of(figures.get(c.baseline())[0]));
                    r99 = String.format(Locale.ROOT, "%.2f", p99 / Medians.of(figures.get(c.baseline())[1]));
                }
                long[] k = carried.get(c.name());
                System.out.printf(Locale.ROOT, "| %s | %.1f | %.1f | %s | %s | %d | %d |%n", c.name(), p50, p99, r50, r99,
                        k[0], k[1]);
            }
            if (figures.containsKey("SockmapChannel, pod IP, redirected") && figures.containsKey("pod IP, redirected")) {
                double java = Medians.of(figures.get("SockmapChannel, pod IP, redirected")[0]);
                double c = Medians.of(figures.get("pod IP, redirected")[0]);
                System.out.printf(Locale.ROOT, "SockmapChannel / C, redirected, p50: %.2f%n%n", java / c);
            }
            if (plots != null) {
                Path file = Path.of(plots, "node-rtt-" + RttBench.size(size).replace(" ", "") + "-"
                        + placement.name().toLowerCase(Locale.ROOT).replace('_', '-') + ".png");
                io.github.sockmap4j.plots.Plots.percentiles(file, "RTT between pods, " + RttBench.size(size) + ", "
                        + placement + " (all rounds)", all, 1, false);
                System.out.println("plot: " + file);
            }
        }
    }

    /**
     * Round trips a client makes before it measures: a tenth of the measured ones for C; for a
     * JVM, which starts fresh each round, at least {@link #JVM_WARMUP}, so that its read and
     * write paths are compiled (with 2,000, a blocking SockmapChannel measured 18.3 µs p50 on one
     * CPU, with 20,000 12.1, with 100,000 11.5; java.nio 21.9, 19.0, 18.8).
     */
    static int warmup(Case c, int iterations) {
        return c.peer().equals("c") ? iterations / 10 : Math.max(iterations / 10, JVM_WARMUP);
    }

    static final int JVM_WARMUP = 50_000;

    /** The C ping-pong peer (src/main/c/podpingpong.c), built by the bench module's package phase. */
    static Path podPingPong() {
        Path binary = Path.of(System.getProperty("sockmap4j.bench.podpp", "target/c/podpingpong"));
        if (!Files.isExecutable(binary)) {
            throw new IllegalStateException(binary.toAbsolutePath() + " is missing: 'mvn -pl bench package' builds it");
        }
        return binary;
    }

    /** Into the pod: a JVM of sockmap4j keeps the host's mounts (its pins are on the host's bpffs). */
    private static List<String> enter(String pod, Case c, List<String> cmd) {
        return c.peer().equals("c") ? NodeBed.in(pod, cmd) : NodeBed.inNetwork(pod, cmd);
    }

    /** The command of one end: podpingpong for C, PodJvmPingPong (this JVM's class path) for the others. */
    private static List<String> peer(Path binary, Case c, Path pins, Path cgroup, String... args) {
        List<String> cmd = new ArrayList<>();
        if (c.peer().equals("c")) {
            cmd.add(binary.toString());
        } else {
            cmd.addAll(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                    "--enable-native-access=ALL-UNNAMED", "-XX:+UseSerialGC", "-Dsockmap4j.pinDir=" + pins,
                    "-Dsockmap4j.cgroup=" + cgroup, "-Dsockmap4j.require=true",
                    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", System.getProperty("java.class.path"),
                    PodJvmPingPong.class.getName()));
            cmd.add(args[0]);
            cmd.add(c.peer());
            cmd.addAll(List.of(args).subList(1, args.length));
            return cmd;
        }
        cmd.addAll(List.of(args));
        return cmd;
    }

    /**
     * One ping-pong: the server in its pod, the client in pod 0; returns {p50, p99} in ns, and
     * records every round trip in {@code samples} when it is not null.
     */
    static long[] once(NodeBed bed, Path binary, Path cgroup, Path pins, Case c, int size, int iterations,
                               PingPong.Placement placement, org.HdrHistogram.Histogram samples)
            throws IOException, InterruptedException {
        List<String> server = enter(bed.pod(c.serverPod()), c, peer(binary, c, pins, cgroup, "server",
                NodeBed.podAddress(c.serverPod()), Integer.toString(c.port()), Integer.toString(placement.echoCpu)));
        Process s = start(c.covered() ? inCgroup(cgroup, server) : server);
        try (BufferedReader so = reader(s)) {
            String ready = so.readLine();
            if (ready == null || !ready.startsWith("port=")) {
                throw new IOException("server in pod " + c.serverPod() + " did not start: " + ready);
            }
            List<String> args = new ArrayList<>(List.of("client", c.dial(), Integer.toString(c.port()),
                    Integer.toString(size), Integer.toString(warmup(c, iterations)), Integer.toString(iterations),
                    Integer.toString(placement.clientCpu)));
            if (samples != null) {
                args.add("samples");
            }
            Process cl = start(inCgroup(cgroup, enter(bed.pod(0), c, peer(binary, c, pins, cgroup,
                    args.toArray(String[]::new)))));
            try (BufferedReader co = reader(cl)) {
                String line = co.readLine();
                String all = samples != null ? co.readLine() : null;
                if (all != null && all.startsWith("samples=")) {
                    for (String v : all.substring("samples=".length()).split(",")) {
                        samples.recordValue(Math.min(Long.parseLong(v), samples.getHighestTrackableValue()));
                    }
                }
                if (line == null || !cl.waitFor(60, TimeUnit.SECONDS) || cl.exitValue() != 0) {
                    throw new IOException("client of '" + c.name() + "' failed: " + line);
                }
                Map<String, String> f = new LinkedHashMap<>();
                for (String kv : line.trim().split(" ")) {
                    String[] p = kv.split("=", 2);
                    f.put(p[0], p[1]);
                }
                return new long[] {Long.parseLong(f.get("p50")), Long.parseLong(f.get("p99"))};
            } finally {
                cl.destroyForcibly();
            }
        } finally {
            s.waitFor(10, TimeUnit.SECONDS);
            s.destroyForcibly();
            s.waitFor(10, TimeUnit.SECONDS);
        }
    }

    static List<String> inCgroup(Path cgroup, List<String> cmd) {
        StringBuilder sb = new StringBuilder("echo $$ > '" + cgroup.resolve("cgroup.procs") + "' && exec");
        for (String a : cmd) {
            sb.append(" '").append(a.replace("'", "'\\''")).append('\'');
        }
        return new ArrayList<>(List.of("sh", "-c", sb.toString()));
    }

    static Process start(List<String> cmd) throws IOException {
        return new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
    }

    static BufferedReader reader(Process p) {
        return new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.US_ASCII));
    }
}
