package io.github.sockmap4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.fabric8.kubernetes.api.model.PodBuilder;
import io.fabric8.kubernetes.api.model.Service;
import io.fabric8.kubernetes.api.model.ServiceBuilder;
import io.fabric8.kubernetes.api.model.discovery.v1.EndpointSliceBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.github.sockmap4j.Await;
import io.github.sockmap4j.ChildJvm;
import io.github.sockmap4j.SockmapStats;
import io.github.sockmap4j.TestKernel;
import io.github.sockmap4j.admin.SockmapAdmin;
import io.github.sockmap4j.testsupport.NodeBed;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/**
 * The node-shaped bed ({@link NodeBed}) under {@code sockmap4j agent}: two pods routed through a
 * node namespace, a Service VIP NAT-ed to pod 1 by kube-proxy-style rules in the node, C peers
 * (src/test/c/peer.c) in the agent's cgroup. Pod to pod by pod IP takes the redirect; pod to the
 * Service VIP reaches its endpoint through the node's NAT (the rule's own counter says it carried
 * the connection) and, without connect-time translation, goes by TCP.
 */
@Tag("kernel")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class NodeBedTest {
    static final String VIP = "10.96.0.10";
    /** A second Service, to the same endpoint, that the translation tests put in sockmap4j's Service map. */
    static final String VIP2 = "10.96.0.11";
    static final String VIP6 = "fd00:96::11";
    /** A Service the API server (fabric8's mock, CRUD mode) tells the agent about. */
    static final String VIP3 = "10.96.0.12";
    static final int PORT = 46334;
    static final String NODE = "node-1";

    Path work;
    Path peer;
    Path cgroup;
    Path pins;
    NodeBed bed;
    ChildJvm agent;
    MockApi api;
    KubernetesClient client;

    @BeforeAll
    void start() throws Exception {
        work = Files.createTempDirectory("sockmap4j-nodebed", PosixFilePermissions.asFileAttribute(
                PosixFilePermissions.fromString("rwxr-xr-x")));
        peer = work.resolve("peer");
        AgentTest.sh("cc", "-O2", "-Wall", "-o", peer.toString(), "src/test/c/peer.c");
        cgroup = TestKernel.newCgroup("nodebed");
        pins = Path.of("/sys/fs/bpf").resolve(TestKernel.uniqueName("nodebed"));
        bed = NodeBed.create("nb", 3);
        bed.service(VIP, PORT, NodeBed.podAddress(1) + ":" + PORT);
        bed.service(VIP2, PORT, NodeBed.podAddress(1) + ":" + PORT);
        bed.service(VIP6, PORT, "[" + NodeBed.podAddress6(1) + "]:" + PORT);
        bed.service(VIP3, PORT, NodeBed.podAddress(1) + ":" + PORT);
        api = MockApi.start();
        client = api.client;
        // The pods as the API server knows them: pods 0 and 1 on the agent's node, pod 2 on another.
        for (int i = 0; i < 3; i++) {
            client.resource(new PodBuilder().withNewMetadata().withName("pod-" + i).withNamespace("rag").endMetadata()
                    .withNewSpec().withNodeName(i < 2 ? NODE : "node-2").addNewContainer().withName("main")
                    .withImage("peer").endContainer().endSpec()
                    .withNewStatus().withPodIP(NodeBed.podAddress(i)).addNewPodIP().withIp(NodeBed.podAddress(i))
                    .endPodIP().addNewPodIP().withIp(NodeBed.podAddress6(i)).endPodIP().endStatus().build()).create();
        }
        List<String> cmd = ChildJvm.javaCommand(SockmapCli.class, "--pin-dir", pins.toString(), "agent",
                "--cgroup", cgroup.toString(), "--metrics-port", "-1", "--kubernetes", "--node-name", NODE, "--node-filter", "client");
        // fabric8's configuration by system properties: this API server, and nothing of the host's.
        cmd.addAll(1, api.clientOptions());
        agent = ChildJvm.start(cmd);
        agent.expect("agent: ready", 60);
        agent.expect("agent: kubernetes synced", 60);
        assertEquals(0, cli("allow", Integer.toString(PORT)), "allow " + PORT);
    }

    @AfterAll
    void stop() throws Exception {
        try {
            if (agent != null) {
                agent.close();
            }
            if (api != null) {
                api.close();
            }
        } finally {
            try {
                SockmapAdmin.removePins(pins);
            } finally {
                if (bed != null) {
                    bed.close();
                }
                if (cgroup != null) {
                    Await.until("the peers left " + cgroup, () -> Files.readString(cgroup.resolve("cgroup.procs")).isBlank());
                    Files.delete(cgroup);
                }
                if (work != null) {
                    Files.deleteIfExists(peer);
                    Files.delete(work);
                }
            }
        }
    }

    int cli(String... args) {
        List<String> all = new ArrayList<>(List.of("--pin-dir", pins.toString()));
        all.addAll(List.of(args));
        return CommandLineTest.run(all.toArray(String[]::new)).code();
    }

    ChildJvm inPod(int pod, String... args) throws IOException {
        List<String> cmd = new ArrayList<>(NodeBed.in(bed.pod(pod), List.of(peer.toString())));
        cmd.addAll(List.of(args));
        return ChildJvm.startInCgroup(cgroup, cmd);
    }

    /**
     * A 64 B ping-pong from pod 0 to the server in pod 1 (bound to its pod IP), dialing
     * {@code dial}; returns the messages' redirected share.
     */
    double pingPong(String dial, int count) throws Exception {
        return pingPong(NodeBed.podAddress(1), dial, count, null);
    }

    /** The same with the server bound to {@code bind}; {@code peer} gets what the client's getpeername said. */
    double pingPong(String bind, String dial, int count, String[] peer) throws Exception {
        SockmapStats before = SockmapAdmin.stats(pins);
        try (ChildJvm server = inPod(1, "pp-server", bind, Integer.toString(PORT))) {
            server.expect("port=", 30);
            try (ChildJvm client = inPod(0, "pp-client", dial, Integer.toString(PORT), Integer.toString(count), "64")) {
                String seen = client.expect("peer=", 30);
                if (peer != null) {
                    peer[0] = seen;
                }
                assertEquals("1", client.expect("ok=", 120), client.output());
                assertEquals(0, client.waitFor(30));
            }
            assertEquals("1", server.expect("ok=", 30), server.output());
        }
        SockmapStats after = SockmapAdmin.stats(pins);
        long redirected = after.messagesRedirected() - before.messagesRedirected();
        long tcp = after.messagesPassed() - before.messagesPassed();
        System.out.printf(Locale.ROOT, "node bed: ping-pong pod 0 -> %s %d x 64 B: %d messages redirected, %d by TCP%n",
                dial, count, redirected, tcp);
        return redirected + tcp == 0 ? 0 : (double) redirected / (redirected + tcp);
    }

    /** Packets the node's NAT rule for the first Service has matched (iptables' own counter). */
    long natPackets() throws Exception {
        return natPackets("iptables", "KUBE-SVC-1");
    }

    long natPackets(String tool, String chain) throws Exception {
        String out = AgentTest.sh(NodeBed.in(bed.node, List.of(tool, "-w", "-t", "nat", "-L", chain, "-v",
                "-x", "-n")).toArray(String[]::new));
        Matcher m = Pattern.compile("(?m)^\\s*(\\d+)\\s+\\d+\\s+DNAT").matcher(out);
        assertTrue(m.find(), out);
        return Long.parseLong(m.group(1));
    }

    @Test
    void podToPodByPodIpTakesTheRedirect() throws Exception {
        assertTrue(pingPong(NodeBed.podAddress(1), 10_000) >= 0.99, "at least 99% of messages redirected");
    }

    /**
     * A client on the fast path dialing a server the API server puts on another node (pod 2):
     * the agent keeps this node's addresses and pods as the local peers, so the client is not
     * registered and its sends never run the verdict.
     */
    @Test
    void aClientOfAServerOnAnotherNodeStaysOffTheMap() throws Exception {
        assertTrue(SockmapAdmin.localPeers(pins).stream().anyMatch(n -> n.address().getHostAddress()
                .equals(NodeBed.podAddress(1))), "pod 1 is a local peer: " + SockmapAdmin.localPeers(pins));
        assertTrue(SockmapAdmin.localPeers(pins).stream().noneMatch(n -> n.address().getHostAddress()
                .equals(NodeBed.podAddress(2))), "pod 2 is not");
        SockmapStats before = SockmapAdmin.stats(pins);
        try (ChildJvm server = ChildJvm.start(NodeBed.in(bed.pod(2), List.of(peer.toString(), "pp-server",
                NodeBed.podAddress(2), Integer.toString(PORT))))) {
            server.expect("port=", 30);
            try (ChildJvm client = inPod(0, "pp-client", NodeBed.podAddress(2), Integer.toString(PORT), "2000", "64")) {
                assertEquals("1", client.expect("ok=", 120), client.output());
            }
            assertEquals("1", server.expect("ok=", 30), server.output());
        }
        SockmapStats after = SockmapAdmin.stats(pins);
        assertEquals(1, after.peersNotLocal() - before.peersNotLocal(), "the client was left out");
        assertEquals(0, after.socketsRegistered() - before.socketsRegistered(), "nothing registered");
        assertEquals(0, after.messagesPassed() - before.messagesPassed(), "no send ran the verdict");
    }

    /**
     * A client off the fast path (pod 2's process outside the agent's cgroup, as a client on
     * another node would be) dialing pod 1's opted-in port: the accepted socket stays off the
     * map, so its replies never run the verdict.
     */
    @Test
    void anAcceptedSocketWhoseClientIsOffThePathStaysOffTheMap() throws Exception {
        SockmapStats before = SockmapAdmin.stats(pins);
        try (ChildJvm server = inPod(1, "pp-server", NodeBed.podAddress(1), Integer.toString(PORT))) {
            server.expect("port=", 30);
            try (ChildJvm client = ChildJvm.start(NodeBed.in(bed.pod(2), List.of(peer.toString(), "pp-client",
                    NodeBed.podAddress(1), Integer.toString(PORT), "2000", "64")))) {
                assertEquals("1", client.expect("ok=", 120), client.output());
            }
            assertEquals("1", server.expect("ok=", 30), server.output());
        }
        SockmapStats after = SockmapAdmin.stats(pins);
        assertEquals(1, after.clientsUnregistered() - before.clientsUnregistered(), "the accepted socket was left out");
        assertEquals(0, after.socketsRegistered() - before.socketsRegistered(), "nothing registered");
        assertEquals(0, after.messagesPassed() - before.messagesPassed(), "no send ran the verdict");
    }

    @Test
    void podToServiceVipReachesItsEndpointThroughTheNodesNat() throws Exception {
        long before = natPackets();
        double share = pingPong(VIP, 2_000);
        long matched = natPackets() - before;
        System.out.printf(Locale.ROOT, "node bed: the Service's DNAT matched %d connection(s), %.2f%% redirected%n",
                matched, 100 * share);
        assertEquals(1, matched, "the one connection went through the Service's DNAT rule");
        assertEquals(0, share, "a client registered under the VIP never meets its server");
    }

    @Test
    void aServiceInTheMapIsDialedStraightToItsEndpointAndReportsItsVip() throws Exception {
        assertEquals(0, cli("service", "add", VIP2 + ":" + PORT, "--local", NodeBed.podAddress(1) + ":" + PORT));
        try {
            long nat = natPackets("iptables", "KUBE-SVC-2");
            SockmapStats before = SockmapAdmin.stats(pins);
            String[] peer = new String[1];
            double share = pingPong(NodeBed.podAddress(1), VIP2, 10_000, peer);
            SockmapStats after = SockmapAdmin.stats(pins);
            assertTrue(share >= 0.99, "at least 99% of messages redirected: " + share);
            assertEquals(VIP2 + ":" + PORT, peer[0], "getpeername reports the Service the client dialed");
            assertEquals(0, natPackets("iptables", "KUBE-SVC-2") - nat, "no packet went through the Service's DNAT");
            assertEquals(1, after.servicesTranslated() - before.servicesTranslated(), "one connect translated");
        } finally {
            assertEquals(0, cli("service", "rm", VIP2 + ":" + PORT));
        }
        // Out of the map, the Service is kube-proxy's again.
        long nat = natPackets("iptables", "KUBE-SVC-2");
        pingPong(NodeBed.podAddress(1), VIP2, 100, null);
        assertEquals(1, natPackets("iptables", "KUBE-SVC-2") - nat, "the connect went through the DNAT again");
    }

    /**
     * One local endpoint (pod 1, in the agent's cgroup) and one standing for another node's (pod
     * 2, outside it: its sockets are never registered), no local preference: 1,000 connects to
     * the VIP split as kube-proxy's equal odds would, every one translated, and the local ones
     * redirected.
     */
    @Test
    void connectsSplitOverLocalAndRemoteEndpointsWithKubeProxysOdds() throws Exception {
        int connections = 1_000;
        assertEquals(0, cli("service", "add", VIP2 + ":" + PORT, "--local", NodeBed.podAddress(1) + ":" + PORT,
                "--remote", NodeBed.podAddress(2) + ":" + PORT));
        long local;
        long remote;
        SockmapStats before = SockmapAdmin.stats(pins);
        try (ChildJvm here = inPod(1, "conn-server", NodeBed.podAddress(1), Integer.toString(PORT));
             ChildJvm there = ChildJvm.start(NodeBed.in(bed.pod(2), List.of(peer.toString(), "conn-server",
                     NodeBed.podAddress(2), Integer.toString(PORT))))) {
            here.expect("port=", 30);
            there.expect("port=", 30);
            try (ChildJvm client = inPod(0, "conn-client", VIP2, Integer.toString(PORT), Integer.toString(connections))) {
                assertEquals("1", client.expect("ok=", 120), client.output());
            }
            here.closeInput();
            there.closeInput();
            local = Long.parseLong(here.expect("conns=", 30));
            remote = Long.parseLong(there.expect("conns=", 30));
        } finally {
            assertEquals(0, cli("service", "rm", VIP2 + ":" + PORT));
        }
        SockmapStats after = SockmapAdmin.stats(pins);
        long redirected = after.messagesRedirected() - before.messagesRedirected();
        long translated = after.servicesTranslated() - before.servicesTranslated();
        System.out.printf(Locale.ROOT, "node bed: %d connects to %s: %d to the local endpoint, %d to the other; "
                + "%d translated; %d messages redirected%n", connections, VIP2, local, remote, translated, redirected);
        assertEquals(connections, local + remote, "every connection reached one of the two");
        assertEquals(connections, translated, "every connect translated (a remote pick straight to its endpoint)");
        // Equal odds: local ~ Binomial(1000, 1/2), mean 500, sd 15.8; 4 sd either side (p < 1e-4).
        assertTrue(Math.abs(local - connections / 2.0) <= 4 * Math.sqrt(connections / 4.0),
                "the split keeps kube-proxy's equal odds: " + local + " local of " + connections);
        assertTrue(redirected >= 0.99 * 2 * local, "the local connections' messages redirected: " + redirected
                + " of " + 2 * local);
    }

    @Test
    void aServiceTheApiServerAnnotatesIsDialedStraightToItsLocalEndpoint() throws Exception {
        InetSocketAddress vip = new InetSocketAddress(InetAddress.ofLiteral(VIP3), PORT);
        client.resource(new EndpointSliceBuilder().withNewMetadata().withName("vector-db-1").withNamespace("rag")
                .addToLabels(ServiceRules.SERVICE_NAME_LABEL, "vector-db").endMetadata().withAddressType("IPv4")
                .addNewPort().withPort(PORT).withProtocol("TCP").endPort()
                .addNewEndpoint().withAddresses(NodeBed.podAddress(1)).withNodeName(NODE).endEndpoint()
                .build()).create();
        Service svc = new ServiceBuilder().withNewMetadata().withName("vector-db").withNamespace("rag")
                .addToAnnotations(ServiceRules.PORTS_ANNOTATION, Integer.toString(PORT)).endMetadata()
                .withNewSpec().withClusterIP(VIP3).addNewPort().withPort(PORT).withProtocol("TCP").endPort().endSpec()
                .build();
        client.resource(svc).create();
        boolean deleted = false;
        try {
            Await.until("the Service's entry", java.time.Duration.ofSeconds(10),
                    () -> SockmapAdmin.services(pins).stream().anyMatch(e -> e.vip().equals(vip)));
            long nat = natPackets("iptables", "KUBE-SVC-4");
            SockmapStats before = SockmapAdmin.stats(pins);
            // The Service deleted while a connection to it is open: that one goes on, byte-checked.
            try (ChildJvm server = inPod(1, "pp-server", NodeBed.podAddress(1), Integer.toString(PORT))) {
                server.expect("port=", 30);
                try (ChildJvm c = inPod(0, "pp-client", VIP3, Integer.toString(PORT), "50000", "64")) {
                    assertEquals(VIP3 + ":" + PORT, c.expect("peer=", 30), "getpeername reports the Service dialed");
                    client.resource(svc).delete();
                    deleted = true;
                    Await.until("the entry gone with the Service", java.time.Duration.ofSeconds(10),
                            () -> SockmapAdmin.services(pins).stream().noneMatch(e -> e.vip().equals(vip)));
                    assertEquals("1", c.expect("ok=", 120), "the open connection completed: " + c.output());
                }
                assertEquals("1", server.expect("ok=", 30), server.output());
            }
            SockmapStats after = SockmapAdmin.stats(pins);
            long redirected = after.messagesRedirected() - before.messagesRedirected();
            long tcp = after.messagesPassed() - before.messagesPassed();
            System.out.printf(Locale.ROOT, "node bed: ping-pong pod 0 -> %s (from the API server) 50000 x 64 B, the "
                    + "Service deleted meanwhile: %d messages redirected, %d by TCP%n", VIP3, redirected, tcp);
            assertTrue(redirected >= 0.99 * (redirected + tcp) && redirected > 0, "at least 99% redirected: "
                    + redirected + "/" + tcp);
            assertEquals(0, natPackets("iptables", "KUBE-SVC-4") - nat, "no packet went through the Service's DNAT");
        } finally {
            if (!deleted) {
                client.resource(svc).delete();
            }
        }
        Await.until("the entry gone with the Service", java.time.Duration.ofSeconds(10),
                () -> SockmapAdmin.services(pins).stream().noneMatch(e -> e.vip().equals(vip)));
        long nat = natPackets("iptables", "KUBE-SVC-4");
        pingPong(NodeBed.podAddress(1), VIP3, 100, null);
        assertEquals(1, natPackets("iptables", "KUBE-SVC-4") - nat, "the connect went through the DNAT again");
        client.resource(new EndpointSliceBuilder().withNewMetadata().withName("vector-db-1").withNamespace("rag")
                .endMetadata().build()).delete();
    }

    /**
     * A JDK client with Java's default socket (AF_INET6, dual-stack: an IPv4 VIP reaches connect6
     * v4-mapped): args[0]:args[1], args[2] round trips of 64 B; prints ok=1.
     */
    public static final class JdkPingPong {
        public static void main(String[] args) throws Exception {
            try (java.nio.channels.SocketChannel ch = java.nio.channels.SocketChannel.open(
                    new java.net.InetSocketAddress(java.net.InetAddress.ofLiteral(args[0]), Integer.parseInt(args[1])))) {
                java.nio.ByteBuffer b = java.nio.ByteBuffer.allocateDirect(64);
                for (int i = 0, n = Integer.parseInt(args[2]); i < n; i++) {
                    b.clear();
                    while (b.hasRemaining()) {
                        ch.write(b);
                    }
                    b.clear();
                    while (b.hasRemaining()) {
                        if (ch.read(b) < 0) {
                            System.out.println("error=eof");
                            return;
                        }
                    }
                }
                System.out.println("ok=1");
            }
        }
    }

    @Test
    void aJdkClientsDualStackSocketIsDialedStraightToTheEndpoint() throws Exception {
        assertEquals(0, cli("service", "add", VIP2 + ":" + PORT, "--local", NodeBed.podAddress(1) + ":" + PORT));
        try {
            SockmapStats before = SockmapAdmin.stats(pins);
            try (ChildJvm server = inPod(1, "pp-server", NodeBed.podAddress(1), Integer.toString(PORT))) {
                server.expect("port=", 30);
                try (ChildJvm client = ChildJvm.startInCgroup(cgroup, NodeBed.in(bed.pod(0),
                        ChildJvm.javaCommand(JdkPingPong.class, VIP2, Integer.toString(PORT), "10000")))) {
                    assertEquals("1", client.expect("ok=", 120), client.output());
                }
                assertEquals("1", server.expect("ok=", 30), server.output());
            }
            SockmapStats after = SockmapAdmin.stats(pins);
            long redirected = after.messagesRedirected() - before.messagesRedirected();
            long tcp = after.messagesPassed() - before.messagesPassed();
            System.out.printf(Locale.ROOT, "node bed: JDK client to %s: %d messages redirected, %d by TCP%n", VIP2,
                    redirected, tcp);
            assertTrue(redirected >= 0.99 * (redirected + tcp), "at least 99% redirected: " + redirected + "/" + tcp);
            assertEquals(1, after.servicesTranslated() - before.servicesTranslated(), "one connect translated");
        } finally {
            assertEquals(0, cli("service", "rm", VIP2 + ":" + PORT));
        }
    }

    @Test
    void anIpv6ServiceIsDialedStraightToItsEndpoint() throws Exception {
        assertEquals(0, cli("service", "add", "[" + VIP6 + "]:" + PORT, "--local",
                "[" + NodeBed.podAddress6(1) + "]:" + PORT));
        try {
            String[] peer = new String[1];
            double share = pingPong(NodeBed.podAddress6(1), VIP6, 10_000, peer);
            assertTrue(share >= 0.99, "at least 99% of messages redirected: " + share);
            assertEquals(VIP6 + ":" + PORT, peer[0], "getpeername reports the Service the client dialed");
        } finally {
            assertEquals(0, cli("service", "rm", "[" + VIP6 + "]:" + PORT));
        }
    }
}
