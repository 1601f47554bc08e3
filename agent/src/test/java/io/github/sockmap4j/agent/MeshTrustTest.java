package io.github.sockmap4j.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.github.sockmap4j.MeshStats;
import io.github.sockmap4j.admin.SockmapAdmin;
import io.github.sockmap4j.agent.kubernetes.MeshPods;
import io.github.sockmap4j.testbed.Await;
import io.github.sockmap4j.testbed.BlockingPeers;
import io.github.sockmap4j.testbed.ChildJvm;
import io.github.sockmap4j.testbed.NodeBed;
import io.github.sockmap4j.testbed.Netns;
import io.github.sockmap4j.testbed.Sh;
import io.github.sockmap4j.testsupport.Leftovers;
import java.net.InetSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.Timeout;

/**
 * The mesh mode's agent as a pod's user, a user with a cgroup of its own and a busy node would try
 * it (docs/mesh.md, "who may do what"): a pod is filed under the namespace its sandbox was given,
 * found where the kubelet puts its processes on this node, never under one a user made; waiting
 * pods cost one look a tick, and no pod event waits on them.
 */
@Tag("kernel")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class MeshTrustTest extends MeshBedBase {
    /**
     * An unprivileged user inside pod 1 makes a user and network namespace of its own with pod 1's
     * addresses ({@code unshare -Urn}), and every port of pod 1's own namespace is taken, while pod
     * 1 is put again: pod 1 is filed under its own namespace, and a meshed call to it works.
     */
    @Test
    @Order(1)
    void aNamespaceAUserMakesInsideAPodIsNeverFiledAsThePods() throws Exception {
        awaitMeshed(2);
        long own = SockmapAdmin.networkNamespaceOf(pause[1].pid());
        String range = Sh.run("ip", "netns", "exec", bed.pod(1), "sysctl", "-n", "net.ipv4.ip_local_port_range")
                .strip().replaceAll("\\s+", " ");
        List<AutoCloseable> taken = new ArrayList<>();
        try {
            // Every port taken: the namespace's ephemeral range narrowed to two ports, both held.
            Sh.run("ip", "netns", "exec", bed.pod(1), "sysctl", "-q", "-w", "net.ipv4.ip_local_port_range=40000 40001");
            taken.add(() -> Sh.run("ip", "netns", "exec", bed.pod(1), "sysctl", "-q", "-w",
                    "net.ipv4.ip_local_port_range=" + range));
            for (int port : List.of(40000, 40001)) {
                taken.add(NodeBed.callIn(bed.pod(1), () -> {
                    ServerSocketChannel ch = ServerSocketChannel.open();
                    ch.bind(new InetSocketAddress(port));
                    return ch;
                }));
            }
            ChildJvm squatter = ChildJvm.startInCgroup(podCgroups[1], NodeBed.in(bed.pod(1), List.of("setpriv",
                    "--reuid=" + ATTACKER_UID, "--regid=" + ATTACKER_UID, "--clear-groups", "unshare", "-Urn", "sh", "-c",
                    "ip link set lo up && ip addr add " + NodeBed.podAddress(1) + "/32 dev lo && ip -6 addr add "
                            + NodeBed.podAddress6(1) + "/128 dev lo nodad && echo ready && exec sleep infinity")));
            taken.add(squatter);
            squatter.expect("ready", 30);
            annotate(1, MeshPods.ANNOTATION, null);
            awaitMeshed(1);
            annotate(1, MeshPods.ANNOTATION, MeshPods.ACCELERATE);
            awaitMeshed(2);
            assertTrue(SockmapAdmin.of(pins).meshedPods().stream().anyMatch(m -> m.netns() == own),
                    "pod 1 filed under its own namespace: " + SockmapAdmin.of(pins).meshedPods() + "; the agent said: "
                            + agent.output());
        } finally {
            java.util.Collections.reverse(taken);
            Leftovers.closeAll(taken.toArray(AutoCloseable[]::new));
        }
        int trips = 200;
        try (ChildJvm p0 = sidecar(0); ChildJvm p1 = sidecar(1)) {
            MeshStats before = mesh();
            call(0, NodeBed.podAddress(1), trips);
            assertTrue(p0.isAlive() && p1.isAlive(), "the sidecars ran through: " + p0.output() + p1.output());
            awaitClosed();
            assertEveryLegRedirected(before, mesh(), trips);
        }
    }

    /** A pod of the API server's, with a network namespace holding its address and a process there. */
    record Extra(String name, String netns, Path cgroup, ChildJvm process, long cookie) {
        void remove() throws Exception {
            Leftovers.closeAll(process, () -> Netns.deleteAll(List.of(netns)),
                    () -> Leftovers.removeCgroups(cgroup));
        }
    }

    /**
     * Pod {@code name} of node {@code node} (phase {@code phase}, QoS class {@code qos}, both may
     * be null) in the API server, meshed and asking for it, with address {@code address}; its
     * process in a namespace of its own holding that address, in the cgroup {@code where} gives for
     * its uid.
     */
    Extra extra(String name, String node, String phase, String qos, String address, Function<String, Path> where)
            throws Exception {
        Pod p = client.resource(new PodBuilder().withNewMetadata().withName(name).withNamespace("rag")
                .withAnnotations(Map.of(MeshPods.ISTIO_SIDECAR, "{}", MeshPods.ANNOTATION, MeshPods.ACCELERATE))
                .endMetadata().withNewSpec().withNodeName(node).addNewContainer().withName("main").withImage("peer")
                .endContainer().endSpec().withNewStatus().withPhase(phase).withQosClass(qos).withPodIP(address)
                .addNewPodIP().withIp(address).endPodIP().endStatus().build()).create();
        String ns = "sm4j-" + ProcessHandle.current().pid() % 100000 + "-x" + name.substring(name.length() - 1);
        Netns.add(ns);
        Path cg = Files.createDirectories(where.apply(p.getMetadata().getUid()));
        ChildJvm process = null;
        try {
            Sh.run("ip", "-n", ns, "addr", "add", address + "/32", "dev", "lo");
            process = ChildJvm.startInCgroup(cg, NodeBed.in(ns, List.of("sh", "-c", "echo ready; exec sleep infinity")));
            process.expect("ready", 30);
            return new Extra(name, ns, cg, process, SockmapAdmin.networkNamespaceOf(process.pid()));
        } catch (Exception e) {
            Leftovers.closeAll(process, () -> Netns.deleteAll(List.of(ns)), () -> Leftovers.removeCgroups(cg));
            throw e;
        }
    }

    /**
     * Pods the agent must not mesh, each with a process in a namespace holding its address: one
     * found only through a directory named for its uid elsewhere under the agent's cgroup (as a user
     * with a delegated cgroup could make), one of another node where the kubelet would put it, one
     * finished (Succeeded) where the kubelet put it. Pod 5, of this node and BestEffort, in its class's
     * directory, is meshed: the others were looked at in the same look or before.
     */
    @Test
    @Order(2)
    void onlyThePodsOfThisNodeWhereTheKubeletPutsThemAreMeshed() throws Exception {
        awaitMeshed(2);
        List<Extra> extras = new ArrayList<>();
        try {
            extras.add(extra("pod-3", NODE, null, null, "10.244.30.2",
                    uid -> cgroup.resolve("delegated").resolve("pod" + uid)));
            extras.add(extra("pod-4", "node-2", "Running", "Burstable", "10.244.40.2",
                    uid -> cgroup.resolve("burstable").resolve("pod" + uid)));
            extras.add(extra("pod-6", NODE, "Succeeded", null, "10.244.60.2", uid -> cgroup.resolve("pod" + uid)));
            Extra control = extra("pod-5", NODE, "Running", "BestEffort", "10.244.50.2",
                    uid -> cgroup.resolve("besteffort").resolve("pod" + uid));
            extras.add(control);
            awaitMeshed(3);
            List<Long> meshed = SockmapAdmin.of(pins).meshedPods().stream().map(SockmapAdmin.MeshedPod::netns).toList();
            assertTrue(meshed.contains(control.cookie()), meshed + "; the agent said: " + agent.output());
            for (Extra e : extras.subList(0, 3)) {
                assertFalse(meshed.contains(e.cookie()), e.name() + " is not meshed; the agent said: " + agent.output());
            }
        } finally {
            for (Extra e : extras) {
                client.pods().inNamespace("rag").withName(e.name()).delete();
            }
            Leftovers.closeAll(extras.stream().map(e -> (AutoCloseable) e::remove).toArray(AutoCloseable[]::new));
            Leftovers.removeCgroups(cgroup.resolve("delegated"), cgroup.resolve("burstable"), cgroup.resolve("besteffort"));
        }
        awaitMeshed(2);
    }

    /**
     * A thousand meshed pods that asked but whose processes never come (a finished Job's pods keep
     * their addresses in the API), on a node with a hundred pods' cgroups: pod 0 losing its
     * annotation is taken out, and put again, as without them.
     */
    @Test
    @Order(3)
    void aThousandPodsWaitingForProcessesDelayNoEvent() throws Exception {
        awaitMeshed(2);
        List<Path> busy = new ArrayList<>();
        int waiting = 1000;
        try {
            Path burstable = Files.createDirectories(cgroup.resolve("burstable"));
            busy.add(burstable);
            for (int i = 0; i < 100; i++) {
                Path pod = Files.createDirectory(burstable.resolve("pod" + UUID.randomUUID()));
                busy.add(0, pod);
                busy.add(0, Files.createDirectory(pod.resolve("c1")));
                busy.add(0, Files.createDirectory(pod.resolve("c2")));
            }
            for (int i = 0; i < waiting; i++) {
                String ip = "10.200." + i / 200 + "." + (i % 200 + 1);
                client.resource(new PodBuilder().withNewMetadata().withName("wait-" + i).withNamespace("rag")
                        .addToLabels("sm4j-test", "wait").withAnnotations(Map.of(MeshPods.ISTIO_SIDECAR, "{}",
                                MeshPods.ANNOTATION, MeshPods.ACCELERATE)).endMetadata().withNewSpec().withNodeName(NODE)
                        .addNewContainer().withName("main").withImage("job").endContainer().endSpec().withNewStatus()
                        .withPodIP(ip).addNewPodIP().withIp(ip).endPodIP().endStatus().build()).create();
            }
            Await.until("the agent waits for the last of them", Duration.ofSeconds(Await.scaled(60)),
                    () -> agent.output().contains("Meshed pod rag/wait-" + (waiting - 1) + ":"));
            annotate(0, MeshPods.ANNOTATION, null);
            awaitMeshed(1);
            annotate(0, MeshPods.ANNOTATION, MeshPods.ACCELERATE);
            awaitMeshed(2);
        } finally {
            client.pods().inNamespace("rag").withLabel("sm4j-test", "wait").delete();
            Leftovers.removeCgroups(busy.toArray(Path[]::new));
        }
        assertEquals(2, SockmapAdmin.of(pins).meshedPods().size());
    }

    /**
     * A process of another uid in the proxy's group (Istio's NAT leaves gid 1337 alone as it leaves
     * uid 1337): its connect from pod 0 to pod 1's application is not captured; it goes as the NAT
     * sends it (pod 1's NAT to pod 1's proxy), and the call completes.
     */
    @Test
    @Order(4)
    void aConnectOfTheProxysGroupIsLeftAloneAsTheNatLeavesIt() throws Exception {
        awaitMeshed(2);
        assertTrue(SockmapAdmin.of(pins).meshedPods().stream().allMatch(m -> m.proxyGid() == PROXY_UID),
                "the agent put the proxy's group: " + SockmapAdmin.of(pins).meshedPods());
        try (ChildJvm p0 = sidecar(0); ChildJvm p1 = sidecar(1);
             ChildJvm server = inPod(1, "pp-server", NodeBed.podAddress(1), Integer.toString(PORT))) {
            server.expect("port=", 30);
            MeshStats before = mesh();
            List<String> cmd = new ArrayList<>(NodeBed.in(bed.pod(0), List.of("setpriv", "--reuid=" + ATTACKER_UID,
                    "--regid=" + PROXY_UID, "--clear-groups", peer.toString(), "pp-client", NodeBed.podAddress(1),
                    Integer.toString(PORT), "100", "64")));
            try (ChildJvm c = ChildJvm.startInCgroup(podCgroups[0], cmd)) {
                assertEquals("1", c.expect("ok=", 60), c.output());
            }
            assertEquals("1", server.expect("ok=", 30), server.output());
            MeshStats after = mesh();
            assertEquals(0, after.captured() - before.captured(), "the group's connect was not captured");
            assertTrue(p0.isAlive() && p1.isAlive(), p0.output() + p1.output());
        }
    }

    /**
     * Blocking readers on the three legs of meshed calls (docs/kernel.md, "A blocking read that
     * returns EAGAIN"): the sidecars are blocking relays (two threads a connection, a half-close
     * passed on, as socat relays), pod 0's application a blocking client of 1,000 connections, pod
     * 1's a blocking server. Every byte and every end arrives, every leg is redirected; the relays'
     * reads that the kernel woke with nothing queued (at the half-close they pass on) fail with
     * EAGAIN and are retried, and are counted; the application's reads never do.
     */
    @Test
    @Order(5)
    void blockingReadersOnTheMeshLegsGetEveryByteAndTheirEnd() throws Exception {
        awaitMeshed(2);
        Path blocking = ChildJvm.compileBed("blocking.c", work.resolve("blocking"));
        List<String> asProxy = List.of("setpriv", "--reuid=" + PROXY_UID, "--regid=" + PROXY_UID, "--clear-groups");
        List<String> out = new ArrayList<>(asProxy);
        out.addAll(List.of(blocking.toString(), "relay", "0.0.0.0", Integer.toString(OUT), "origdst"));
        List<String> in = new ArrayList<>(List.of("env", "SM4J_PEER_BIND=127.0.0.6"));
        in.addAll(asProxy);
        in.addAll(List.of(blocking.toString(), "relay", "0.0.0.0", Integer.toString(IN), "origdst"));
        int conns = 1_000;
        try (ChildJvm outbound = ChildJvm.startInCgroup(podCgroups[0], NodeBed.in(bed.pod(0), out));
             ChildJvm inbound = ChildJvm.startInCgroup(podCgroups[1], NodeBed.in(bed.pod(1), in))) {
            outbound.expect("port=", 30);
            inbound.expect("port=", 30);
            MeshStats before = mesh();
            BlockingPeers.Result r;
            BlockingPeers.Counts o;
            BlockingPeers.Counts i;
            try {
                r = BlockingPeers.run(blocking, NodeBed.podAddress(1), conns, 10, 64, "keep", false,
                        cmd -> ChildJvm.startInCgroup(podCgroups[1], NodeBed.in(bed.pod(1), cmd)),
                        cmd -> ChildJvm.startInCgroup(podCgroups[0], NodeBed.in(bed.pod(0), cmd)), port -> () -> { });
                o = BlockingPeers.doneWith(outbound, conns);
                i = BlockingPeers.doneWith(inbound, conns);
            } catch (AssertionError e) {
                throw new AssertionError(e.getMessage() + "; outbound relay " + BlockingPeers.describe(outbound)
                        + "; inbound relay " + BlockingPeers.describe(inbound), e);
            }
            MeshStats after = mesh();
            System.out.printf(Locale.ROOT, "mesh bed, blocking readers: %d connections of 10 x 64 B: application "
                    + "EAGAIN %d; relays' EAGAIN outbound %d, inbound %d; legs app->proxy %s, proxy->proxy %s, "
                    + "proxy->app %s%n", conns, r.eagain(), o.eagain(), i.eagain(), minus(after.appToProxy(),
                    before.appToProxy()), minus(after.proxyToProxy(), before.proxyToProxy()),
                    minus(after.proxyToApp(), before.proxyToApp()));
            assertEquals(conns, r.client().conns(), r.toString());
            assertEquals(0, r.client().errors() + r.server().errors() + o.errors() + i.errors(),
                    "every byte and every end: " + r + ", relays " + o + ", " + i);
            assertEquals(0, r.eagain(), "the applications' reads: " + r);
            assertEquals(conns, after.captured() - before.captured(), "each connect captured");
            // A connection whose client port pod 1's NAT renumbered (an earlier test's NATed
            // connection had its reply direction) is told, and its proxy-to-proxy leg goes by TCP.
            long renumbered = after.renumbered() - before.renumbered();
            List<MeshStats.Leg> legs = List.of(minus(after.appToProxy(), before.appToProxy()),
                    minus(after.proxyToProxy(), before.proxyToProxy()), minus(after.proxyToApp(), before.proxyToApp()));
            for (int l = 0; l < legs.size(); l++) {
                MeshStats.Leg leg = legs.get(l);
                long byTcp = l == 1 ? renumbered : 0;
                assertEquals(2L * conns - byTcp, leg.sockets(), "both ends of each leg registered (" + renumbered
                        + " renumbered): " + leg);
                long allowed = (long) (0.001 * (leg.bytesRedirected() + leg.bytesByTcp())) + byTcp * 2 * 10 * 64;
                assertTrue(leg.bytesByTcp() <= allowed, "the leg's bytes redirected (" + renumbered + " renumbered): "
                        + leg);
            }
        }
    }

    /**
     * A connection from pod 0's address and port P to pod 1's application that pod 1's NAT sent to
     * its proxy (a process of the proxy's group, left alone by pod 0's capture and NAT), then the
     * proxy's own connect from the same address and port to the same application, which the
     * kernel sends to pod 1's inbound port at the connect: the two have the same reply direction
     * in pod 1's connection tracking (its inbound port to P), which keeps the first for minutes,
     * so pod 1's NAT gives the second another client port. Pod 1's proxy is still told where it
     * was going, the call completes, and the renumbering is counted.
     */
    @Test
    @Order(6)
    void aProxysConnectFromThePortOfAConnectionItsNatRedirectedIsStillTold() throws Exception {
        awaitMeshed(2);
        int port = freePortOf(bed.pod(0));
        String from = "SM4J_PEER_BIND=" + NodeBed.podAddress(0) + ":" + port;
        try (ChildJvm p1 = sidecar(1)) {
            MeshStats[] round = new MeshStats[4];
            int r = 0;
            for (int uid : new int[] {ATTACKER_UID, PROXY_UID}) {
                try (ChildJvm server = inPod(1, "pp-server", NodeBed.podAddress(1), Integer.toString(PORT))) {
                    server.expect("port=", 30);
                    round[r++] = mesh();
                    List<String> cmd = new ArrayList<>(NodeBed.in(bed.pod(0), List.of("env", from, "setpriv",
                            "--reuid=" + uid, "--regid=" + PROXY_UID, "--clear-groups", peer.toString(), "pp-client",
                            NodeBed.podAddress(1), Integer.toString(PORT), "10", "64")));
                    try (ChildJvm c = ChildJvm.startInCgroup(podCgroups[0], cmd)) {
                        assertEquals("1", c.expect("ok=", 60), "uid " + uid + ": " + c.output() + "; sidecar: "
                                + p1.output());
                    }
                    assertEquals("1", server.expect("ok=", 30), server.output());
                    round[r++] = mesh();
                }
            }
            assertEquals(0, round[1].inbound() - round[0].inbound(), "the group's connect went by pod 1's NAT");
            assertEquals(1, round[3].inbound() - round[2].inbound(), "the proxy's connect went to the inbound port");
            assertEquals(1, round[3].originalDestinations() - round[2].originalDestinations(), "pod 1's proxy told");
            assertEquals(1, round[3].renumbered() - round[2].renumbered(), "its client port renumbered by pod 1's NAT");
            assertTrue(p1.isAlive(), p1.output());
        }
        awaitClosed();
    }

    /** A port no socket of namespace {@code ns} has bound now. */
    static int freePortOf(String ns) throws Exception {
        ServerSocketChannel ch = NodeBed.callIn(ns, () -> {
            ServerSocketChannel c = ServerSocketChannel.open();
            c.bind(new InetSocketAddress(0));
            return c;
        });
        try (ch) {
            return ((InetSocketAddress) ch.getLocalAddress()).getPort();
        }
    }
}
