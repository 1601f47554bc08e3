package io.github.sockmap4j.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.fabric8.kubernetes.api.model.PodBuilder;
import io.fabric8.kubernetes.api.model.ServiceBuilder;
import io.fabric8.kubernetes.api.model.discovery.v1.EndpointSliceBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.github.sockmap4j.MeshStats;
import io.github.sockmap4j.SockmapStats;
import io.github.sockmap4j.admin.SockmapAdmin;
import io.github.sockmap4j.agent.kubernetes.MeshPods;
import io.github.sockmap4j.agent.kubernetes.ServiceRules;
import io.github.sockmap4j.testbed.Await;
import io.github.sockmap4j.testbed.Bpftool;
import io.github.sockmap4j.testbed.ChildJvm;
import io.github.sockmap4j.testbed.NodeBed;
import io.github.sockmap4j.testbed.Sh;
import io.github.sockmap4j.testbed.Sidecar;
import io.github.sockmap4j.testsupport.Leftovers;
import io.github.sockmap4j.testsupport.MockApi;
import io.github.sockmap4j.testsupport.TestKernel;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.Timeout;

/**
 * A meshed node (docs/mesh.md), for the tests of the mesh mode: the node bed's pods 0 and 1 each
 * with a real sidecar proxy (Debian's HAProxy in TCP mode, forwarding to each connection's original
 * destination, as uid 1337) and the NAT Istio's init container writes; pod 2 on the node without
 * one; each pod's first process in its cgroup where the kubelet's cgroupfs driver puts a Guaranteed
 * pod. The agent in mesh mode is fed by the API server (fabric8's mock).
 */
@Tag("kernel")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@Timeout(value = 180, unit = TimeUnit.SECONDS)
abstract class MeshBedBase {
    static final int PROXY_UID = 1337;
    static final int OUT = 15001;
    static final int IN = 15006;
    /** The application's port: no rule opts it in, the mesh mode alone accelerates its legs. */
    static final int PORT = 46350;
    static final int ATTACKER_UID = 4321;
    static final String VIP = "10.96.0.20";
    static final String NODE = "node-1";
    Path work;
    Path peer;
    Path cgroup;
    final Path[] podCgroups = new Path[3];
    /** Each pod's first process, as a pod's pause container: what the agent finds the pod's namespace by. */
    final ChildJvm[] pause = new ChildJvm[3];
    Path pins;
    /** The sidecar's command (its configuration written in the work directory). */
    List<String> sidecar;
    NodeBed bed;
    ChildJvm agent;
    MockApi api;
    KubernetesClient client;

