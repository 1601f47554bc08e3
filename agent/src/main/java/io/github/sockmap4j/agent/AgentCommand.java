package io.github.sockmap4j.agent;

import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;
import io.github.sockmap4j.agent.kubernetes.MeshPods;
import io.github.sockmap4j.agent.kubernetes.PodRules;
import io.github.sockmap4j.agent.kubernetes.ServiceRules;
import java.io.PrintWriter;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine;

/**
 * {@code sockmap4j agent}: the node agent in the foreground until SIGTERM or SIGINT, after which
 * it exits 0 leaving pins, attachments and rules for the next agent. A subcommand of a command
 * that says where the pins are ({@link PinDirectory}): the {@code sockmap4j} command line, or
 * {@link AgentMain} where the agent runs without it.
 */
@Command(name = "agent", mixinStandardHelpOptions = true, description = "Run the node agent in the foreground until SIGTERM/SIGINT: pins (created "
        + "or adopted), the in-flight watcher of every namespace of the cgroups, opt-ins over a Unix socket, "
        + "/metrics, /healthz and /readyz. Stopping it leaves the pins for the next agent.")
public final class AgentCommand implements Callable<Integer> {
    /** The exit status when the agent's pins were removed under it (NodeAgent#pinsLost). */
    public static final int PINS_LOST = 3;

    @CommandLine.ParentCommand
    PinDirectory parent;

    /** For picocli, which makes one per parse. */
    public AgentCommand() {
    }

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Option(names = "--cgroup", required = true, description = "cgroup v2 directory to attach to (repeatable)")
    List<Path> cgroups;

    @Option(names = "--policy", description = "who may opt in what (without it only root may)")
    Path policy;

    @Option(names = "--metrics-port", defaultValue = "9477", description = "port of /metrics, /healthz, /readyz "
            + "(0: any free port; -1: none) (default: ${DEFAULT-VALUE})")
    int metricsPort;

    @Option(names = "--metrics-address", defaultValue = "127.0.0.1", description = "address to serve them on "
            + "(default: ${DEFAULT-VALUE})")
    String metricsAddress;

    @Option(names = "--max-sockets", defaultValue = "65535", description = "SOCKHASH capacity when creating the pins")
    int maxSockets;

    @Option(names = "--allow-root-cgroup", description = "accept attaching to the root cgroup (every process)")
    boolean allowRoot;

    @CommandLine.ArgGroup(exclusive = false)
    Kubernetes kubernetes;

    static final class Kubernetes {
        @Option(names = "--kubernetes", required = true, description = "turn pod and Service annotations on this node into rules and Service map entries "
                + "(a Service port is opted in by the Service's annotation, or by the annotation of a pod of this "
                + "node that is one of its endpoints)")
        boolean on;

        @Option(names = "--node-name", defaultValue = "${env:NODE_NAME}", description = "this node's name "
                + "(default: $NODE_NAME)")
        String nodeName;

        @Option(names = "--annotation", defaultValue = PodRules.DEFAULT_ANNOTATION,
                description = "the pod annotation listing ports (default: ${DEFAULT-VALUE})")
        String annotation;

        @Option(names = "--mesh", description = "accelerate meshed pods: a pod of this node with the mesh's sidecar "
                + "(--mesh-sidecar-annotation) that asks by its own annotation (" + MeshPods.ANNOTATION + ": "
                + MeshPods.ACCELERATE + ") has its applications' connects sent straight to its proxy and other meshed "
                + "pods' proxies' connects straight to its proxy's inbound port (docs/mesh.md)")
        boolean mesh;

        @Option(names = "--mesh-sidecar-annotation", defaultValue = MeshPods.ISTIO_SIDECAR,
                description = "the annotation of a pod with the mesh's sidecar (default: ${DEFAULT-VALUE})")
        String meshSidecar;

