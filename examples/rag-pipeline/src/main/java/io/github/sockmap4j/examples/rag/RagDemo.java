package io.github.sockmap4j.examples.rag;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.admin.SockmapAdmin;
import io.github.sockmap4j.netty.grpc.SockmapGrpc;
import io.github.sockmap4j.plots.Plots;
import io.github.sockmap4j.testbed.NodeBed;
import io.grpc.ManagedChannel;
import io.grpc.netty.NettyChannelBuilder;
import io.netty.channel.epoll.EpollSocketChannel;
import java.io.Closeable;
import java.io.IOException;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.HdrHistogram.Histogram;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * The RAG pipeline in miniature on one machine, plain TCP then the sockmap fast path: gateway →
 * embedding → vector search → context assembly, each stage its own JVM (or all in this one with
 * {@code --in-process}), gRPC between them, vectors as Arrow batches. A load generator sends
 * questions to the gateway at a fixed rate and prints P50/P99/P99.9, throughput, CPU % and RSS per
 * stage, the kernel's {@code sk_msg} run count, and the ratios fast/plain.
 */
@Command(name = "rag-demo", mixinStandardHelpOptions = true, sortOptions = false,
        description = "Runs the RAG pipeline demo: plain TCP, then the sockmap fast path, and prints the comparison.")
public final class RagDemo implements Callable<Integer> {
    @Option(names = "--requests", defaultValue = "2000", description = "requests measured per path (default ${DEFAULT-VALUE})")
    int requests;
    @Option(names = "--rate", defaultValue = "100", description = "requests per second offered (default ${DEFAULT-VALUE})")
    double rate;
    @Option(names = "--warmup", defaultValue = "10",
            description = "seconds of closed-loop warm-up per path; then at the rate until the median settles (default ${DEFAULT-VALUE})")
    double warmupSeconds;
    @Option(names = "--max-warmup", defaultValue = "120",
            description = "most seconds of warm-up at the rate per path (default ${DEFAULT-VALUE})")
    double maxWarmupSeconds;
    @Option(names = "--throughput-seconds", defaultValue = "4",
            description = "seconds of the closed-loop throughput phase per path, 0 to skip (default ${DEFAULT-VALUE})")
    double throughputSeconds;
    @Option(names = "--idle-seconds", defaultValue = "5",
            description = "seconds with no traffic after the load, over which each stage's idle CPU is measured, 0 to "
                    + "skip (default ${DEFAULT-VALUE})")
    double idleSeconds;
    @Option(names = "--in-flight", defaultValue = "16", description = "requests outstanding in the throughput phase (default ${DEFAULT-VALUE})")
    int inFlight;
    @Option(names = "--rounds", defaultValue = "1",
            description = "plain/fast rounds, which goes first alternating; medians reported (default ${DEFAULT-VALUE})")
    int rounds;
    @Option(names = "--mode", defaultValue = "both", description = "both, plain or fast (default ${DEFAULT-VALUE})")
    String mode;
    @Option(names = "--in-process", description = "all stages in this JVM instead of one JVM each")
    boolean inProcess;
    @Option(names = "--profile", defaultValue = "standard", description = "how the fast path's event loops wait: "
            + "standard (they sleep, as the plain path's do) or polling (sockmap4j's polling profile) "
            + "(default ${DEFAULT-VALUE})")
    String profile;
    @Option(names = "--docs", defaultValue = "2000", description = "chunks in the vector index (default ${DEFAULT-VALUE})")
    int docs;
    @Option(names = "--dim", defaultValue = "1536",
            description = "embedding dimensions (default ${DEFAULT-VALUE}, as text-embedding-3-small)")
    int dim;
    @Option(names = "--candidates", defaultValue = "10",
            description = "chunks the search returns, with their vectors (default ${DEFAULT-VALUE}, a top-10 query)")
    int candidates;
    @Option(names = "--top-k", defaultValue = "5", description = "chunks in the assembled context (default ${DEFAULT-VALUE})")
    int topK;
    @Option(names = "--threshold", defaultValue = "0.3", description = "lowest score a chunk may have (default ${DEFAULT-VALUE})")
    float threshold;
    @Option(names = "--seed", defaultValue = "42")
    long seed;
    @Option(names = "--plot", description = "write a latency-by-percentile PNG of both paths here, and the "
            + "time budget's bars next to it (NAME-budget.png)")
    Path plot;
    @Option(names = "--stage-heap", defaultValue = "256m", description = "-Xmx of each stage's JVM (default ${DEFAULT-VALUE})")
    String stageHeap;
    @Option(names = "--topology", defaultValue = "node", description = "node: each stage in a pod of its own on a "
            + "node-shaped bed (network namespaces routed through a node namespace, built for the run and removed "
            + "after; needs root), the stages and the load dialing Service VIPs: kube-proxy-style DNAT on the plain path, "
            + "translated at connect on the fast path; loopback: every stage on this host's loopback "
            + "(default ${DEFAULT-VALUE})")
    String topology;
    /** Set by the node topology's driver for the demo it runs in the client pod: the stages' pods, in role order. */
    @Option(names = "--node-pods", hidden = true, split = ",")
    List<String> nodePods;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    private final PrintStream out;