    @BeforeAll
    void start() throws Exception {
        work = Files.createTempDirectory("sockmap4j-meshbed", PosixFilePermissions.asFileAttribute(
                PosixFilePermissions.fromString("rwxr-xr-x")));
        peer = work.resolve("peer");
        ChildJvm.compilePeer(peer);
        sidecar = Sidecar.haproxy(work.resolve("sidecar.cfg"), OUT, IN, 0);
        cgroup = TestKernel.newCgroup("meshbed");
        pins = Path.of("/sys/fs/bpf").resolve(TestKernel.uniqueName("meshbed"));
        bed = NodeBed.create("mb", 3);
        bed.istioSidecarNat(0, PROXY_UID, OUT, IN);
        bed.istioSidecarNat(1, PROXY_UID, OUT, IN);
        api = MockApi.start();
        client = api.client;
        for (int i = 0; i < 3; i++) {
            Map<String, String> annotations = i < 2
                    ? Map.of(MeshPods.ISTIO_SIDECAR, "{\"containers\":[\"istio-proxy\"]}", MeshPods.ANNOTATION,
                            MeshPods.ACCELERATE)
                    : Map.of(MeshPods.ANNOTATION, MeshPods.ACCELERATE); // asks, but has no sidecar
            client.resource(new PodBuilder().withNewMetadata().withName("pod-" + i).withNamespace("rag")
                    .withAnnotations(annotations).endMetadata()
                    .withNewSpec().withNodeName(NODE).addNewContainer().withName("main").withImage("peer").endContainer()
                    .endSpec().withNewStatus().withPodIP(NodeBed.podAddress(i)).addNewPodIP()
                    .withIp(NodeBed.podAddress(i)).endPodIP().addNewPodIP().withIp(NodeBed.podAddress6(i)).endPodIP()
                    .endStatus().build()).create();
            // The kubelet's cgroup of the pod, named for the uid the API server gave it.
            String uid = client.pods().inNamespace("rag").withName("pod-" + i).get().getMetadata().getUid();
            podCgroups[i] = Files.createDirectory(cgroup.resolve("pod" + uid));
            pause[i] = ChildJvm.startInCgroup(podCgroups[i], NodeBed.in(bed.pod(i), List.of("sleep", "infinity")));
        }
        // A Service of pod 1's application: kube-proxy's rules in the node, and its annotation and
        // endpoints in the API server, from which the agent puts it in the Service map.
        bed.service(VIP, PORT, NodeBed.podAddress(1) + ":" + PORT);
        client.resource(new EndpointSliceBuilder().withNewMetadata().withName("app-1").withNamespace("rag")
                .addToLabels(ServiceRules.SERVICE_NAME_LABEL, "app").endMetadata().withAddressType("IPv4")
                .addNewPort().withPort(PORT).withProtocol("TCP").endPort()
                .addNewEndpoint().withAddresses(NodeBed.podAddress(1)).withNodeName(NODE).endEndpoint()
                .build()).create();
        client.resource(new ServiceBuilder().withNewMetadata().withName("app").withNamespace("rag")
                .addToAnnotations(ServiceRules.PORTS_ANNOTATION, Integer.toString(PORT)).endMetadata()
                .withNewSpec().withClusterIP(VIP).addNewPort().withPort(PORT).withProtocol("TCP").endPort().endSpec()
                .build()).create();
        startAgent();
    }

    void startAgent() throws Exception {
        List<String> cmd = ChildJvm.javaCommand(AgentMain.class, "--pin-dir", pins.toString(), "agent",
                "--cgroup", cgroup.toString(), "--metrics-port", "-1", "--kubernetes", "--node-name", NODE,
                "--node-filter", "client", "--mesh");
        cmd.addAll(1, api.clientOptions());
        agent = ChildJvm.start(cmd);
        agent.expect("agent: ready", 60);
        agent.expect("agent: kubernetes synced", 60);
    }

    @AfterAll
    void stop() throws Exception {
        Leftovers.closeAll(agent, api, pause[0], pause[1], pause[2], () -> TestKernel.removePins(pins), bed,
                () -> Leftovers.removeCgroups(podCgroups[0], podCgroups[1], podCgroups[2], cgroup),
                () -> Leftovers.removeDirectory(work));
    }

    /** Pod {@code i}'s sidecar: HAProxy as the proxy's uid in the pod's namespace and cgroup, listening. */
    ChildJvm sidecar(int i) throws Exception {
        return sidecar(i, PROXY_UID, sidecar, OUT, IN);
    }

    /** Pod {@code i}'s sidecar: proxy {@code command} as {@code uid}, listening on {@code out} and {@code in}. */
    ChildJvm sidecar(int i, int uid, List<String> command, int out, int in) throws Exception {
        List<String> cmd = new ArrayList<>(List.of("setpriv", "--reuid=" + uid, "--regid=" + uid, "--clear-groups"));
        cmd.addAll(command);
        ChildJvm proxy = ChildJvm.startInCgroup(podCgroups[i], NodeBed.in(bed.pod(i), cmd));
        try {
            Await.until("pod " + i + "'s sidecar listens", Duration.ofSeconds(Await.scaled(20)),
                    () -> Sidecar.listens(bed.pod(i), out) && Sidecar.listens(bed.pod(i), in));
            return proxy;
        } catch (InterruptedException | RuntimeException e) {
            proxy.close();
            throw new IllegalStateException("pod " + i + "'s sidecar: " + proxy.output(), e);
        }
    }

    ChildJvm inPod(int pod, String... args) throws IOException {
        List<String> cmd = new ArrayList<>(NodeBed.in(bed.pod(pod), List.of(peer.toString())));
        cmd.addAll(List.of(args));
        return ChildJvm.startInCgroup(podCgroups[pod], cmd);
    }

