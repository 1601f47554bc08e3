package io.github.sockmap4j.examples.rag;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.admin.SockmapAdmin;
import io.github.sockmap4j.netty.grpc.SockmapGrpc;
import io.github.sockmap4j.plots.Plots;
import io.github.sockmap4j.testbed.NodeBed;
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
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.LongSupplier;
import org.HdrHistogram.Histogram;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * The RAG pipeline in miniature on one machine, on plain TCP and on the sockmap fast path side by
 * side, measured in alternating slices (or one after the other with {@code --no-paired}): gateway →
 * embedding → vector search → context assembly, each stage its own JVM (or all in this one with
 * {@code --in-process}), gRPC between them, vectors as Arrow batches. A load generator sends
 * questions to the gateway at a fixed rate and prints P50/P99/P99.9, throughput, CPU % and RSS per
 * stage, the kernel's {@code sk_msg} run count, and the ratios fast/plain.
 */
@Command(name = "rag-demo", mixinStandardHelpOptions = true, sortOptions = false,
        description = "Runs the RAG pipeline demo on plain TCP and on the sockmap fast path, side by side in "
                + "alternating slices, and prints the comparison.")
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
    @Option(names = "--paired", negatable = true, defaultValue = "true", fallbackValue = "true",
            description = "both paths' stages up at once, each with its own ports and Services; the measured phase "
            + "alternates between them in --slices slices a path (ABBA), so that the machine's drift falls on both "
            + "alike (the default with both paths and a JVM per stage); --no-paired: one path after the other")
    boolean paired;
    @Option(names = "--slices", defaultValue = "10", description = "paired: slices of the measured phase a path, "
            + "--requests split among them (default ${DEFAULT-VALUE})")
    int slices;
    @Option(names = "--mode", defaultValue = "both", description = "both, plain or fast (default ${DEFAULT-VALUE})")
    String mode;
    @Option(names = "--in-process", description = "all stages in this JVM instead of one JVM each")
    boolean inProcess;
    @Option(names = "--profile", defaultValue = "standard", description = "how the fast path's event loops wait: "
            + "standard (they sleep, as the plain path's do) or polling (sockmap4j's polling profile) "
            + "(default ${DEFAULT-VALUE})")
    String profile;
    @Option(names = "--handlers", defaultValue = "loops", description = "where the stages run their handlers and "
            + "their channels' callbacks: loops (on the event loop that read the call, as services that never block "
            + "may: SockmapGrpc.runOnEventLoops) or pool (handed to gRPC's executor, gRPC's default) "
            + "(default ${DEFAULT-VALUE})")
    String handlers;
    @Option(names = "--plain-handlers", description = "the plain path's --handlers, if not the same: --plain-handlers "
            + "pool measures the fast path against plain TCP as gRPC runs by default")
    String plainHandlers;
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
        boolean askedPaired = spec != null && spec.commandLine().getParseResult().hasMatchedOption("--paired") && paired;
        if (askedPaired && (inProcess || !mode.equals("both"))) {
            System.err.println("--paired runs both paths, a JVM per stage: leave out --in-process and --mode");
            return 2;
        }
        paired &= !inProcess && mode.equals("both");
        if (paired && (slices < 1 || requests < slices)) {
            System.err.println("--slices is at least 1 and at most --requests, not " + slices);
            return 2;
        }
        if (inProcess && profile.equals("polling")) {
            System.err.println("--profile=polling needs a JVM per stage: leave out --in-process");
            return 2;
        }
        if (plainHandlers == null) {
            plainHandlers = handlers;
        }
        for (String h : List.of(handlers, plainHandlers)) {
            if (!List.of("loops", "pool").contains(h)) {
                System.err.println("--handlers and --plain-handlers are loops or pool, not '" + h + "'");
                return 2;
            }
        }
        if (inProcess && !plainHandlers.equals(handlers)) {
            System.err.println("--plain-handlers needs a JVM per stage: leave out --in-process");
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
            out.println("handlers: " + describeHandlers(handlers) + (plainHandlers.equals(handlers) ? " on both paths"
                    : " on the fast path; on the plain path " + describeHandlers(plainHandlers)));
            out.printf(Locale.ROOT, "load: %,d requests at %.0f/s per path after a warm-up (until the median settles); "
                    + "then %.0f s with %d in flight%n", requests, rate, throughputSeconds, inFlight);
            out.println(paired ? "paired: both paths' stages run at once; the measured phase alternates between them in "
                    + slices + " slices a path (ABBA), each after a second at the rate that is not counted\n"
                    : "each path's stages run on their own, one path after the other\n");
            List<RagReport.Run> plainRuns = new ArrayList<>();
            List<RagReport.Run> fastRuns = new ArrayList<>();
            for (int r = 0; r < rounds; r++) {
                if (paired) {
                    RagReport.Run[] both = runPaired(settings, r, sockmap);
                    plainRuns.add(both[0]);
                    fastRuns.add(both[1]);
                    continue;
                }
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
        try (Pipeline p = open(fast, s, round, sockmap, 0)) {
            warm(p, StageMeters.jitMeter(p.stages));
            PathMeter.Mark m = p.meter.mark();
            p.meter.add(m, p.load().fixedRate(requests, rate, p.label, out));
            double maxRps = throughput(p);
            Map<Pipeline, IdleUse> idle = idle(List.of(p));
            reportFailures(p);
            return p.meter.run(rate, maxRps, idle.get(p).byStage(), idle.get(p).byThread());
        }
    }

    /**
     * Both paths' pipelines at once (each its own ports and Services), both warmed, then the
     * measured phase in {@code --slices} slices a path, in the order ABBA ABBA... (the path that
     * goes first alternating by round): a drift of the machine, which moves one path's figures
     * between separate phases by more than the transport does, falls on both alike. Each slice
     * follows a second at the rate that is not counted.
     */
    private RagReport.Run[] runPaired(RagService.Settings s, int round, Sockmap sockmap) throws Exception {
        try (Pipeline plain = open(false, s, round, sockmap, 0);
                Pipeline fast = open(true, s, round, sockmap, NodePods.PAIRED_OFFSET)) {
            Pipeline first = round % 2 == 0 ? plain : fast;
            Pipeline second = first == plain ? fast : plain;
            LongSupplier plainJit = StageMeters.jitMeter(plain.stages);
            LongSupplier fastJit = StageMeters.jitMeter(fast.stages);
            LongSupplier jit = () -> {
                long a = plainJit.getAsLong();
                long b = fastJit.getAsLong();
                return a < 0 || b < 0 ? -1 : a + b;
            };
            warm(first, jit);
            warm(second, jit);
            int perSlice = Math.max(1, requests / slices);
            for (int k = 0; k < 2 * slices; k++) {
                Pipeline p = (k + 1) / 2 % 2 == 0 ? first : second;
                p.load().fixedRate(Math.max(1, (int) rate), rate, "lead-in", null);
                PathMeter.Mark m = p.meter.mark();
                PathMeter.Slice sl = p.meter.add(m, p.load().fixedRate(perSlice, rate, p.label, null));
                out.printf(Locale.ROOT, "  %-18s slice %d of %d: p50 %.2f ms, CPU of all stages %.1f%%%n", p.label,
                        p.meter.slices().size(), slices, sl.p50Millis(), sl.cpuPercent());
            }
            double[] p50 = new double[slices];
            double[] cpu = new double[slices];
            for (int i = 0; i < slices; i++) {
                PathMeter.Slice a = plain.meter.slices().get(i);
                PathMeter.Slice b = fast.meter.slices().get(i);
                p50[i] = b.p50Millis() / a.p50Millis();
                cpu[i] = b.cpuPercent() / a.cpuPercent();
            }
            out.println("  fast/plain by slice pair, min / median / max: P50 " + spread(p50) + ", CPU " + spread(cpu));
            double firstMax = throughput(first);
            double secondMax = throughput(second);
            Map<Pipeline, IdleUse> idle = idle(List.of(plain, fast));
            reportFailures(plain);
            reportFailures(fast);
            return new RagReport.Run[] {
                plain.meter.run(rate, first == plain ? firstMax : secondMax, idle.get(plain).byStage(), idle.get(plain).byThread()),
                fast.meter.run(rate, first == fast ? firstMax : secondMax, idle.get(fast).byStage(), idle.get(fast).byThread())};
        }
    }

    private static String describeHandlers(String h) {
        return h.equals("loops") ? "run on the event loop that read the call (SockmapGrpc.runOnEventLoops)"
                : "handed to gRPC's executor (gRPC's default)";
    }

    private static String spread(double[] v) {
        double[] s = v.clone();
        Arrays.sort(s);
        return String.format(Locale.ROOT, "%.2f / %.2f / %.2f", s[0], RagReport.quantile(s, 0.5), s[s.length - 1]);
    }

    /**
     * Starts a path's pipeline: its Services translated at connect (the fast path on the node),
     * its stages (ports {@code portOffset} above the node's usual ones), and the load generator's
     * channel to its gateway; a sample answer on the first round.
     */
    private Pipeline open(boolean fast, RagService.Settings s, int round, Sockmap sockmap, int portOffset) throws Exception {
        Pipeline p = new Pipeline(fast, (fast ? "sockmap fast path" : "plain TCP") + (rounds > 1 ? " #" + (round + 1) : ""),
                sockmap);
        try {
            if (node() && fast && sockmap != null && sockmap.isActive()) {
                // The internal hops' Services in the Service map: their connects go straight to the pods.
                for (RagService.Role r : List.of(RagService.Role.EMBEDDING, RagService.Role.SEARCH, RagService.Role.CONTEXT)) {
                    int port = NodePods.port(r) + portOffset;
                    p.translate(new InetSocketAddress(InetAddress.ofLiteral(NodePods.vip(r)), port),
                            new InetSocketAddress(InetAddress.ofLiteral(NodeBed.podAddress(r.ordinal())), port));
                }
            }
            startStages(fast, s, p.stages, portOffset);
            boolean firstShown = round == 0 && (!fast || mode.equals("fast"));
            if (firstShown) {
                out.println("search " + p.stages.get(RagService.Role.SEARCH).info());
            }
            RagService.Role gateway = RagService.Role.GATEWAY;
            InetSocketAddress gwAt = node()
                    ? new InetSocketAddress(InetAddress.ofLiteral(NodePods.vip(gateway)), NodePods.port(gateway) + portOffset)
                    : new InetSocketAddress(InetAddress.ofLiteral("127.0.0.1"), p.stages.get(gateway).port());
            String sample = p.dial(gwAt, seed).ask(Corpus.question(seed, 7));
            if (firstShown) {
                out.println("a sample answer's context:\n  " + sample.replace("\n", "\n  ") + "\n");
            }
            return p;
        } catch (Exception | Error e) {
            p.close();
            throw e;
        }
    }

    /**
     * Warm-up: as many requests as the stages take (so the JITs of five JVMs finish sooner), then
     * at the rate until the median settles and {@code jit} (the compilers' CPU since its last
     * call) says they are quiet.
     */
    private void warm(Pipeline p, LongSupplier jit) throws InterruptedException {
        double busy = p.load().closedLoop(inFlight, warmupSeconds);
        LoadGenerator.WarmUp w = p.load().warmUp(rate, 5, Math.max(5, maxWarmupSeconds), jit);
        out.printf(Locale.ROOT, "  %-18s warm-up %.0f s at %.0f rps + %.0f s at the rate: %s, %s (p50 %.2f ms)%n", p.label,
                warmupSeconds, busy, w.seconds(), w.settled() ? "the median settled" : "the median did NOT settle",
                w.jitQuiet() ? "the JIT quiet" : "the JIT still compiling", w.lastP50Millis());
    }

    private double throughput(Pipeline p) throws InterruptedException {
        return throughputSeconds > 0 ? p.load().closedLoop(inFlight, throughputSeconds) : Double.NaN;
    }

    private void reportFailures(Pipeline p) {
        if (p.meter.failed() > 0) {
            out.printf("  %s: %d requests failed; the first: %s%n", p.label, p.meter.failed(), p.meter.firstError());
        }
    }

    /** What a pipeline's stages used with no traffic: % of a CPU by stage and by thread name. */
    private record IdleUse(Map<RagService.Role, Double> byStage, Map<String, Double> byThread) {
    }

    /** No traffic for {@code --idle-seconds}: what each pipeline's stages cost idle, and which of their threads. */
    private Map<Pipeline, IdleUse> idle(List<Pipeline> pipelines) throws InterruptedException {
        Map<Pipeline, IdleUse> out = new HashMap<>();
        if (idleSeconds <= 0 || inProcess) {
            pipelines.forEach(p -> out.put(p, new IdleUse(new EnumMap<>(RagService.Role.class), new TreeMap<>())));
            return out;
        }
        Map<Pipeline, Map<RagService.Role, ThreadTimes>> t0 = new HashMap<>();
        pipelines.forEach(p -> t0.put(p, StageMeters.threads(p.stages)));
        long w0 = System.nanoTime();
        Thread.sleep((long) (idleSeconds * 1000));
        double wall = (System.nanoTime() - w0) / 1e9;
        for (Pipeline p : pipelines) {
            Map<String, Long> use = StageMeters.cpuByName(StageMeters.since(t0.get(p), StageMeters.threads(p.stages)));
            Map<RagService.Role, Double> byStage = new EnumMap<>(RagService.Role.class);
            Map<String, Double> byThread = new TreeMap<>();
            for (RagService.Role role : RagService.Role.values()) {
                byStage.put(role, 0.0);
            }
            use.forEach((name, d) -> {
                if (d > 0) {
                    double pct = 100.0 * d / (wall * 1e9);
                    byThread.put(name, pct);
                    byStage.merge(RagService.Role.valueOf(name.substring(0, name.indexOf('/')).toUpperCase(Locale.ROOT)),
                            pct, Double::sum);
                }
            });
            out.put(p, new IdleUse(byStage, byThread));
        }
        return out;
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
                for (int port : paired ? List.of(NodePods.port(r), NodePods.port(r) + NodePods.PAIRED_OFFSET)
                        : List.of(NodePods.port(r))) {
                    bed.service(NodePods.vip(r), port, NodeBed.podAddress(r.ordinal()) + ":" + port);
                }
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

    private void startStages(boolean fast, RagService.Settings s, Map<RagService.Role, Stage> stages, int portOffset)
            throws IOException {
        RagService.Role[] backends = {RagService.Role.EMBEDDING, RagService.Role.SEARCH, RagService.Role.CONTEXT};
        if (inProcess) {
            System.setProperty("rag.handlers", handlers);
            for (RagService.Role r : backends) {
                stages.put(r, Stage.inProcess(r, s, fast));
            }
            stages.put(RagService.Role.GATEWAY, Stage.inProcess(RagService.Role.GATEWAY, s, fast, ports(stages, backends)));
            return;
        }
        List<String> flags = Stage.jvmFlags(stageHeap, profile, fast ? handlers : plainHandlers);
        Duration timeout = Duration.ofSeconds(120);
        List<CompletableFuture<Stage>> starting = new ArrayList<>();
        for (RagService.Role r : backends) {
            starting.add(node() ? Stage.spawn(r, s, fast, flags, timeout, placement(r, portOffset), List.of())
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
                downstream.add(NodePods.vip(r) + ":" + (NodePods.port(r) + portOffset));
            }
            stages.put(RagService.Role.GATEWAY, Stage.await(Stage.spawn(RagService.Role.GATEWAY, s, fast, flags, timeout,
                    placement(RagService.Role.GATEWAY, portOffset), downstream)));
            return;
        }
        stages.put(RagService.Role.GATEWAY, Stage.await(Stage.spawn(RagService.Role.GATEWAY, s, fast, flags, timeout,
                ports(stages, backends))));
    }

    /** A stage's place on the node: its pod's network namespace, its pod IP and port ({@code portOffset} above its usual one). */
    private Stage.Placement placement(RagService.Role r, int portOffset) {
        return new Stage.Placement(NodeBed.inNetwork(nodePods.get(r.ordinal()), List.of()),
                NodeBed.podAddress(r.ordinal()), NodePods.port(r) + portOffset);
    }

    private static int[] ports(Map<RagService.Role, Stage> stages, RagService.Role[] roles) {
        return Arrays.stream(roles).mapToInt(r -> stages.get(r).port()).toArray();
    }

    public static void main(String[] args) {
        System.exit(new CommandLine(new RagDemo()).execute(args));
    }
}