    public RagDemo() {
        this(System.out);
    }

    RagDemo(PrintStream out) {
        this.out = out;
    }

    @Override
    public Integer call() throws Exception {
        if (requests < 1 || rate <= 0 || rounds < 1 || inFlight < 1) {
            System.err.println("--requests, --rate, --rounds and --in-flight must be positive");
            return 2;
        }
        boolean plain = !mode.equals("fast");
        boolean fast = !mode.equals("plain");
        if (!List.of("both", "plain", "fast").contains(mode)) {
            System.err.println("--mode is both, plain or fast, not '" + mode + "'");
            return 2;
        }
        if (!List.of("standard", "polling").contains(profile)) {
            System.err.println("--profile is standard or polling, not '" + profile + "'");
            return 2;
        }
        if (inProcess && profile.equals("polling")) {
            System.err.println("--profile=polling needs a JVM per stage: leave out --in-process");
            return 2;
        }
        if (!List.of("node", "loopback").contains(topology)) {
            System.err.println("--topology is node or loopback, not '" + topology + "'");
            return 2;
        }
        if (node() && inProcess) {
            System.err.println("--in-process runs every stage in this JVM, on loopback: add --topology loopback");
            return 2;
        }
        if (node() && nodePods == null) {
            return driveNode();
        }
        RagService.Settings settings = new RagService.Settings(dim, docs, seed, candidates, topK, threshold);
        Sockmap sockmap = null;
        Closeable runStats = null;
        try {
            if (fast) {
                sockmap = Sockmap.global();
                if (!sockmap.isActive()) {
                    out.println("fast path: OFF (" + sockmap.unavailabilityCause()
                            + "); the 'fast' rows below run over plain TCP");
                } else {
                    out.println("fast path: active, sockops on " + sockmap.cgroup().map(Path::toString).orElse("?"));
                    try {
                        runStats = SockmapAdmin.enableKernelRunStats();
                    } catch (IOException e) {
                        out.println("kernel run counts unavailable: " + e.getMessage());
                    }
                }
            }
            out.printf(Locale.ROOT, "RAG pipeline: gateway -> embedding -> search -> context, %s; %,d chunks x %d dims, "
                    + "%d candidates with vectors, top-%d at score >= %.2f%n",
                    inProcess ? "all in this JVM" : "one JVM each", docs, dim, candidates, topK, threshold);
            out.println(node() ? "topology: node: each stage and the load generator in a pod of its own, routed "
                    + "through a node namespace; every hop dials a Service VIP (kube-proxy-style DNAT in the node; on "
                    + "the fast path the internal hops' connects are translated to their pods)"
                    : "topology: loopback: every stage on this host's loopback (127.0.0.1)");
            out.println("event loops: " + (profile.equals("polling") ? "the fast path's poll up to "
                    + SockmapGrpc.Profile.POLLING.maxPoll().toNanos() / 1000 + " us before they sleep, and so do the "
                    + "threads of its handlers' executor (SockmapGrpc.Profile.POLLING); the plain path's sleep" : "both paths' sleep until an event comes (SockmapGrpc.Profile.STANDARD)"));
            out.printf(Locale.ROOT, "load: %,d requests at %.0f/s per path after a warm-up (until the median settles); "
                    + "then %.0f s with %d in flight%n%n", requests, rate, throughputSeconds, inFlight);
            List<RagReport.Run> plainRuns = new ArrayList<>();
            List<RagReport.Run> fastRuns = new ArrayList<>();
            for (int r = 0; r < rounds; r++) {
                // Each path goes first in every other round: a drift of the machine falls on both.
                for (boolean f : r % 2 == 0 ? new boolean[] {false, true} : new boolean[] {true, false}) {
                    if (f ? fast : plain) {
                        (f ? fastRuns : plainRuns).add(runPath(f, settings, r, sockmap));
                    }
                }
            }
            out.println();
            new RagReport(out, rounds, rate, throughputSeconds, inFlight, inProcess, idleSeconds).print(plainRuns, fastRuns);
            if (plot != null) {
                Map<String, Histogram> series = Plots.series();
                for (int r = 0; r < plainRuns.size(); r++) {
                    series.put("plain TCP" + (rounds > 1 ? " #" + (r + 1) : ""), plainRuns.get(r).latency());
                }
                for (int r = 0; r < fastRuns.size(); r++) {
                    series.put("sockmap fast path" + (rounds > 1 ? " #" + (r + 1) : ""), fastRuns.get(r).latency());
                }
                Plots.percentiles(plot, String.format(Locale.ROOT,
                        "RAG pipeline request latency, %.0f requests/s (from each request's scheduled start)", rate),
                        series, 1000, true);
                Path budget = BudgetPlot.fileFor(plot);
                BudgetPlot.write(budget, plainRuns, fastRuns, rate);
                out.println("\nplots: " + plot + ", " + budget);
            }
            if (fast && sockmap.isActive()) {
                RagReport.Run f = fastRuns.get(0);
                if (f.bytesRedirected() == 0) {
                    out.println("\nWARNING: nothing went through the redirect; see the log lines above for why");
                    return 1;
                }
            }
            return 0;
        } finally {
            if (runStats != null) {
                runStats.close();
            }
            if (sockmap != null) {
                sockmap.close();
            }
        }
    }

