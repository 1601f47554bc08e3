package io.github.sockmap4j.examples.rag;

import io.github.sockmap4j.MeshStats;
import io.github.sockmap4j.SockmapStats;
import io.github.sockmap4j.admin.SockmapAdmin;
import io.github.sockmap4j.testbed.NodeBed;
import io.github.sockmap4j.testbed.Sidecar;
import java.io.IOException;
import java.io.PrintStream;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;

/**
 * The demo's meshed node ({@code --mesh}, docs/mesh.md): every pod with the NAT Istio's init
 * container writes and Debian's HAProxy as its sidecar (uid {@value #PROXY_UID}, outbound port
 * {@value #OUTBOUND}, inbound {@value #INBOUND}, relaying to each connection's original
 * destination); the pods meshed in the kernel as the agent's mesh mode puts them
 * ({@link SockmapAdmin#putMeshedPod}), or not, and what each leg of a meshed request moved
 * ({@link InKernel}).
 */
final class MeshedNode {
    static final int PROXY_UID = 1337;
    static final int OUTBOUND = 15001;
    static final int INBOUND = 15006;

    private MeshedNode() {
    }

    /**
     * Gives each of {@code bed}'s pods Istio's NAT and starts its sidecar (added to {@code sidecars}
     * as it starts, so that a failure stops those already up), waits until each listens, and returns
     * the hidden options that tell the run in the client pod the pods' network namespaces and the
     * sidecars' process ids, in pod order.
     */
    static List<String> start(NodeBed bed, Path config, List<Process> sidecars) throws IOException, InterruptedException {
        List<String> proxy = new ArrayList<>(List.of("setpriv", "--reuid=" + PROXY_UID, "--regid=" + PROXY_UID,
                "--clear-groups"));
        proxy.addAll(Sidecar.haproxy(config, OUTBOUND, INBOUND, 0));
        int pods = NodePods.CLIENT + 1;
        for (int i = 0; i < pods; i++) {
            bed.istioSidecarNat(i, PROXY_UID, OUTBOUND, INBOUND);
            // ip netns exec and setpriv each exec the next: the process is the proxy itself.
            sidecars.add(new ProcessBuilder(NodeBed.in(bed.pod(i), proxy)).redirectOutput(ProcessBuilder.Redirect.DISCARD)
                    .redirectError(ProcessBuilder.Redirect.INHERIT).start());
        }
        List<String> netns = new ArrayList<>();
        List<String> pids = new ArrayList<>();
        for (int i = 0; i < pods; i++) {
            Process p = sidecars.get(i);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (!(Sidecar.listens(bed.pod(i), OUTBOUND) && Sidecar.listens(bed.pod(i), INBOUND))) {
                if (!p.isAlive() || System.nanoTime() > deadline) {
                    throw new IOException("pod " + i + "'s sidecar (HAProxy) " + (p.isAlive() ? "did not listen on "
                            + OUTBOUND + " and " + INBOUND + " in 30 s" : "exited with " + p.exitValue())
                            + "; its messages are above");
                }
                Thread.sleep(50); // polls the condition: ss answers in a few ms
            }
            netns.add(Long.toString(SockmapAdmin.networkNamespaceOf(p.pid())));
            pids.add(Long.toString(p.pid()));
        }
        return List.of("--mesh-netns=" + String.join(",", netns), "--mesh-proxies=" + String.join(",", pids));
    }

