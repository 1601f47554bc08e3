package io.github.sockmap4j.bench;

import io.github.sockmap4j.MeshStats;
import io.github.sockmap4j.SockmapStats;
import io.github.sockmap4j.admin.SockmapAdmin;
import io.github.sockmap4j.agent.NodeAgent;
import io.github.sockmap4j.testbed.Cgroup2;
import io.github.sockmap4j.testbed.NodeBed;
import io.github.sockmap4j.testbed.Sidecar;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Round trips between two meshed pods of the node bed (docs/mesh.md): pods 0 and 1 each with
 * Debian's HAProxy as its sidecar (uid 1337, TCP mode, relaying to each connection's original
 * destination) and the NAT Istio's init container writes; C peers (podpingpong) as the
 * applications, pod 0's client dialing pod 1's server, so that each round trip crosses
 * application, proxy, proxy, application both ways. Each round measures both paths in turns (the
 * order flips each round): the pods meshed in the kernel (the agent's mesh mode, put here as the
 * agent puts them) and not (the pods' NAT, every leg by TCP). Medians of per-round p50 and p99,
 * and each leg's share of bytes redirected.
 *
 * Usage: {@code MeshRttBench ROUNDS ITERATIONS SIZE} ({@code -Dmesh.only=accelerated|plain}: that path
 * alone, for a profiler; {@code -Dmesh.agent=false}: the node set up as {@code sockmap4j up} does, with
 * no agent, so no in-flight watcher); run by {@code scripts/bench.sh mesh}.
 */
public final class MeshRttBench {
    static final int PORT = 46410;
    static final int PROXY_UID = 1337;
    static final int OUT = 15001;
    static final int IN = 15006;

    private MeshRttBench() {
    }

    public static void main(String[] args) throws Exception {
        BenchRun run = BenchRun.of("MeshRttBench ROUNDS ITERATIONS SIZE", args);
        int rounds = run.intArg(0, 5);
        int iterations = run.intArg(1, 20_000);
        int size = run.intArg(2, 64);
        Path binary = NodeRttBench.podPingPong();
        Path cgroup = Cgroup2.create("meshrtt");
        Path pins = Path.of("/sys/fs/bpf").resolve(Cgroup2.uniqueName("meshrtt"));
        Path config = Files.createTempFile("sockmap4j-sidecar", ".cfg");
        List<String> sidecar = new ArrayList<>(List.of("setpriv", "--reuid=" + PROXY_UID, "--regid=" + PROXY_UID,
                "--clear-groups"));
        sidecar.addAll(Sidecar.haproxy(config, OUT, IN, Integer.getInteger("sidecar.threads", 0)));
        List<Process> sidecars = new ArrayList<>();
        try (NodeBed bed = NodeBed.create("mr", 2)) {
            List<SockmapAdmin.MeshedPod> pods = new ArrayList<>();
            for (int i = 0; i < 2; i++) {
                bed.istioSidecarNat(i, PROXY_UID, OUT, IN);
                sidecars.add(NodeRttBench.start(NodeRttBench.inCgroup(cgroup, NodeBed.in(bed.pod(i), sidecar))));
            }
            for (int i = 0; i < 2; i++) {
                int pod = i;
                // The sidecar's pid is its pod's process (sh, ip netns exec and setpriv each exec the next).
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
                while (!Sidecar.listens(bed.pod(pod), IN)) {
                    if (System.nanoTime() > deadline || !sidecars.get(pod).isAlive()) {
                        throw new IllegalStateException("pod " + pod + "'s sidecar did not listen");
                    }
                    Thread.sleep(50);
                }
                pods.add(SockmapAdmin.MeshedPod.istio(SockmapAdmin.networkNamespaceOf(sidecars.get(pod).pid()), PROXY_UID,
                        OUT, IN, List.of(InetAddress.ofLiteral(NodeBed.podAddress(pod)),
                        InetAddress.ofLiteral(NodeBed.podAddress6(pod))), List.of(),
                        SockmapAdmin.MeshedPod.ISTIO_INBOUND_SKIP));
            }
            try {
                if (Boolean.parseBoolean(System.getProperty("mesh.agent", "true"))) {
                    try (NodeAgent agent = NodeAgent.start(new NodeAgent.Options(pins, List.of(cgroup), null, 65535,
                            false))) {
                        if (!agent.isReady()) {
                            throw new IllegalStateException("the agent is not ready");
                        }
                        run(bed, binary, cgroup, pins, pods, rounds, iterations, size);
                    }
                } else {
                    // As 'sockmap4j up' sets a node up: the programs and maps, no agent and so no in-flight watcher.
                    SockmapAdmin.up(io.github.sockmap4j.SockmapConfig.builder().pinDirectory(pins).cgroup(cgroup)
                            .required(true).probe(false).build());
                    run(bed, binary, cgroup, pins, pods, rounds, iterations, size);
                }
            } finally {
                SockmapAdmin.of(pins).removePins();
            }
        } finally {
            for (Process p : sidecars) {
                p.destroy();
                p.waitFor(10, TimeUnit.SECONDS);
            }
            Files.deleteIfExists(config);
            while (!Files.readString(cgroup.resolve("cgroup.procs")).isBlank()) {
                Thread.onSpinWait(); // the last peers exiting
            }
            Files.delete(cgroup);
        }
    }

    private static void run(NodeBed bed, Path binary, Path cgroup, Path pins, List<SockmapAdmin.MeshedPod> pods,
                            int rounds, int iterations, int size) throws Exception {
        System.out.printf(Locale.ROOT, "Meshed node bed: %d rounds of %d round trips of %d B per path (C peers in pods "
                + "0 and 1, HAProxy sidecars, Istio's NAT; both paths each round, in turns; medians of per-round "
                + "p50/p99, µs)%n%n", rounds, iterations, size);
        NodeRttBench.Case c = new NodeRttBench.Case("meshed", NodeBed.podAddress(1), PORT, 1, true, true, null);
        Map<String, double[][]> figures = new LinkedHashMap<>();
        Map<String, long[]> legs = new LinkedHashMap<>();
        SockmapAdmin admin = SockmapAdmin.of(pins);
        for (int r = 0; r < rounds; r++) {
            String only = System.getProperty("mesh.only", "");
            boolean[] turns = only.equals("accelerated") ? new boolean[] {true} : only.equals("plain")
                    ? new boolean[] {false} : r % 2 == 0 ? new boolean[] {true, false} : new boolean[] {false, true};
            for (boolean accelerated : turns) {
                String name = accelerated ? "accelerated (the kernel's meshed pods)" : "plain (the pods' NAT)";
                for (SockmapAdmin.MeshedPod p : pods) {
                    if (accelerated) {
                        admin.putMeshedPod(p);
                    } else {
                        admin.removeMeshedPod(p.netns());
                    }
                }
                SockmapStats before = admin.stats();
                long cpu0 = ProcessHandle.current().info().totalCpuDuration().orElseThrow().toNanos();
                long[] p = NodeRttBench.once(bed, binary, cgroup, pins, c, size, iterations, PingPong.Placement.ANY,
                        null);
                long cpu = ProcessHandle.current().info().totalCpuDuration().orElseThrow().toNanos() - cpu0;
                SockmapStats after = admin.stats();
                figures.computeIfAbsent(name, k -> new double[3][rounds]);
                figures.get(name)[2][r] = cpu / 1e6;
                figures.get(name)[0][r] = p[0] / 1e3;
                figures.get(name)[1][r] = p[1] / 1e3;
                long[] k = legs.computeIfAbsent(name, x -> new long[10]);
                k[7] += after.boundHits() - before.boundHits();
                k[8] += after.resumes() - before.resumes();
                k[9] += after.messagesPassed() - before.messagesPassed();
                MeshStats b = before.mesh();
                MeshStats a = after.mesh();
                k[0] += a.appToProxy().bytesRedirected() - b.appToProxy().bytesRedirected();
                k[1] += a.appToProxy().bytesByTcp() - b.appToProxy().bytesByTcp();
                k[2] += a.proxyToProxy().bytesRedirected() - b.proxyToProxy().bytesRedirected();
                k[3] += a.proxyToProxy().bytesByTcp() - b.proxyToProxy().bytesByTcp();
                k[4] += a.proxyToApp().bytesRedirected() - b.proxyToApp().bytesRedirected();
                k[5] += a.proxyToApp().bytesByTcp() - b.proxyToApp().bytesByTcp();
                k[6] += a.captured() - b.captured();
            }
        }
        for (SockmapAdmin.MeshedPod p : pods) {
            admin.removeMeshedPod(p.netns());
        }
        String base = "plain (the pods' NAT)";
        if (!figures.containsKey(base)) {
            base = figures.keySet().iterator().next();
        }
        System.out.printf(Locale.ROOT, "| path | p50 | p99 | p50 / plain | p99 / plain | connects captured | "
                + "app-proxy redirected | proxy-proxy redirected | proxy-app redirected | the agent's JVM, CPU ms a turn |%n");
        System.out.printf(Locale.ROOT, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|%n");
        for (Map.Entry<String, double[][]> e : figures.entrySet()) {
            double p50 = Medians.of(e.getValue()[0]);
            double p99 = Medians.of(e.getValue()[1]);
            long[] k = legs.get(e.getKey());
            System.out.printf(Locale.ROOT, "| %s | %.1f | %.1f | %.2f | %.2f | %d | %s | %s | %s | %.0f |%n", e.getKey(),
                    p50, p99, p50 / Medians.of(figures.get(base)[0]), p99 / Medians.of(figures.get(base)[1]), k[6],
                    share(k[0], k[1]), share(k[2], k[3]), share(k[4], k[5]), Medians.of(e.getValue()[2]));
        }
        for (Map.Entry<String, long[]> e : legs.entrySet()) {
            System.out.printf(Locale.ROOT, "%s: %d bound hits, %d resumes, %d sends of registered sockets by TCP%n",
                    e.getKey(), e.getValue()[7], e.getValue()[8], e.getValue()[9]);
        }
        System.out.println("(a leg's bytes counted once both its sockets have sent their FIN; the plain path's legs"
                + " register no socket, so their bytes are not counted at all)");
    }

    private static String share(long redirected, long tcp) {
        return redirected + tcp == 0 ? "-" : String.format(Locale.ROOT, "%.4f (%d B)", (double) redirected
                / (redirected + tcp), redirected + tcp);
    }
}