    /** {@code count} round trips of 64 B from pod {@code from} to the server in pod 1 at {@code dial}:PORT; returns the client's getpeername. */
    String call(int from, String dial, int count) throws Exception {
        boolean v6 = dial.contains(":");
        try (ChildJvm server = inPod(1, "pp-server", v6 ? NodeBed.podAddress6(1) : NodeBed.podAddress(1),
                Integer.toString(PORT))) {
            server.expect("port=", 30);
            try (ChildJvm c = inPod(from, "pp-client", dial, Integer.toString(PORT), Integer.toString(count), "64")) {
                String seen = c.expect("peer=", 30);
                assertEquals("1", c.expect("ok=", 120), c.output());
                assertEquals("1", server.expect("ok=", 30), server.output());
                return seen;
            }
        }
    }

    /**
     * 100 round trips of 64 B from pod 0's application to a server on pod 1's {@code port}: the
     * kernel's mesh counters before and after.
     */
    MeshStats[] roundTripsTo(int port) throws Exception {
        try (ChildJvm server = inPod(1, "pp-server", NodeBed.podAddress(1), Integer.toString(port))) {
            server.expect("port=", 30);
            MeshStats before = mesh();
            try (ChildJvm c = inPod(0, "pp-client", NodeBed.podAddress(1), Integer.toString(port), "100", "64")) {
                assertEquals("1", c.expect("ok=", 60), c.output());
            }
            assertEquals("1", server.expect("ok=", 30), server.output());
            return new MeshStats[] {before, mesh()};
        }
    }

    MeshStats mesh() throws IOException {
        return SockmapAdmin.of(pins).stats().mesh();
    }

    void awaitMeshed(int pods) throws InterruptedException {
        try {
            Await.until(pods + " meshed pods", Duration.ofSeconds(Await.scaled(20)),
                    () -> SockmapAdmin.of(pins).meshedPods().size() == pods);
        } catch (AssertionError e) {
            throw new AssertionError(e.getMessage() + "; the agent said: " + agent.output(), e);
        }
    }

    /** The connections of a call have closed: each socket's entries by its end and by its connection are gone. */
    void awaitClosed() throws Exception {
        Bpftool.awaitMapEntries(pins.resolve("svcorig"), 0);
        Bpftool.awaitMapEntries(pins.resolve("meshorig"), 0);
        Bpftool.awaitMapEntries(pins.resolve("svcsock"), 0);
    }

    static MeshStats.Leg minus(MeshStats.Leg a, MeshStats.Leg b) {
        return new MeshStats.Leg(a.sockets() - b.sockets(), a.bytesRedirected() - b.bytesRedirected(),
                a.bytesByTcp() - b.bytesByTcp());
    }

    /** Sets (or, {@code value} null, removes) annotation {@code name} of pod {@code i}. */
    void annotate(int i, String name, String value) {
        client.pods().inNamespace("rag").withName("pod-" + i).edit(p -> value == null
                ? new PodBuilder(p).editMetadata().removeFromAnnotations(name).endMetadata().build()
                : new PodBuilder(p).editMetadata().addToAnnotations(name, value).endMetadata().build());
    }

    /** Each of the three legs of one call of {@code trips} round trips of 64 B: both ends registered, 99.9% redirected. */
    static void assertEveryLegRedirected(MeshStats b, MeshStats a, int trips) {
        long bytes = 2L * trips * 64;
        for (MeshStats.Leg leg : List.of(minus(a.appToProxy(), b.appToProxy()), minus(a.proxyToProxy(),
                b.proxyToProxy()), minus(a.proxyToApp(), b.proxyToApp()))) {
            assertEquals(2, leg.sockets(), "both ends of the leg registered: " + leg);
            assertEquals(bytes, leg.bytesRedirected() + leg.bytesByTcp(), "every byte of the leg counted: " + leg);
            assertTrue(leg.redirectedShare() >= 0.999, "at least 99.9% of the leg's bytes redirected: " + leg);
        }
    }
}
