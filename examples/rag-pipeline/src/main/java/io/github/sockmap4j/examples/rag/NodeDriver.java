package io.github.sockmap4j.examples.rag;

import io.github.sockmap4j.testbed.NodeBed;
import java.io.IOException;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The demo's node topology: the bed it runs on (a node namespace, a pod per stage and one for the
 * load, a Service VIP per stage NAT-ed to its pod) and the demo run again inside the client pod,
 * its output passed through; the bed removed afterwards, also when the run fails or is stopped.
 */
final class NodeDriver {
    private NodeDriver() {
    }

    /**
     * The node topology's driver: builds the bed (a node namespace, five pods routed through it,
     * a Service VIP per stage NAT-ed to its pod, both paths' ports when {@code paired}), runs
     * {@code main} with {@code args} again in the client pod (which starts each stage in its pod and
     * prints the tables, passed on to {@code out}), and removes the bed, also when the run fails or
     * is interrupted. With {@code mesh}, every pod a meshed one ({@link MeshedNode}): Istio's NAT and
     * an HAProxy sidecar, whose network namespaces and process ids the run in the client pod is
     * given; the sidecars stop before the bed goes.
     */
    static int run(Class<?> main, List<String> args, boolean paired, boolean mesh, PrintStream out) throws Exception {
        if (!"root".equals(System.getProperty("user.name")) && !Files.isWritable(Path.of("/run"))) {
            System.err.println("the node topology builds network namespaces and needs root: run it as root, or pass "
                    + "--topology loopback");
            return 2;
        }
        NodeBed bed = NodeBed.create("rag", NodePods.CLIENT + 1);
        AtomicReference<Process> inPod = new AtomicReference<>();
        List<Process> sidecars = new CopyOnWriteArrayList<>();
        Path sidecarConfig = mesh ? Files.createTempFile("sockmap4j-sidecar", ".cfg") : null;
        Thread cleanup = new Thread(() -> {
            try {
                stop(inPod.get()); // first the run in the pod: its stages and fast path go with it
                MeshedNode.stop(sidecars, sidecarConfig);
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
            List<String> meshArgs = mesh ? MeshedNode.start(bed, sidecarConfig, sidecars) : List.of();
            List<String> cmd = new ArrayList<>();
            cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
            cmd.addAll(ManagementFactory.getRuntimeMXBean().getInputArguments());
            cmd.add("-cp");
            cmd.add(System.getProperty("java.class.path"));
            cmd.add(main.getName());
            cmd.addAll(args);
            cmd.add("--node-pods=" + String.join(",", pods));
            cmd.addAll(meshArgs);
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
            MeshedNode.stop(sidecars, sidecarConfig);
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

}