    private RagReport.Run runPath(boolean fast, RagService.Settings s, int round, Sockmap sockmap) throws Exception {
        String label = (fast ? "sockmap fast path" : "plain TCP") + (rounds > 1 ? " #" + (round + 1) : "");
        Map<RagService.Role, Stage> stages = new EnumMap<>(RagService.Role.class);
        List<InetSocketAddress> translated = new ArrayList<>();
        try {
            if (node() && fast && sockmap != null && sockmap.isActive()) {
                // The internal hops' Services in the Service map: their connects go straight to the pods.
                for (RagService.Role r : List.of(RagService.Role.EMBEDDING, RagService.Role.SEARCH, RagService.Role.CONTEXT)) {
                    InetSocketAddress at = new InetSocketAddress(InetAddress.ofLiteral(NodePods.vip(r)), NodePods.port(r));
                    InetSocketAddress pod = new InetSocketAddress(InetAddress.ofLiteral(NodeBed.podAddress(r.ordinal())),
                            NodePods.port(r));
                    SockmapAdmin.putService(sockmap.config().pinDirectory(),
                            new SockmapAdmin.Service(at, List.of(pod), List.of(), false));
                    translated.add(at);
                }
            }
            startStages(fast, s, stages);
            if (round == 0 && !fast || round == 0 && mode.equals("fast")) {
                Stage search = stages.get(RagService.Role.SEARCH);
                out.println("search " + search.info());
            }
            RagService.Role gateway = RagService.Role.GATEWAY;
            InetSocketAddress gwAt = node() ? new InetSocketAddress(InetAddress.ofLiteral(NodePods.vip(gateway)), NodePods.port(gateway))
                    : new InetSocketAddress(InetAddress.ofLiteral("127.0.0.1"), stages.get(gateway).port());
            ManagedChannel gw = NettyChannelBuilder.forAddress(gwAt)
                    .usePlaintext().channelType(EpollSocketChannel.class).eventLoopGroup(RagService.group())
                    .maxInboundMessageSize(16 << 20).build();
            try {
                LoadGenerator load = new LoadGenerator(gw, seed);
                String sample = load.ask(Corpus.question(seed, 7));
                if (round == 0 && (!fast || mode.equals("fast"))) {
                    out.println("a sample answer's context:\n  " + sample.replace("\n", "\n  ") + "\n");
                }
                // Warm-up: as many requests as the stages take (so the JITs of five JVMs finish sooner),
                // then at the rate until the median settles.
                double busy = load.closedLoop(inFlight, warmupSeconds);
                LoadGenerator.WarmUp w = load.warmUp(rate, 5, Math.max(5, maxWarmupSeconds), StageMeters.jitMeter(stages));
                out.printf(Locale.ROOT, "  %-18s warm-up %.0f s at %.0f rps + %.0f s at the rate: %s, %s (p50 %.2f ms)%n", label,
                        warmupSeconds, busy, w.seconds(), w.settled() ? "the median settled" : "the median did NOT settle",
                        w.jitQuiet() ? "the JIT quiet" : "the JIT still compiling", w.lastP50Millis());
                long[] cpu0 = StageMeters.cpu(stages);
                long sys0 = StageMeters.systemCpu(stages);
                long self0 = StageMeters.selfCpuNanos();
                ThreadTimes selfThreads0 = StageMeters.self();
                Map<RagService.Role, ThreadTimes> threads0 = StageMeters.threads(stages);
                Map<RagService.Role, StageClock.Times> times0 = StageMeters.times(stages);
                long[] st0 = StageMeters.counters(fast, sockmap);
                long runs0 = fast && sockmap != null ? sockmap.verdictRunCount() : 0;
                LoadGenerator.Result res = load.fixedRate(requests, rate, label, out);
                long[] cpu1 = StageMeters.cpu(stages);
                long sys1 = StageMeters.systemCpu(stages);
                long self1 = StageMeters.selfCpuNanos();
                Map<RagService.Role, ThreadTimes> used = StageMeters.since(threads0, StageMeters.threads(stages));
                long waited = StageMeters.runQueueNanos(used, StageMeters.self().since(selfThreads0));
                Map<RagService.Role, Map<ThreadKind, Double>> byKind = StageMeters.microsPerRequest(used, requests);
                TimeBudget budget = TimeBudget.of(res.latencyMicros().getMean() / 1000,
                        StageMeters.timesSince(times0, StageMeters.times(stages)), StageMeters.waits(used), requests);
                Map<RagService.Role, Double> cpuPct = new EnumMap<>(RagService.Role.class);
                Map<RagService.Role, Long> rss = new EnumMap<>(RagService.Role.class);
                for (RagService.Role role : RagService.Role.values()) {
                    int i = role.ordinal();
                    cpuPct.put(role, cpu0[i] < 0 || cpu1[i] < 0 ? -1 : 100.0 * (cpu1[i] - cpu0[i]) / (res.seconds() * 1e9));
                    rss.put(role, stages.get(role).rssBytes());
                }
                double maxRps = throughputSeconds > 0 ? load.closedLoop(inFlight, throughputSeconds) : Double.NaN;
                // No traffic: what each stage costs idle, and which of its threads cost it.
                Map<RagService.Role, Double> idle = new EnumMap<>(RagService.Role.class);
                Map<String, Double> idleThreads = new java.util.TreeMap<>();
                if (idleSeconds > 0 && !inProcess) {
                    Map<RagService.Role, ThreadTimes> t0 = StageMeters.threads(stages);
                    long w0 = System.nanoTime();
                    Thread.sleep((long) (idleSeconds * 1000));
                    double wall = (System.nanoTime() - w0) / 1e9;
                    Map<String, Long> idleUse = StageMeters.cpuByName(StageMeters.since(t0, StageMeters.threads(stages)));
                    for (RagService.Role role : RagService.Role.values()) {
                        idle.put(role, 0.0);
                    }
                    idleUse.forEach((name, d) -> {
                        if (d > 0) {
                            double pct = 100.0 * d / (wall * 1e9);
                            idleThreads.put(name, pct);
                            idle.merge(RagService.Role.valueOf(name.substring(0, name.indexOf('/')).toUpperCase(Locale.ROOT)),
                                    pct, Double::sum);
                        }
                    });
                }
                long[] st1 = StageMeters.counters(fast, sockmap);
                long runs1 = fast && sockmap != null ? sockmap.verdictRunCount() : 0;
                if (res.failed() > 0) {
                    out.printf("  %d requests failed; the first: %s%n", res.failed(), res.firstError());
                }
                return new RagReport.Run(fast, res.latencyMicros(), rate, res.rps(), res.failed(), maxRps, cpuPct, rss,
                        100.0 * (self1 - self0) / (res.seconds() * 1e9),
                        sys0 < 0 || sys1 < 0 ? -1 : 100.0 * (sys1 - sys0) / (res.seconds() * 1e9), runs1 - runs0,
                        st1[0] - st0[0], st1[1] - st0[1], st1[2] - st0[2], idle, idleThreads,
                        waited < 0 ? -1 : waited / 1e6 / requests, byKind, budget);
            } finally {
                gw.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
            }
        } finally {
            // The gateway first: it holds channels to the others.
            Stage gw = stages.remove(RagService.Role.GATEWAY);
            if (gw != null) {
                gw.close();
            }
            stages.values().parallelStream().forEach(Stage::close);
            for (InetSocketAddress at : translated) {
                SockmapAdmin.removeService(sockmap.config().pinDirectory(), at);
            }
        }
    }

