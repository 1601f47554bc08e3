package io.github.sockmap4j.examples.rag;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.admin.SockmapAdmin;
import io.github.sockmap4j.netty.grpc.SockmapGrpc;
import io.github.sockmap4j.plots.Plots;
import io.github.sockmap4j.testbed.NodeBed;
import java.io.Closeable;
import java.io.IOException;
import java.io.PrintStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
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
    @Option(names = "--rate", defaultValue = "100", description = "requests per second offered: given, one point "
            + "at this rate instead of the load curve (--requests of them a path); the warm-up's rate either way "
            + "(default ${DEFAULT-VALUE})")
    double rate;
    @Option(names = "--loads", split = ",", defaultValue = "0.1,0.4,0.7,0.85", description = "the load curve's points, "
            + "as fractions of plain TCP's maximum throughput measured in the same round (default ${DEFAULT-VALUE})")
    List<String> loads;
    @Option(names = "--seconds-per-load", defaultValue = "10", description = "measured seconds a path at each load of "
            + "the curve, in --slices slices (default ${DEFAULT-VALUE})")
    double secondsPerLoad;
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
    @Option(names = "--mesh", description = "the pipeline meshed (docs/mesh.md): every pod of the node with Istio's NAT "
            + "and an HAProxy sidecar (uid 1337, ports 15001/15006), every stage unchanged (grpc-netty on epoll) on "
            + "both paths; plain: the pods' NAT sends every leg by TCP; fast path: the pods meshed in the kernel, as "
            + "'sockmap4j agent --kubernetes --mesh' puts them, so that every leg is redirected (node topology, both paths)")
    boolean mesh;
    /** Set by the node topology's driver with --mesh: each pod's network namespace (its cookie), in pod order. */
    @Option(names = "--mesh-netns", hidden = true, split = ",")
    List<Long> meshNetns = List.of();
    /** Set by the node topology's driver with --mesh: each pod's sidecar's process id, in pod order. */
    @Option(names = "--mesh-proxies", hidden = true, split = ",")
    List<Long> meshProxies = List.of();

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    private final PrintStream out;
    /** The phases of a round, with this run's settings (made once the options are checked). */
    private Phases phases;

    /** Whether this run measures the load curve (paired, no --rate), and at which fractions of plain TCP's maximum. */
    private boolean curve;
    private List<Double> loadFractions = List.of();
    /** With --mesh and the fast path active: the pods in the kernel's mesh, and each round's legs. */
    private MeshedNode.InKernel meshed;

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
        boolean rateGiven = spec != null && spec.commandLine().getParseResult().hasMatchedOption("--rate");
        curve = paired && !rateGiven;
        if (curve) {
            try {
                loadFractions = LoadCurve.parse(loads);
            } catch (IllegalArgumentException e) {
                System.err.println(e.getMessage());
                return 2;
            }
            if (throughputSeconds <= 0 || secondsPerLoad <= 0) {
                System.err.println("the load curve measures plain TCP's maximum first: --throughput-seconds and "
                        + "--seconds-per-load must be positive (or give --rate for one point)");
                return 2;
            }
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
        if (mesh && (!node() || !paired)) {
            System.err.println("--mesh runs both paths at once in the node topology's pods: leave out --topology, "
                    + "--no-paired, --mode and --in-process");
            return 2;
        }
        if (mesh && profile.equals("polling")) {
            System.err.println("--mesh runs every stage unchanged on both paths: leave out --profile=polling");
            return 2;
        }
        if (node() && nodePods == null) {
            return NodeDriver.run(RagDemo.class, spec.commandLine().getParseResult().originalArgs(), paired, mesh, out);
        }
        phases = new Phases(out, rate, inFlight, warmupSeconds, maxWarmupSeconds, throughputSeconds, slices);
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
                    if (mesh) {
                        if (meshNetns.size() != NodePods.CLIENT + 1) {
                            System.err.println("--mesh: the driver gave " + meshNetns.size() + " pods' namespaces");
                            return 2;
                        }
                        meshed = new MeshedNode.InKernel(sockmap.config().pinDirectory(), meshNetns);
                    }
                }
            }
            out.printf(Locale.ROOT, "RAG pipeline: gateway -> embedding -> search -> context, %s; %,d chunks x %d dims, "
                    + "%d candidates with vectors, top-%d at score >= %.2f%n",
                    inProcess ? "all in this JVM" : "one JVM each", docs, dim, candidates, topK, threshold);
            if (mesh) {
                out.println("mesh: every pod with Istio's NAT and an HAProxy sidecar (uid " + MeshedNode.PROXY_UID
                        + ", TCP, relaying to each connection's original destination); every stage unchanged, stock "
                        + "grpc-netty on epoll, on both paths. plain: the pods' NAT sends each connection through both "
                        + "proxies, every leg by TCP. fast path: the same pods meshed in the kernel (as the agent's mesh "
                        + "mode puts them) before its pipeline connects, so that its connects go straight to the proxies "
                        + "and every leg is redirected; the plain pipeline's connections, made before, stay as they are");
            }
            out.println(node() ? "topology: node: each stage and the load generator in a pod of its own, routed "
                    + "through a node namespace; every hop dials a Service VIP (kube-proxy-style DNAT in the node; on "
                    + "the fast path the internal hops' connects are translated to their pods)"
                    : "topology: loopback: every stage on this host's loopback (127.0.0.1)");
            out.println("event loops: " + (profile.equals("polling") ? "the fast path's poll up to "
                    + SockmapGrpc.Profile.POLLING.maxPoll().toNanos() / 1000 + " us before they sleep, and so do the "
                    + "threads of its handlers' executor (SockmapGrpc.Profile.POLLING); the plain path's sleep" : "both paths' sleep until an event comes (SockmapGrpc.Profile.STANDARD)"));
            out.println("handlers: " + describeHandlers(handlers) + (plainHandlers.equals(handlers) ? " on both paths"
                    : " on the fast path; on the plain path " + describeHandlers(plainHandlers)));
            out.println("co-located transport: " + (io.github.sockmap4j.colocated.grpc.ColocatedGrpc.enabled()
                    ? "on for the fast path (the default" + (System.getProperty("sockmap4j.colocated.brokerDir")
                    == null ? "" : ", a broker directory all its stages are given") + "): where two stages agree, their "
                    + "calls go over shared rings, not HTTP/2 (docs/colocated.md; COLOCATED=false to leave it off)"
                    : "off (-Dsockmap4j.colocated=false: HTTP/2 over the fast path's sockets)"));
            if (curve) {
                StringBuilder at = new StringBuilder();
                loadFractions.forEach(f -> at.append(at.length() == 0 ? "" : ", ").append(Math.round(100 * f)).append('%'));
                out.printf(Locale.ROOT, "load: a warm-up at %.0f/s per path (until the median settles), then each "
                        + "path's maximum throughput with %d in flight (%.0f s), then the load curve: %s of plain TCP's "
                        + "maximum, at each both paths at the load until their JIT compilers are quiet, then %.0f s a "
                        + "path measured (give --rate for one point)%n", rate, inFlight,
                        throughputSeconds, at, secondsPerLoad);
            } else {
                out.printf(Locale.ROOT, "load: %,d requests at %.0f/s per path after a warm-up (until the median settles); "
                        + "then %.0f s with %d in flight%n", requests, rate, throughputSeconds, inFlight);
            }
            out.println(paired ? "paired: both paths' stages run at once; the measured phase alternates between them in "
                    + slices + " slices a path (ABBA), each after a second at the rate that is not counted\n"
                    : "each path's stages run on their own, one path after the other\n");
            if (curve) {
                return reportCurve(settings, sockmap);
            }
            List<RagReport.Run> plainRuns = new ArrayList<>();
            List<RagReport.Run> fastRuns = new ArrayList<>();
            for (int r = 0; r < rounds; r++) {
                if (paired) {
                    int n = r;
                    Sockmap sm = sockmap;
                    RagReport.Run[] both = round(() -> runPaired(settings, n, sm));
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
                    return RagReport.nothingRedirected(out);
                }
            }
            return meshReport();
        } finally {
            if (meshed != null) {
                meshed.close();
            }
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
            phases.warm(p, StageMeters.jitMeter(p.stages));
            PathMeter.Mark m = p.meter.mark();
            p.meter.add(m, p.load().fixedRate(requests, rate, p.label, out));
            double maxRps = phases.throughput(p);
            Map<Pipeline, IdleUse> idle = IdleUse.measure(List.of(p), idleSeconds, inProcess);
            phases.reportFailures(p);
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
            phases.warmBoth(first, second);
            phases.measureSlices(plain, fast, first, second, rate, Math.max(1, requests / slices));
            double firstMax = phases.throughput(first);
            double secondMax = phases.throughput(second);
            Map<Pipeline, IdleUse> idle = IdleUse.measure(List.of(plain, fast), idleSeconds, inProcess);
            phases.reportFailures(plain);
            phases.reportFailures(fast);
            return new RagReport.Run[] {
                plain.meter.run(rate, first == plain ? firstMax : secondMax, idle.get(plain).byStage(), idle.get(plain).byThread()),
                fast.meter.run(rate, first == fast ? firstMax : secondMax, idle.get(fast).byStage(), idle.get(fast).byThread())};
        }
    }

    /**
     * One round of the load curve: both pipelines up and warmed as {@link #runPaired} does, each
     * path's maximum throughput (closed loop; the path that goes first alternating by round), then
     * both paths measured in slices at each load, a fraction of plain TCP's maximum of this round.
     */
    private List<LoadCurve.Point> runCurve(RagService.Settings s, int round, Sockmap sockmap) throws Exception {
        try (Pipeline plain = open(false, s, round, sockmap, 0);
                Pipeline fast = open(true, s, round, sockmap, NodePods.PAIRED_OFFSET)) {
            Pipeline first = round % 2 == 0 ? plain : fast;
            Pipeline second = first == plain ? fast : plain;
            phases.warmBoth(first, second);
            double firstMax = phases.throughput(first);
            double secondMax = phases.throughput(second);
            double plainMax = first == plain ? firstMax : secondMax;
            double fastMax = first == fast ? firstMax : secondMax;
            out.printf(Locale.ROOT, "  maximum throughput with %d in flight: plain TCP %.0f rps, fast path %.0f rps "
                    + "(%.2f)%n", inFlight, plainMax, fastMax, fastMax / plainMax);
            List<PathMeter[]> meters = new ArrayList<>();
            for (double f : loadFractions) {
                double at = f * plainMax;
                int perSlice = Math.max(1, (int) Math.round(at * secondsPerLoad / slices));
                out.printf(Locale.ROOT, "  at %.0f%% of plain TCP's maximum: %.0f rps, %,d requests a path%n",
                        100 * f, at, perSlice * slices);
                meters.add(new PathMeter[] {plain.freshMeter(), fast.freshMeter()});
                phases.settle(first, second, at);
                phases.measureSlices(plain, fast, first, second, at, perSlice);
                phases.reportFailures(plain);
                phases.reportFailures(fast);
            }
            Map<Pipeline, IdleUse> idle = IdleUse.measure(List.of(plain, fast), idleSeconds, inProcess);
            List<LoadCurve.Point> points = new ArrayList<>();
            for (int k = 0; k < loadFractions.size(); k++) {
                double at = loadFractions.get(k) * plainMax;
                points.add(new LoadCurve.Point(loadFractions.get(k), at,
                        meters.get(k)[0].run(at, plainMax, idle.get(plain).byStage(), idle.get(plain).byThread()),
                        meters.get(k)[1].run(at, fastMax, idle.get(fast).byStage(), idle.get(fast).byThread())));
            }
            return points;
        }
    }

    /**
     * The load curve's rounds, then for each load the demo's tables (medians over the rounds), the
     * curve's table last, and the plots when asked.
     */
    private int reportCurve(RagService.Settings settings, Sockmap sockmap) throws Exception {
        List<List<LoadCurve.Point>> byRound = new ArrayList<>();
        for (int r = 0; r < rounds; r++) {
            out.println("round " + (r + 1) + " of " + rounds + ":");
            int n = r;
            byRound.add(round(() -> runCurve(settings, n, sockmap)));
        }
        for (int k = 0; k < loadFractions.size(); k++) {
            List<RagReport.Run> plainRuns = new ArrayList<>();
            List<RagReport.Run> fastRuns = new ArrayList<>();
            double[] at = new double[rounds];
            for (int r = 0; r < rounds; r++) {
                plainRuns.add(byRound.get(r).get(k).plain());
                fastRuns.add(byRound.get(r).get(k).fast());
                at[r] = byRound.get(r).get(k).rate();
            }
            Arrays.sort(at);
            double rps = RagReport.quantile(at, 0.5);
            out.printf(Locale.ROOT, "%n## At %.0f%% of plain TCP's maximum throughput (%.0f requests/s offered)%n%n",
                    100 * loadFractions.get(k), rps);
            new RagReport(out, rounds, rps, throughputSeconds, inFlight, false, idleSeconds).print(plainRuns, fastRuns);
        }
        out.println("\n## The load curve, fast/plain in brackets\n");
        LoadCurve.print(out, byRound);
        if (plot != null) {
            LoadCurve.plot(plot, byRound);
            out.println("\nplots: " + plot + ", " + LoadCurve.cpuFileFor(plot));
        }
        if (sockmap != null && sockmap.isActive()
                && byRound.get(0).stream().mapToLong(p -> p.fast().bytesRedirected()).sum() == 0) {
            return RagReport.nothingRedirected(out);
        }
        return meshReport();
    }

    /** Runs a round; with --mesh, what its legs moved is recorded for {@link #meshReport}. */
    private <T> T round(Callable<T> body) throws Exception {
        return meshed == null ? body.call() : meshed.round(body);
    }

    /** With --mesh, each round's legs, and 1 when a leg fell short (see {@link MeshedNode.InKernel#report}). */
    private int meshReport() {
        return meshed == null ? 0 : meshed.report(out);
    }

    private static String describeHandlers(String h) {
        return h.equals("loops") ? "run on the event loop that read the call (SockmapGrpc.runOnEventLoops)"
                : "handed to gRPC's executor (gRPC's default)";
    }

    /**
     * Starts a path's pipeline: its Services translated at connect (the fast path on the node),
     * its stages (ports {@code portOffset} above the node's usual ones), and the load generator's
     * channel to its gateway; a sample answer on the first round.
     */
    private Pipeline open(boolean fast, RagService.Settings s, int round, Sockmap sockmap, int portOffset) throws Exception {
        Pipeline p = new Pipeline(fast, (fast ? "sockmap fast path" : "plain TCP") + (rounds > 1 ? " #" + (round + 1) : ""),
                sockmap, meshProxies);
        try {
            if (meshed != null) {
                // Capture is decided at connect: the plain pipeline connects with the pods out of the
                // kernel's mesh (their NAT carries it), the fast one after they are put in.
                meshed.mesh(fast);
            }
            if (node() && fast && sockmap != null && sockmap.isActive()) {
                // The internal hops' Services in the Service map: their connects go straight to the pods
                // (meshed: the proxies' connects, to the pods' inbound ports, the gateway's too, as the
                // agent puts every Service of the cluster).
                for (RagService.Role r : mesh ? List.of(RagService.Role.values())
                        : List.of(RagService.Role.EMBEDDING, RagService.Role.SEARCH, RagService.Role.CONTEXT)) {
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

    private boolean node() {
        return topology.equals("node");
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
        fast &= !mesh; // meshed, every stage runs unchanged: the kernel's mesh mode is the fast path
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