    /** Stops the sidecars (SIGTERM, SIGKILL after 10 s) and removes their configuration. */
    static void stop(List<Process> sidecars, Path config) throws IOException {
        for (Process p : sidecars) {
            p.destroy();
        }
        for (Process p : sidecars) {
            try {
                if (!p.waitFor(10, TimeUnit.SECONDS)) {
                    p.destroyForcibly().waitFor(5, TimeUnit.SECONDS);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                p.destroyForcibly();
            }
        }
        sidecars.clear();
        if (config != null) {
            Files.deleteIfExists(config);
        }
    }

    /** The pods as the agent's mesh mode puts them: pod {@code i}'s namespace {@code netns.get(i)}, its addresses. */
    private static List<SockmapAdmin.MeshedPod> pods(List<Long> netns) {
        List<SockmapAdmin.MeshedPod> out = new ArrayList<>();
        for (int i = 0; i < netns.size(); i++) {
            out.add(SockmapAdmin.MeshedPod.istio(netns.get(i), PROXY_UID, OUTBOUND, INBOUND,
                    List.of(InetAddress.ofLiteral(NodeBed.podAddress(i)), InetAddress.ofLiteral(NodeBed.podAddress6(i))),
                    List.of(), SockmapAdmin.MeshedPod.ISTIO_INBOUND_SKIP));
        }
        return out;
    }

    /**
     * A run's meshed pods in the kernel (where {@code pins} are): put in as the agent's mesh mode
     * puts them, or taken out (connects made from then on follow), and what the legs of each round
     * moved. Closing it takes the pods out.
     */
    static final class InKernel implements AutoCloseable {
        private final SockmapAdmin admin;
        private final List<SockmapAdmin.MeshedPod> pods;
        private final List<Round> rounds = new ArrayList<>();

        /** The pods of namespaces {@code netns}, in pod order. */
        InKernel(Path pins, List<Long> netns) {
            this.admin = SockmapAdmin.of(pins);
            this.pods = pods(netns);
        }

        /** Meshes the pods ({@code on}) or takes them out. */
        void mesh(boolean on) throws IOException {
            for (SockmapAdmin.MeshedPod p : pods) {
                if (on) {
                    admin.putMeshedPod(p);
                } else {
                    admin.removeMeshedPod(p.netns());
                }
            }
        }

        /**
         * Runs one round ({@code body}, which opens and closes its pipelines) and records what the
         * kernel counted of meshed pods from its first connect to its last socket's close.
         */
        <T> T round(java.util.concurrent.Callable<T> body) throws Exception {
            SockmapStats before = admin.stats();
            T result = body.call();
            rounds.add(since(before));
            return result;
        }

        /**
         * Prints each round's legs: what the fast path's meshed connections moved on each leg,
         * redirected and by TCP (the plain path's register no socket, so the kernel counts nothing of
         * theirs); returns 1, with a warning, when a leg of a round carried nothing or redirected
         * less than {@link #LEAST_SHARE} of its bytes, else 0.
         */
        int report(PrintStream out) {
            out.println("\n## The meshed legs on the fast path (the kernel's counters; a leg's bytes by TCP counted "
                    + "at its sockets' FIN)\n");
            out.println("| round | connects sent to their proxy | proxies' connects to an inbound port | original "
                    + "destinations answered | app -> proxy redirected | proxy -> proxy | proxy -> app |");
            out.println("|---|---:|---:|---:|---:|---:|---:|");
            boolean ok = true;
            for (int r = 0; r < rounds.size(); r++) {
                MeshStats m = rounds.get(r).mesh();
                out.printf(Locale.ROOT, "| %d%s | %d | %d | %d | %s | %s | %s |%n", r + 1,
                        rounds.get(r).allClosed() ? "" : " (sockets still open)", m.captured(), m.inbound(),
                        m.originalDestinations(), share(m.appToProxy()), share(m.proxyToProxy()), share(m.proxyToApp()));
                for (MeshStats.Leg l : List.of(m.appToProxy(), m.proxyToProxy(), m.proxyToApp())) {
                    ok &= l.bytesRedirected() + l.bytesByTcp() > 0 && l.redirectedShare() >= LEAST_SHARE;
                }
            }
            if (!ok) {
                out.printf(Locale.ROOT, "%nWARNING: a leg of the meshed fast path redirected less than %.0f%% of its "
                        + "bytes, or carried none%n", 100 * LEAST_SHARE);
            }
            return ok ? 0 : 1;
        }

        /**
         * The round since {@code before}, once its pipelines have closed: waits (up to 30 s) until
         * the SOCKHASH holds no more sockets than it did before, so that every leg's socket has sent
         * its FIN and its bytes by TCP are counted.
         */
        private Round since(SockmapStats before) throws IOException, InterruptedException {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            SockmapStats now = admin.stats();
            while (now.socketsInMap() > before.socketsInMap() && System.nanoTime() < deadline) {
                Thread.sleep(20); // polls the condition: the last proxies close their upstream sockets
                now = admin.stats();
            }
            MeshStats a = now.mesh();
            MeshStats b = before.mesh();
            return new Round(new MeshStats(a.captured() - b.captured(), a.inbound() - b.inbound(),
                    a.originalDestinations() - b.originalDestinations(), a.renumbered() - b.renumbered(), minus(a.appToProxy(), b.appToProxy()),
                    minus(a.proxyToProxy(), b.proxyToProxy()), minus(a.proxyToApp(), b.proxyToApp())),
                    now.socketsInMap() <= before.socketsInMap());
        }

        @Override
        public void close() throws IOException {
            mesh(false);
        }
    }

    /** What the kernel counted of meshed pods over one round, from its first connect to its last socket's close. */
    record Round(MeshStats mesh, boolean allClosed) {
    }

    private static MeshStats.Leg minus(MeshStats.Leg a, MeshStats.Leg b) {
        return new MeshStats.Leg(a.sockets() - b.sockets(), a.bytesRedirected() - b.bytesRedirected(),
                a.bytesByTcp() - b.bytesByTcp());
    }

    /** The least share of a leg's bytes the demo takes for "every leg redirected". */
    static final double LEAST_SHARE = 0.99;

    private static String share(MeshStats.Leg l) {
        long all = l.bytesRedirected() + l.bytesByTcp();
        return all == 0 ? "no bytes" : String.format(Locale.ROOT, "%.4f of %,d B (%d sockets)", l.redirectedShare(),
                all, l.sockets());
    }
}