        @Option(names = "--mesh-proxy-uid", defaultValue = "1337",
                description = "the uid of the mesh's proxy, whose connects its NAT leaves alone (default: ${DEFAULT-VALUE})")
        int meshProxyUid;

        @Option(names = "--mesh-proxy-gid", description = "the gid of the mesh's proxy, whose tasks' connects its NAT "
                + "leaves alone too, as Istio's does ('none' for none; default: the proxy's uid, as istio-iptables "
                + "takes it); a pod whose init container's arguments say is read from those")
        String meshProxyGid;

        @Option(names = "--mesh-ports", defaultValue = "15001,15006", split = ",",
                description = "the proxy's outbound and inbound ports (default: ${DEFAULT-VALUE})")
        List<Integer> meshPorts;

        @Option(names = "--mesh-skip-inbound-ports", defaultValue = "15008,15020,15021,15090",
                description = "the ports a meshed pod's NAT leaves out of its inbound redirect, at most 8 ('none' "
                        + "for none): another proxy's connect to one goes to that port, not to the inbound port "
                        + "(default, Istio's, the proxy's own: ${DEFAULT-VALUE})")
        String meshSkipPorts;

        @Option(names = "--node-filter", defaultValue = "server", description = "where this node's pods are picked "
                + "out: 'server' (a field selector on spec.nodeName) or 'client' (every pod listed, this node's kept: "
                + "for an API server without field selectors, such as fabric8's mock) (default: ${DEFAULT-VALUE})")
        String nodeFilter;
    }

    /** --mesh-proxy-gid: the uid when not given, -1 for 'none'; a parameter error naming what is wrong. */
    private int meshProxyGid() {
        String given = kubernetes.meshProxyGid == null ? null : kubernetes.meshProxyGid.strip();
        if (given == null) {
            return kubernetes.meshProxyUid;
        }
        if (given.equals("none")) {
            return -1;
        }
        try {
            int gid = Integer.parseInt(given);
            if (gid >= 0) {
                return gid;
            }
        } catch (NumberFormatException e) {
            // below
        }
        throw new CommandLine.ParameterException(spec.commandLine(), "--mesh-proxy-gid takes a gid or 'none': '"
                + given + "'");
    }