    private boolean node() {
        return topology.equals("node");
    }

    /**
     * The node topology's driver: builds the bed (a node namespace, five pods routed through it,
     * a Service VIP per stage NAT-ed to its pod), runs this demo again in the client pod (which
     * starts each stage in its pod and prints the tables), and removes the bed, also when the run
     * fails or is interrupted.
     */
    private int driveNode() throws Exception {
        if (!"root".equals(System.getProperty("user.name")) && !Files.isWritable(Path.of("/run"))) {
            System.err.println("the node topology builds network namespaces and needs root: run it as root, or pass "
                    + "--topology loopback");
            return 2;
        }
        NodeBed bed = NodeBed.create("rag", NodePods.CLIENT + 1);
        AtomicReference<Process> inPod = new AtomicReference<>();
        Thread cleanup = new Thread(() -> {
            try {
                stop(inPod.get()); // first the run in the pod: its stages and fast path go with it
                bed.close();
            } catch (IOException e) {
                System.err.println("removing the node bed: " + e.getMessage());
            }
        }, "rag-node-bed-cleanup");
        Runtime.getRuntime().addShutdownHook(cleanup);
        try {
            List<String> pods = new ArrayList<>();
            for (RagService.Role r : RagService.Role.values()) {
                bed.service(NodePods.vip(r), NodePods.port(r), NodeBed.podAddress(r.ordinal()) + ":" + NodePods.port(r));
                pods.add(bed.pod(r.ordinal()));
            }
            List<String> cmd = new ArrayList<>();
            cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
            cmd.addAll(ManagementFactory.getRuntimeMXBean().getInputArguments());
            cmd.add("-cp");
            cmd.add(System.getProperty("java.class.path"));
            cmd.add(RagDemo.class.getName());
            cmd.addAll(spec.commandLine().getParseResult().originalArgs());
            cmd.add("--node-pods=" + String.join(",", pods));
            Process p = new ProcessBuilder(NodeBed.inNetwork(bed.pod(NodePods.CLIENT), cmd))
                    .redirectError(ProcessBuilder.Redirect.INHERIT).start();
            inPod.set(p);
            p.getOutputStream().close();
            try (java.io.BufferedReader r = p.inputReader(java.nio.charset.StandardCharsets.UTF_8)) {
                String line;
                while ((line = r.readLine()) != null) {
                    out.println(line);
                }
            }
            return p.waitFor();
        } finally {
            stop(inPod.get());
            bed.close();
            try {
                Runtime.getRuntime().removeShutdownHook(cleanup);
            } catch (IllegalStateException exiting) {
                // the hook runs now; the bed is already gone
            }
        }
    }

