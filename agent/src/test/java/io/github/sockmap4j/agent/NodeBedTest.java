package io.github.sockmap4j.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.fabric8.kubernetes.api.model.PodBuilder;
import io.fabric8.kubernetes.api.model.Service;
import io.fabric8.kubernetes.api.model.ServiceBuilder;
import io.fabric8.kubernetes.api.model.discovery.v1.EndpointSliceBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.github.sockmap4j.SockmapStats;
import io.github.sockmap4j.admin.PolicyClient;
import io.github.sockmap4j.admin.SockmapAdmin;
import io.github.sockmap4j.agent.kubernetes.ServiceRules;
import io.github.sockmap4j.testbed.Await;
import io.github.sockmap4j.testbed.ChildJvm;
import io.github.sockmap4j.testbed.NodeBed;
import io.github.sockmap4j.testbed.Sh;
import io.github.sockmap4j.testsupport.MockApi;
import io.github.sockmap4j.testsupport.Leftovers;
import io.github.sockmap4j.testsupport.TestKernel;
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
 * (the test bed's peer.c) in the agent's cgroup. Pod to pod by pod IP takes the redirect; pod to the
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
    /** Services the API server has that the agent leaves to kube-proxy: the endpoint elsewhere; the port not opted in. */
    static final String VIP_REMOTE = "10.96.0.13";
    static final String VIP_TWO_PORTS = "10.96.0.14";
    /** A Service whose endpoint the API server makes not ready, and moves. */
    static final String VIP_CHANGING = "10.96.0.15";
    /** A Service in kube-proxy's nftables mode. */
    static final String VIP_NFT = "10.96.0.16";
    int nftService;
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
        ChildJvm.compilePeer(peer);
        cgroup = TestKernel.newCgroup("nodebed");
        pins = Path.of("/sys/fs/bpf").resolve(TestKernel.uniqueName("nodebed"));
        bed = NodeBed.create("nb", 3);
        bed.service(VIP, PORT, NodeBed.podAddress(1) + ":" + PORT);
        bed.service(VIP2, PORT, NodeBed.podAddress(1) + ":" + PORT);
        bed.service(VIP6, PORT, "[" + NodeBed.podAddress6(1) + "]:" + PORT);
        bed.service(VIP3, PORT, NodeBed.podAddress(1) + ":" + PORT);
        bed.service(VIP_REMOTE, PORT, NodeBed.podAddress(1) + ":" + PORT);
        bed.service(VIP_TWO_PORTS, PORT, NodeBed.podAddress(1) + ":" + PORT);
        bed.service(VIP_CHANGING, PORT, NodeBed.podAddress(1) + ":" + PORT);
        nftService = bed.serviceNft(VIP_NFT, PORT, NodeBed.podAddress(1) + ":" + PORT);
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
        List<String> cmd = ChildJvm.javaCommand(AgentMain.class, "--pin-dir", pins.toString(), "agent",
                "--cgroup", cgroup.toString(), "--metrics-port", "-1", "--kubernetes", "--node-name", NODE, "--node-filter", "client");
        // fabric8's configuration by system properties: this API server, and nothing of the host's.
        cmd.addAll(1, api.clientOptions());
        agent = ChildJvm.start(cmd);
        agent.expect("agent: ready", 60);
        agent.expect("agent: kubernetes synced", 60);
        AsRoot.allow(pins, Integer.toString(PORT));
    }

    @AfterAll
    void stop() throws Exception {
        Leftovers.closeAll(agent, api, () -> TestKernel.removePins(pins), bed, () -> Leftovers.removeCgroups(cgroup),
                () -> Leftovers.removeDirectory(work));
    }

    /**
     * Puts a Service in the map as root does without an agent: this agent takes the Service map
     * from the API server and refuses the control socket's requests for it.
     */
    void putService(String vip, String local, String remote) throws IOException {
        SockmapAdmin.of(pins).putService(new SockmapAdmin.Service(SockmapAdmin.endpoint(vip),
                List.of(SockmapAdmin.endpoint(local)), remote == null ? List.of() : List.of(SockmapAdmin.endpoint(remote)),
                false));
    }

    void removeService(String vip) throws IOException {
        assertTrue(SockmapAdmin.of(pins).removeService(SockmapAdmin.endpoint(vip)), vip);
    }

    @Test
    void serviceAddThroughAnAgentFedByKubernetesIsRefusedWithWhy() throws IOException {
        try (PolicyClient c = PolicyClient.open(pins)) {
            assertTrue(c.viaAgent());
            IOException refused = assertThrows(IOException.class, () -> c.putService(new SockmapAdmin.Service(
                    SockmapAdmin.endpoint("10.96.0.99:" + PORT), List.of(SockmapAdmin.endpoint(NodeBed.podAddress(1)
                    + ":" + PORT)), List.of(), false)));
            assertTrue(refused.getMessage().contains("takes the Service map from the Kubernetes API (--kubernetes): "
                    + "annotate the Service"), refused.getMessage());
        }
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
        SockmapStats before = SockmapAdmin.of(pins).stats();
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
        SockmapStats after = SockmapAdmin.of(pins).stats();
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
        String out = Sh.run(NodeBed.in(bed.node, List.of(tool, "-w", "-t", "nat", "-L", chain, "-v",
                "-x", "-n")).toArray(String[]::new));
        Matcher m = Pattern.compile("(?m)^\\s*(\\d+)\\s+\\d+\\s+DNAT").matcher(out);
        assertTrue(m.find(), out);
        return Long.parseLong(m.group(1));
    }

    /**
     * {@link NodeBed#callIn}, as the benchmarks' node topology uses it: one process makes a
     * server socket in pod 1 (bound to an address only pod 1 has) and a client in pod 0; they
     * talk through the node, the client seen from pod 0's address. A namespace that is not there
     * is named in the error.
     */
    @Test
    void oneProcessMakesEachEndOfAConnectionInItsOwnPod() throws Exception {
        try (java.nio.channels.ServerSocketChannel server = NodeBed.callIn(bed.pod(1),
                java.nio.channels.ServerSocketChannel::open)) {
            server.bind(new InetSocketAddress(InetAddress.ofLiteral(NodeBed.podAddress(1)), 0));
            try (java.nio.channels.SocketChannel c = NodeBed.callIn(bed.pod(0), java.nio.channels.SocketChannel::open)) {
                c.connect(server.getLocalAddress());
                try (java.nio.channels.SocketChannel s = server.accept()) {
                    assertEquals(InetAddress.ofLiteral(NodeBed.podAddress(0)),
                            ((InetSocketAddress) s.getRemoteAddress()).getAddress(), "the client is pod 0's");
                    c.write(java.nio.ByteBuffer.wrap(new byte[] {42}));
                    java.nio.ByteBuffer in = java.nio.ByteBuffer.allocate(1);
                    assertEquals(1, s.read(in));
                    assertEquals(42, in.get(0));
                }
            }
        }
        IOException e = org.junit.jupiter.api.Assertions.assertThrows(IOException.class,
                () -> NodeBed.callIn("sm4j-no-such-pod", () -> 1));
        assertTrue(e.getMessage().contains("sm4j-no-such-pod"), e.getMessage());
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
        assertTrue(SockmapAdmin.of(pins).localPeers().stream().anyMatch(n -> n.address().getHostAddress()
                .equals(NodeBed.podAddress(1))), "pod 1 is a local peer: " + SockmapAdmin.of(pins).localPeers());
        assertTrue(SockmapAdmin.of(pins).localPeers().stream().noneMatch(n -> n.address().getHostAddress()
                .equals(NodeBed.podAddress(2))), "pod 2 is not");
        SockmapStats before = SockmapAdmin.of(pins).stats();
        try (ChildJvm server = ChildJvm.start(NodeBed.in(bed.pod(2), List.of(peer.toString(), "pp-server",
                NodeBed.podAddress(2), Integer.toString(PORT))))) {
            server.expect("port=", 30);
            try (ChildJvm client = inPod(0, "pp-client", NodeBed.podAddress(2), Integer.toString(PORT), "2000", "64")) {
                assertEquals("1", client.expect("ok=", 120), client.output());
            }
            assertEquals("1", server.expect("ok=", 30), server.output());
        }
        SockmapStats after = SockmapAdmin.of(pins).stats();
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
        SockmapStats before = SockmapAdmin.of(pins).stats();
        try (ChildJvm server = inPod(1, "pp-server", NodeBed.podAddress(1), Integer.toString(PORT))) {
            server.expect("port=", 30);
            try (ChildJvm client = ChildJvm.start(NodeBed.in(bed.pod(2), List.of(peer.toString(), "pp-client",
                    NodeBed.podAddress(1), Integer.toString(PORT), "2000", "64")))) {
                assertEquals("1", client.expect("ok=", 120), client.output());
            }
            assertEquals("1", server.expect("ok=", 30), server.output());
        }
        SockmapStats after = SockmapAdmin.of(pins).stats();
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
        putService(VIP2 + ":" + PORT, NodeBed.podAddress(1) + ":" + PORT, null);
        try {
            long nat = natPackets("iptables", "KUBE-SVC-2");
            SockmapStats before = SockmapAdmin.of(pins).stats();
            String[] peer = new String[1];
            double share = pingPong(NodeBed.podAddress(1), VIP2, 10_000, peer);
            SockmapStats after = SockmapAdmin.of(pins).stats();
            assertTrue(share >= 0.99, "at least 99% of messages redirected: " + share);
            assertEquals(VIP2 + ":" + PORT, peer[0], "getpeername reports the Service the client dialed");
            assertEquals(0, natPackets("iptables", "KUBE-SVC-2") - nat, "no packet went through the Service's DNAT");
            assertEquals(1, after.servicesTranslated() - before.servicesTranslated(), "one connect translated");
        } finally {
            removeService(VIP2 + ":" + PORT);
        }
        // Out of the map, the Service is kube-proxy's again.
        long nat = natPackets("iptables", "KUBE-SVC-2");
        pingPong(NodeBed.podAddress(1), VIP2, 100, null);
        assertEquals(1, natPackets("iptables", "KUBE-SVC-2") - nat, "the connect went through the DNAT again");
    }

    /** The uid of the mesh's proxy, which its NAT rule leaves alone (Istio's). */
    static final int PROXY_UID = 1337;
    static final int PROXY_PORT = 15001;

    /**
     * A call from a pod shaped like a meshed one (the rules {@link #meshPod0} makes) through its
     * proxy to the server in pod 1: {@code count} round trips of the client dialing {@code vip};
     * returns where the proxy learned the connection was going (its SO_ORIGINAL_DST).
     */
    String meshedCall(String vip, int count) throws Exception {
        boolean v6 = vip.contains(":");
        try (ChildJvm server = inPod(1, "pp-server", v6 ? NodeBed.podAddress6(1) : NodeBed.podAddress(1),
                Integer.toString(PORT))) {
            server.expect("port=", 30);
            List<String> proxyCmd = new ArrayList<>(NodeBed.in(bed.pod(0), List.of("setpriv", "--reuid=" + PROXY_UID,
                    "--regid=" + PROXY_UID, "--clear-groups", peer.toString(), "mesh-proxy",
                    v6 ? "::" : "0.0.0.0", Integer.toString(PROXY_PORT))));
            try (ChildJvm proxy = ChildJvm.startInCgroup(cgroup, proxyCmd)) {
                proxy.expect("port=", 30);
                String origdst;
                try (ChildJvm client = inPod(0, "pp-client", vip, Integer.toString(PORT), Integer.toString(count),
                        "64")) {
                    assertEquals(vip + ":" + PORT, client.expect("peer=", 30), "the application's getpeername");
                    origdst = proxy.expect("origdst=", 30);
                    assertEquals("1", client.expect("ok=", 120), client.output());
                }
                assertEquals("1", proxy.expect("ok=", 30), proxy.output());
                assertEquals("1", server.expect("ok=", 30), server.output());
                return origdst;
            }
        }
    }

    /** In pod 0, a sidecar mesh's NAT: TCP to PORT from any uid but the proxy's goes to the proxy's port. */
    void meshPod0(boolean on) throws Exception {
        meshPod0("iptables", on);
        meshPod0("ip6tables", on);
    }

    void meshPod0(String tool, boolean on) throws Exception {
        List<List<String>> rules = on
                ? List.of(List.of("-N", "SM4J-MESH"),
                        List.of("-A", "SM4J-MESH", "-m", "owner", "--uid-owner", Integer.toString(PROXY_UID), "-j",
                                "RETURN"),
                        List.of("-A", "SM4J-MESH", "-p", "tcp", "--dport", Integer.toString(PORT), "-j", "REDIRECT",
                                "--to-ports", Integer.toString(PROXY_PORT)),
                        List.of("-A", "OUTPUT", "-p", "tcp", "-j", "SM4J-MESH"))
                : List.of(List.of("-D", "OUTPUT", "-p", "tcp", "-j", "SM4J-MESH"), List.of("-F", "SM4J-MESH"),
                        List.of("-X", "SM4J-MESH"));
        for (List<String> rule : rules) {
            List<String> cmd = new ArrayList<>(List.of(tool, "-w", "-t", "nat"));
            cmd.addAll(rule);
            Sh.run(NodeBed.in(bed.pod(0), cmd).toArray(String[]::new));
        }
    }

    /**
     * A service mesh's sidecar learns where each outbound connection of its pod was going from the
     * kernel (SO_ORIGINAL_DST, which conntrack answers with the destination before its NAT rule)
     * and routes it as that Service's, with the mesh's mTLS and policy. A translated connect would
     * hand it the endpoint instead (traffic to an unknown address, passed through without mTLS):
     * sm4j_getsockopt answers with the Service, as without the translation, and the proxy's own
     * connect to it is translated and redirected.
     */
    @Test
    void aMeshedPodsProxyLearnsTheServiceItsApplicationDialed() throws Exception {
        meshPod0(true);
        try {
            SockmapStats untranslated = SockmapAdmin.of(pins).stats();
            assertEquals(VIP2 + ":" + PORT, meshedCall(VIP2, 10), "kube-proxy's Service: the proxy learns the VIP");
            assertEquals(0, SockmapAdmin.of(pins).stats().originalDestinations() - untranslated.originalDestinations(),
                    "conntrack answered: no answer of the program's counted");
            putService(VIP2 + ":" + PORT, NodeBed.podAddress(1) + ":" + PORT, null);
            try {
                long nat = natPackets("iptables", "KUBE-SVC-2");
                SockmapStats before = SockmapAdmin.of(pins).stats();
                String seen = meshedCall(VIP2, 2_000);
                SockmapStats after = SockmapAdmin.of(pins).stats();
                long redirected = after.messagesRedirected() - before.messagesRedirected();
                long tcp = after.messagesPassed() - before.messagesPassed();
                System.out.printf(Locale.ROOT, "node bed: meshed pod 0 -> %s through its proxy, 2000 x 64 B: the proxy "
                        + "learned %s; %d messages redirected, %d by TCP; %d connects translated%n", VIP2, seen,
                        redirected, tcp, after.servicesTranslated() - before.servicesTranslated());
                assertEquals(VIP2 + ":" + PORT, seen, "with the Service translated, the proxy still learns the VIP");
                assertEquals(2, after.servicesTranslated() - before.servicesTranslated(),
                        "the application's connect and the proxy's");
                assertEquals(1, after.originalDestinations() - before.originalDestinations(),
                        "the proxy's one SO_ORIGINAL_DST, answered with the Service");
                assertEquals(0, natPackets("iptables", "KUBE-SVC-2") - nat, "the proxy's connect went straight");
                // The proxy to the server and back is redirected; the application to the proxy goes by TCP.
                assertTrue(redirected >= 2 * 2_000, "the proxy's hop redirected: " + redirected);
            } finally {
                removeService(VIP2 + ":" + PORT);
            }
            // The same over IPv6 (IP6T_SO_ORIGINAL_DST).
            assertEquals(VIP6 + ":" + PORT, meshedCall(VIP6, 10), "kube-proxy's IPv6 Service");
            putService("[" + VIP6 + "]:" + PORT, "[" + NodeBed.podAddress6(1) + "]:" + PORT, null);
            try {
                assertEquals(VIP6 + ":" + PORT, meshedCall(VIP6, 10), "an IPv6 Service translated: the proxy learns it");
            } finally {
                removeService("[" + VIP6 + "]:" + PORT);
            }
            assertEquals(0, io.github.sockmap4j.testbed.Bpftool.awaitMapEntries(pins.resolve("svcorig"), 0),
                    "each translated socket's entry by its end went at its close");
        } finally {
            meshPod0(false);
        }
    }

    /**
     * Trust IV, row 1: a user's socket in a namespace it shares with a meshed application dials a
     * Service with IPV6_V6ONLY set (translated at connect, then refused before any SYN), clears it
     * and connects to a sink of its own. Its translation stayed by its cookie, and at its
     * establishment it was filed by its end as the Service's; the kernel gives the application's
     * connect the same ephemeral port (another destination), and the proxy, asking
     * SO_ORIGINAL_DST for the application's connection, was told the Service (the attacker's
     * choice) instead of where the application was going. Here the pod's port range is two ports
     * wide and the attacker holds both, so every connect of the pod shares a port with one of its
     * sockets. Now a connect that is not translated drops the socket's old translation, and a
     * socket is filed by its end only when it is connected to the endpoint its translation picked.
     */
    @Test
    void aProxyIsNeverToldAnotherSocketsTranslation() throws Exception {
        String range = Sh.run(NodeBed.in(bed.pod(0), List.of("sysctl", "-n", "net.ipv4.ip_local_port_range"))
                .toArray(String[]::new)).strip().replaceAll("\\s+", " ");
        meshPod0(true);
        putService(VIP2 + ":" + PORT, NodeBed.podAddress(1) + ":" + PORT, null);
        try {
            Sh.run(NodeBed.in(bed.pod(0), List.of("sysctl", "-q", "-w", "net.ipv4.ip_local_port_range=40000 40001"))
                    .toArray(String[]::new));
            int sinkPort = PORT + 7;
            int svcsock = io.github.sockmap4j.testbed.Bpftool.mapEntries(pins.resolve("svcsock"));
            int svcorig = io.github.sockmap4j.testbed.Bpftool.mapEntries(pins.resolve("svcorig"));
            long answered = SockmapAdmin.of(pins).stats().originalDestinations();
            try (ChildJvm sink = ChildJvm.startInCgroup(cgroup, NodeBed.in(bed.pod(0), List.of("setpriv",
                    "--reuid=" + ATTACKER_UID, "--regid=" + ATTACKER_UID, "--clear-groups", peer.toString(),
                    "conn-server", NodeBed.podAddress(0), Integer.toString(sinkPort))))) {
                sink.expect("port=", 30);
                try (ChildJvm squat = ChildJvm.startInCgroup(cgroup, NodeBed.in(bed.pod(0), List.of("setpriv",
                        "--reuid=" + ATTACKER_UID, "--regid=" + ATTACKER_UID, "--clear-groups", peer.toString(),
                        "origdst-squat", VIP2, Integer.toString(PORT), NodeBed.podAddress(0),
                        Integer.toString(sinkPort), "2")))) {
                    assertEquals("2", squat.expect("squat=", 30), squat.output());
                    int bySocket = io.github.sockmap4j.testbed.Bpftool.mapEntries(pins.resolve("svcsock")) - svcsock;
                    int byEnd = io.github.sockmap4j.testbed.Bpftool.mapEntries(pins.resolve("svcorig")) - svcorig;
                    String seen = meshedCall(NodeBed.podAddress(1), 10);
                    System.out.printf(Locale.ROOT, "node bed: a meshed call to %s:%d sharing its port with another "
                            + "user's socket whose connect to %s failed: the proxy learned %s; that user's sockets "
                            + "left %d translations by cookie, %d by end%n", NodeBed.podAddress(1), PORT, VIP2, seen,
                            bySocket, byEnd);
                    assertEquals(NodeBed.podAddress(1) + ":" + PORT, seen, "the proxy learns where the application "
                            + "was going, not another socket's Service");
                    assertEquals(0, bySocket, "a translation that never produced a connection left nothing behind");
                    assertEquals(0, byEnd, "the sockets connected elsewhere are filed as no Service's");
                    assertEquals(0, SockmapAdmin.of(pins).stats().originalDestinations() - answered,
                            "no SO_ORIGINAL_DST answered with a Service");
                    squat.closeInput();
                    assertEquals("1", squat.expect("ok=", 30));
                }
                sink.closeInput();
            }
        } finally {
            Sh.run(NodeBed.in(bed.pod(0), List.of("sysctl", "-q", "-w", "net.ipv4.ip_local_port_range=" + range))
                    .toArray(String[]::new));
            removeService(VIP2 + ":" + PORT);
            meshPod0(false);
        }
    }

    /** A user of the node's pods other than the proxy's and root. */
    static final int ATTACKER_UID = 4321;

    /**
     * One local endpoint (pod 1, in the agent's cgroup) and one standing for another node's (pod
     * 2, outside it: its sockets are never registered), no local preference: 1,000 connects to
     * the VIP split as kube-proxy's equal odds would, every one translated, and the local ones
     * redirected.
     */
    @Test
    void connectsSplitOverLocalAndRemoteEndpointsWithKubeProxysOdds() throws Exception {
        int connections = 1_000;
        putService(VIP2 + ":" + PORT, NodeBed.podAddress(1) + ":" + PORT, NodeBed.podAddress(2) + ":" + PORT);
        long local;
        long remote;
        SockmapStats before = SockmapAdmin.of(pins).stats();
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
            removeService(VIP2 + ":" + PORT);
        }
        SockmapStats after = SockmapAdmin.of(pins).stats();
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
        // Each translated socket's Service (for getpeername) goes at its close, remote picks' too.
        Await.until("no translated socket remembered", java.time.Duration.ofSeconds(10),
                () -> SockmapAdmin.of(pins).translatedSockets() == 0);
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
                    () -> SockmapAdmin.of(pins).services().stream().anyMatch(e -> e.vip().equals(vip)));
            long nat = natPackets("iptables", "KUBE-SVC-4");
            SockmapStats before = SockmapAdmin.of(pins).stats();
            // The Service deleted while a connection to it is open: that one goes on, byte-checked.
            try (ChildJvm server = inPod(1, "pp-server", NodeBed.podAddress(1), Integer.toString(PORT))) {
                server.expect("port=", 30);
                try (ChildJvm c = inPod(0, "pp-client", VIP3, Integer.toString(PORT), "50000", "64")) {
                    assertEquals(VIP3 + ":" + PORT, c.expect("peer=", 30), "getpeername reports the Service dialed");
                    client.resource(svc).delete();
                    deleted = true;
                    Await.until("the entry gone with the Service", java.time.Duration.ofSeconds(10),
                            () -> SockmapAdmin.of(pins).services().stream().noneMatch(e -> e.vip().equals(vip)));
                    assertEquals("1", c.expect("ok=", 120), "the open connection completed: " + c.output());
                }
                assertEquals("1", server.expect("ok=", 30), server.output());
            }
            SockmapStats after = SockmapAdmin.of(pins).stats();
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
                () -> SockmapAdmin.of(pins).services().stream().noneMatch(e -> e.vip().equals(vip)));
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
        putService(VIP2 + ":" + PORT, NodeBed.podAddress(1) + ":" + PORT, null);
        try {
            SockmapStats before = SockmapAdmin.of(pins).stats();
            try (ChildJvm server = inPod(1, "pp-server", NodeBed.podAddress(1), Integer.toString(PORT))) {
                server.expect("port=", 30);
                try (ChildJvm client = ChildJvm.startInCgroup(cgroup, NodeBed.in(bed.pod(0),
                        ChildJvm.javaCommand(JdkPingPong.class, VIP2, Integer.toString(PORT), "10000")))) {
                    assertEquals("1", client.expect("ok=", 120), client.output());
                }
                assertEquals("1", server.expect("ok=", 30), server.output());
            }
            SockmapStats after = SockmapAdmin.of(pins).stats();
            long redirected = after.messagesRedirected() - before.messagesRedirected();
            long tcp = after.messagesPassed() - before.messagesPassed();
            System.out.printf(Locale.ROOT, "node bed: JDK client to %s: %d messages redirected, %d by TCP%n", VIP2,
                    redirected, tcp);
            assertTrue(redirected > 0 && redirected >= 0.99 * (redirected + tcp),
                    "at least 99% of the messages redirected (and some): " + redirected + "/" + tcp);
            assertEquals(1, after.servicesTranslated() - before.servicesTranslated(), "one connect translated");
        } finally {
            removeService(VIP2 + ":" + PORT);
        }
    }

    @Test
    void anIpv6ServiceIsDialedStraightToItsEndpoint() throws Exception {
        putService("[" + VIP6 + "]:" + PORT, "[" + NodeBed.podAddress6(1) + "]:" + PORT, null);
        try {
            String[] peer = new String[1];
            double share = pingPong(NodeBed.podAddress6(1), VIP6, 10_000, peer);
            assertTrue(share >= 0.99, "at least 99% of messages redirected: " + share);
            assertEquals(VIP6 + ":" + PORT, peer[0], "getpeername reports the Service the client dialed");
        } finally {
            removeService("[" + VIP6 + "]:" + PORT);
        }
    }

    static Service annotatedService(String name, String vip, String ports, int... servicePorts) {
        ServiceBuilder b = new ServiceBuilder().withNewMetadata().withName(name).withNamespace("rag")
                .addToAnnotations(ServiceRules.PORTS_ANNOTATION, ports).endMetadata().withNewSpec().withClusterIP(vip)
                .endSpec();
        for (int p : servicePorts) {
            b.editSpec().addNewPort().withName("p" + p).withPort(p).withProtocol("TCP").endPort().endSpec();
        }
        return b.build();
    }

    /** A slice of Service {@code name}: pod 1's address on {@code node}, ready or not, for each port. */
    static io.fabric8.kubernetes.api.model.discovery.v1.EndpointSlice slice(String name, String node, boolean ready,
                                                                          int... ports) {
        EndpointSliceBuilder b = new EndpointSliceBuilder().withNewMetadata().withName(name + "-1").withNamespace("rag")
                .addToLabels(ServiceRules.SERVICE_NAME_LABEL, name).endMetadata().withAddressType("IPv4")
                .addNewEndpoint().withAddresses(NodeBed.podAddress(1)).withNodeName(node).withNewConditions()
                .withReady(ready).endConditions().endEndpoint();
        for (int p : ports) {
            b.addNewPort().withName("p" + p).withPort(p).withProtocol("TCP").endPort();
        }
        return b.build();
    }

    boolean hasEntry(String vip, int port) throws IOException {
        InetSocketAddress at = new InetSocketAddress(InetAddress.ofLiteral(vip), port);
        return SockmapAdmin.of(pins).services().stream().anyMatch(e -> e.vip().equals(at));
    }

    /** What one stream to a VIP did in the kernel: the counters' changes and the DNAT's. */
    record StreamRun(long nat, long registered, long translated, long noLocal, long redirected, long passed) {
    }

    /**
     * A stream of {@code bytes} of sequence numbers from pod 0 to pod 1 (the server checks every
     * one) dialing {@code vip}, both peers in the agent's cgroup or both outside it.
     */
    StreamRun stream(String vip, String chain, boolean inCgroup, long bytes) throws Exception {
        long nat = natPackets("iptables", chain);
        SockmapStats before = SockmapAdmin.of(pins).stats();
        List<String> server = NodeBed.in(bed.pod(1), List.of(peer.toString(), "stream-server", NodeBed.podAddress(1),
                Integer.toString(PORT), Long.toString(bytes)));
        List<String> client = NodeBed.in(bed.pod(0), List.of(peer.toString(), "stream-client", vip,
                Integer.toString(PORT), Long.toString(bytes)));
        try (ChildJvm s = inCgroup ? ChildJvm.startInCgroup(cgroup, server) : ChildJvm.start(server)) {
            s.expect("port=", 30);
            try (ChildJvm c = inCgroup ? ChildJvm.startInCgroup(cgroup, client) : ChildJvm.start(client)) {
                assertEquals("1", c.expect("ok=", 120), c.output());
            }
            assertEquals("1", s.expect("ok=", 60), "every byte arrived as sent: " + s.output());
        }
        SockmapStats after = SockmapAdmin.of(pins).stats();
        return new StreamRun(natPackets("iptables", chain) - nat, after.socketsRegistered() - before.socketsRegistered(),
                after.servicesTranslated() - before.servicesTranslated(),
                after.servicesNoLocal() - before.servicesNoLocal(), after.bytesRedirected() - before.bytesRedirected(),
                after.bytesPassed() - before.bytesPassed());
    }

    /**
     * What the agent leaves to kube-proxy behaves as without it: an annotated Service whose one
     * endpoint is on another node, and a Service port the annotation does not name. A stream to
     * each VIP from a client in the agent's cgroup and from one outside it (where no program of
     * the agent's runs): each connection through the Service's DNAT, none translated, nothing
     * registered, no send through the verdict, every byte as sent.
     */
    @Test
    void servicesTheAgentLeavesToKubeProxyBehaveAsWithoutIt() throws Exception {
        var remote = slice("remote-db", "node-2", true, PORT);
        var twoPorts = slice("two-ports", NODE, true, PORT, PORT + 1);
        Service remoteSvc = annotatedService("remote-db", VIP_REMOTE, Integer.toString(PORT), PORT);
        Service twoPortsSvc = annotatedService("two-ports", VIP_TWO_PORTS, "p" + (PORT + 1), PORT, PORT + 1);
        client.resource(remote).create();
        client.resource(remoteSvc).create();
        client.resource(twoPorts).create();
        client.resource(twoPortsSvc).create();
        try {
            // Each informer hands its objects on in the API server's order: the second Service's
            // entry in the map means the agent has seen the first as well.
            Await.until("the other port's entry", java.time.Duration.ofSeconds(10), () -> hasEntry(VIP_TWO_PORTS, PORT + 1));
            assertTrue(!hasEntry(VIP_REMOTE, PORT) && !hasEntry(VIP_TWO_PORTS, PORT), "no entry for either: "
                    + SockmapAdmin.of(pins).services());
            long bytes = 8L << 20;
            for (String[] vip : List.of(new String[] {VIP_REMOTE, "KUBE-SVC-5"}, new String[] {VIP_TWO_PORTS, "KUBE-SVC-6"})) {
                StreamRun without = stream(vip[0], vip[1], false, bytes);
                StreamRun with = stream(vip[0], vip[1], true, bytes);
                System.out.printf(Locale.ROOT, "node bed: %d B to %s, peers outside the agent's cgroup: %s; inside: %s%n",
                        bytes, vip[0], without, with);
                assertEquals(new StreamRun(1, 0, 0, 0, 0, 0), without, "outside: the DNAT carried it, nothing else");
                assertEquals(without, with, "inside the agent's cgroup: the same");
            }
        } finally {
            client.resource(remoteSvc).delete();
            client.resource(twoPortsSvc).delete();
            client.resource(remote).delete();
            client.resource(twoPorts).delete();
        }
        Await.until("the other port's entry gone", java.time.Duration.ofSeconds(10), () -> !hasEntry(VIP_TWO_PORTS, PORT + 1));
    }

    /**
     * A connection to a Service open while the API server makes its endpoint not ready, and
     * another while it moves the endpoint to another node: each pauses halfway until the entry is
     * gone, then completes with every byte checked, still redirected; the next connect to the VIP
     * is not translated and reaches the endpoint through kube-proxy's DNAT.
     */
    @Test
    void anEndpointMadeNotReadyOrMovedLeavesNewConnectsToKubeProxyAndOpenOnesWhole() throws Exception {
        Service svc = annotatedService("changing", VIP_CHANGING, Integer.toString(PORT), PORT);
        client.resource(slice("changing", NODE, true, PORT)).create();
        client.resource(svc).create();
        long bytes = 16L << 20;
        try {
            for (var change : List.of(slice("changing", NODE, false, PORT), slice("changing", "node-2", true, PORT))) {
                client.resource(slice("changing", NODE, true, PORT)).update();
                Await.until("the Service's entry", java.time.Duration.ofSeconds(10), () -> hasEntry(VIP_CHANGING, PORT));
                long nat = natPackets("iptables", "KUBE-SVC-7");
                SockmapStats before = SockmapAdmin.of(pins).stats();
                SockmapStats mid;
                try (ChildJvm server = inPod(1, "stream-server", NodeBed.podAddress(1), Integer.toString(PORT),
                        Long.toString(bytes))) {
                    server.expect("port=", 30);
                    try (ChildJvm c = inPod(0, "step-client", VIP_CHANGING, Integer.toString(PORT), Long.toString(bytes))) {
                        assertEquals(VIP_CHANGING + ":" + PORT, c.expect("peer=", 30));
                        c.expect("half=", 30);
                        client.resource(change).update();
                        Await.until("the entry gone", java.time.Duration.ofSeconds(10), () -> !hasEntry(VIP_CHANGING, PORT));
                        mid = SockmapAdmin.of(pins).stats();
                        c.closeInput();
                        assertEquals("1", c.expect("ok=", 120), c.output());
                    }
                    assertEquals("1", server.expect("ok=", 60), "every byte arrived as sent: " + server.output());
                }
                SockmapStats after = SockmapAdmin.of(pins).stats();
                long redirected = after.bytesRedirected() - before.bytesRedirected();
                long tcp = after.bytesPassed() - before.bytesPassed();
                long boundHits = after.boundHits() - before.boundHits();
                System.out.printf(Locale.ROOT, "node bed: %d B to %s, the endpoint %s halfway: %d B redirected (%d B after "
                        + "the change), %d B by TCP, %d bound hits%n", bytes, VIP_CHANGING,
                        change.getEndpoints().get(0).getNodeName().equals(NODE) ? "made not ready" : "moved to another node",
                        redirected, after.bytesRedirected() - mid.bytesRedirected(), tcp, boundHits);
                assertEquals(1, after.servicesTranslated() - before.servicesTranslated(), "the open one was translated");
                assertEquals(0, natPackets("iptables", "KUBE-SVC-7") - nat, "and never went through the DNAT");
                // A C writer has no credit to wait for: past its reader's bound the kernel sends by
                // TCP (docs/in-flight-bound.md). The change itself takes nothing off the redirect.
                assertEquals(bytes, redirected + tcp, "every byte went through the verdict: the sockets stayed registered");
                assertTrue(after.bytesRedirected() - mid.bytesRedirected() > 0, "redirected after the change too");
                assertTrue(tcp == 0 || boundHits > 0, "a byte by TCP only after a bound hit: " + tcp + " B, " + boundHits);
                SockmapStats next = SockmapAdmin.of(pins).stats();
                pingPong(NodeBed.podAddress(1), VIP_CHANGING, 100, null);
                assertEquals(0, SockmapAdmin.of(pins).stats().servicesTranslated() - next.servicesTranslated(),
                        "the next connect was not translated");
                assertEquals(1, natPackets("iptables", "KUBE-SVC-7") - nat, "it went through the DNAT");
            }
        } finally {
            client.resource(svc).delete();
            client.resource(slice("changing", NODE, true, PORT)).delete();
        }
    }

    /**
     * kube-proxy's nftables mode instead of iptables: untranslated, the connect goes through its
     * DNAT; in sockmap4j's Service map, it is translated before netfilter sees it and redirected.
     */
    @Test
    void aServiceInKubeProxysNftablesModeIsTranslatedTheSame() throws Exception {
        long nat = bed.nftPackets(false, nftService, 0);
        assertEquals(0, pingPong(NodeBed.podAddress(1), VIP_NFT, 200, null), "not in the map: by TCP");
        assertEquals(1, bed.nftPackets(false, nftService, 0) - nat, "through the nftables DNAT");
        putService(VIP_NFT + ":" + PORT, NodeBed.podAddress(1) + ":" + PORT, null);
        try {
            nat = bed.nftPackets(false, nftService, 0);
            String[] peer = new String[1];
            double share = pingPong(NodeBed.podAddress(1), VIP_NFT, 10_000, peer);
            assertTrue(share >= 0.99, "at least 99% of messages redirected: " + share);
            assertEquals(VIP_NFT + ":" + PORT, peer[0], "getpeername reports the Service the client dialed");
            assertEquals(0, bed.nftPackets(false, nftService, 0) - nat, "no packet through the nftables DNAT");
        } finally {
            removeService(VIP_NFT + ":" + PORT);
        }
    }
}