    /** --mesh-skip-inbound-ports as the kernel takes them; a parameter error naming what is wrong. */
    private List<Integer> meshSkipPorts() {
        String given = kubernetes.meshSkipPorts.strip();
        if (given.isEmpty() || given.equals("none")) {
            return List.of();
        }
        try {
            return io.github.sockmap4j.linux.bpf.MeshMap.checkSkip(java.util.Arrays.stream(given.split(","))
                    .map(String::strip).map(Integer::valueOf).toList(), "inbound", kubernetes.meshPorts.get(1));
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), "--mesh-skip-inbound-ports takes up to 8 "
                    + "different ports other than the inbound port, or 'none': '" + given + "': " + e.getMessage());
        }
    }

    @Override
    public Integer call() throws Exception {
        PrintWriter out = spec.commandLine().getOut();
        if (metricsPort < -1 || metricsPort > 65535) {
            throw new CommandLine.ParameterException(spec.commandLine(), "--metrics-port must be -1..65535: "
                    + metricsPort);
        }
        if (kubernetes != null && !List.of("server", "client").contains(kubernetes.nodeFilter)) {
            throw new CommandLine.ParameterException(spec.commandLine(), "--node-filter must be 'server' or 'client': "
                    + kubernetes.nodeFilter);
        }
        if (kubernetes != null && (kubernetes.nodeName == null || kubernetes.nodeName.isBlank())) {
            throw new CommandLine.ParameterException(spec.commandLine(), "--kubernetes needs --node-name or "
                    + "$NODE_NAME (the downward API's spec.nodeName)");
        }
        if (kubernetes != null && kubernetes.mesh && (kubernetes.meshPorts.size() != 2
                || kubernetes.meshPorts.get(0).equals(kubernetes.meshPorts.get(1))
                || kubernetes.meshPorts.stream().anyMatch(p -> p < 1 || p > 65535) || kubernetes.meshProxyUid < 0)) {
            throw new CommandLine.ParameterException(spec.commandLine(), "--mesh-ports takes two different ports, "
                    + "outbound then inbound (Istio's: 15001,15006), and --mesh-proxy-uid a uid: "
                    + kubernetes.meshPorts + ", " + kubernetes.meshProxyUid);
        }
        List<Integer> skipPorts = kubernetes != null && kubernetes.mesh ? meshSkipPorts() : List.of();
        int proxyGid = kubernetes != null && kubernetes.mesh ? meshProxyGid() : -1;
        CountDownLatch stop = new CountDownLatch(1);
        CountDownLatch closed = new CountDownLatch(1);
        Signals.onTermination(stop::countDown);
        // Whatever else ends the JVM (a signal the JVM kept, System.exit): close before it halts.
        Thread hook = new Thread(() -> {
            stop.countDown();
            try {
                closed.await(20, java.util.concurrent.TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "sockmap4j-agent-stop");
        Runtime.getRuntime().addShutdownHook(hook);
        try (NodeAgent agent = NodeAgent.start(new NodeAgent.Options(parent.pinDirectory(), cgroups, policy, maxSockets,
                allowRoot));
             KubernetesClient client = kubernetes == null ? null : new KubernetesClientBuilder().build();
             PodRules pods = client == null ? null
                     : PodRules.start(agent, client, kubernetes.nodeName, kubernetes.annotation,
                             "server".equals(kubernetes.nodeFilter), parent.pinDirectory());
             ServiceRules services = client == null ? null
                     : ServiceRules.start(agent, client, kubernetes.nodeName, pods);
             MeshPods meshed = pods == null || !kubernetes.mesh ? null
                     : MeshPods.start(pods, parent.pinDirectory(), cgroups, new MeshPods.Shape(kubernetes.meshSidecar,
                             kubernetes.meshProxyUid, proxyGid, kubernetes.meshPorts.get(0),
                             kubernetes.meshPorts.get(1), skipPorts));
             AgentHttp http = metricsPort < 0 ? null : AgentHttp.start(
                     new InetSocketAddress(InetAddress.getByName(metricsAddress), metricsPort), agent,
                     () -> pods == null || (pods.isSynced() && services.isSynced()))) {
            out.println("agent: ready, pins " + parent.pinDirectory() + ", cgroups " + cgroups + ", rules " + agent.rules()
                    + (http == null ? "" : http.address() != null ? ", metrics http://"
                    + http.address().getHostString() + ":" + http.address().getPort() + "/metrics"
                    : ", metrics not served yet on " + http.requested() + " (" + http.bindFailure()
                    + "): trying again") + (pods == null ? "" : ", pods of node "
                    + kubernetes.nodeName + " and their Services") + (meshed == null ? "" : ", meshed pods"));
            out.flush();
            if (pods != null) {
                pods.synced().thenCombine(services.synced(), (a, b) -> null).thenRun(() -> {
                    out.println("agent: kubernetes synced: the pods of node " + kubernetes.nodeName
                            + " and the Services with endpoints there");
                    out.flush();
                });
            }
            agent.pinsLost().thenRun(stop::countDown);
            stop.await();
            if (agent.pinsLost().isDone()) {
                spec.commandLine().getErr().println("agent: " + agent.pinsLost().getNow("") + "; exiting (status "
                        + PINS_LOST + ") to be started again");
                return PINS_LOST;
            }
            out.println("agent: stopping; the pins stay in " + parent.pinDirectory() + " ('sockmap4j down' removes them)");
            out.flush();
        } finally {
            closed.countDown();
        }
        try {
            Runtime.getRuntime().removeShutdownHook(hook);
        } catch (IllegalStateException exiting) {
            // Already shutting down: the hook is running and returns now.
        }
        return 0;
    }
}