    /**
     * Ends the run in the client pod, if it still runs: SIGTERM (its exit hooks close its fast path;
     * its stages stop when their input closes), SIGKILL after 30 s.
     */
    private static void stop(Process p) {
        if (p == null || !p.isAlive()) {
            return;
        }
        p.destroy();
        try {
            if (!p.waitFor(30, TimeUnit.SECONDS)) {
                System.err.println("the run in the client pod did not stop in 30 s: killing it");
                p.destroyForcibly().waitFor(5, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            p.destroyForcibly();
        }
    }

    private void startStages(boolean fast, RagService.Settings s, Map<RagService.Role, Stage> stages) throws IOException {
        RagService.Role[] backends = {RagService.Role.EMBEDDING, RagService.Role.SEARCH, RagService.Role.CONTEXT};
        if (inProcess) {
            for (RagService.Role r : backends) {
                stages.put(r, Stage.inProcess(r, s, fast));
            }
            stages.put(RagService.Role.GATEWAY, Stage.inProcess(RagService.Role.GATEWAY, s, fast, ports(stages, backends)));
            return;
        }
        List<String> flags = Stage.jvmFlags(stageHeap, profile);
        Duration timeout = Duration.ofSeconds(120);
        List<CompletableFuture<Stage>> starting = new ArrayList<>();
        for (RagService.Role r : backends) {
            starting.add(node() ? Stage.spawn(r, s, fast, flags, timeout, placement(r), List.of())
                    : Stage.spawn(r, s, fast, flags, timeout));
        }
        IOException failure = null;
        for (CompletableFuture<Stage> f : starting) {
            try {
                Stage st = Stage.await(f);
                stages.put(st.role, st);
            } catch (IOException e) {
                failure = failure == null ? e : failure;
            }
        }
        if (failure != null) {
            throw failure;
        }
        if (node()) {
            List<String> downstream = new ArrayList<>();
            for (RagService.Role r : backends) {
                downstream.add(NodePods.vip(r) + ":" + NodePods.port(r));
            }
            stages.put(RagService.Role.GATEWAY, Stage.await(Stage.spawn(RagService.Role.GATEWAY, s, fast, flags, timeout,
                    placement(RagService.Role.GATEWAY), downstream)));
            return;
        }
        stages.put(RagService.Role.GATEWAY, Stage.await(Stage.spawn(RagService.Role.GATEWAY, s, fast, flags, timeout,
                ports(stages, backends))));
    }

    /** A stage's place on the node: its pod's network namespace, its pod IP and port. */
    private Stage.Placement placement(RagService.Role r) {
        return new Stage.Placement(NodeBed.inNetwork(nodePods.get(r.ordinal()), List.of()),
                NodeBed.podAddress(r.ordinal()), NodePods.port(r));
    }

    private static int[] ports(Map<RagService.Role, Stage> stages, RagService.Role[] roles) {
        return Arrays.stream(roles).mapToInt(r -> stages.get(r).port()).toArray();
    }

    public static void main(String[] args) {
        System.exit(new CommandLine(new RagDemo()).execute(args));
    }
}
