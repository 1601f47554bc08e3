package io.github.sockmap4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.Await;
import io.github.sockmap4j.ChildJvm;
import io.github.sockmap4j.SockmapStats;
import io.github.sockmap4j.TestKernel;
import io.github.sockmap4j.admin.SockmapAdmin;
import io.github.sockmap4j.testsupport.NodeBed;
import java.io.IOException;
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
    static final int PORT = 46334;

    Path work;
    Path peer;
    Path cgroup;
    Path pins;
    NodeBed bed;
    ChildJvm agent;

    @BeforeAll
    void start() throws Exception {
        work = Files.createTempDirectory("sockmap4j-nodebed", PosixFilePermissions.asFileAttribute(
                PosixFilePermissions.fromString("rwxr-xr-x")));
        peer = work.resolve("peer");
        AgentTest.sh("cc", "-O2", "-Wall", "-o", peer.toString(), "src/test/c/peer.c");
        cgroup = TestKernel.newCgroup("nodebed");
        pins = Path.of("/sys/fs/bpf").resolve(TestKernel.uniqueName("nodebed"));
        bed = NodeBed.create("nb", 2);
        bed.service(VIP, PORT, NodeBed.podAddress(1) + ":" + PORT);
        agent = ChildJvm.start(ChildJvm.javaCommand(SockmapCli.class, "--pin-dir", pins.toString(), "agent",
                "--cgroup", cgroup.toString(), "--metrics-port", "-1"));
        agent.expect("agent: ready", 60);
        assertEquals(0, cli("allow", Integer.toString(PORT)), "allow " + PORT);
    }

    @AfterAll
    void stop() throws Exception {
        try {
            if (agent != null) {
                agent.close();
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
        SockmapStats before = SockmapAdmin.stats(pins);
        try (ChildJvm server = inPod(1, "pp-server", NodeBed.podAddress(1), Integer.toString(PORT))) {
            server.expect("port=", 30);
            try (ChildJvm client = inPod(0, "pp-client", dial, Integer.toString(PORT), Integer.toString(count), "64")) {
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

    /** Packets the node's NAT rule for the Service has matched (iptables' own counter). */
    long natPackets() throws Exception {
        String out = AgentTest.sh(NodeBed.in(bed.node, List.of("iptables", "-w", "-t", "nat", "-L", "KUBE-SVC-1", "-v",
                "-x", "-n")).toArray(String[]::new));
        Matcher m = Pattern.compile("(?m)^\\s*(\\d+)\\s+\\d+\\s+DNAT").matcher(out);
        assertTrue(m.find(), out);
        return Long.parseLong(m.group(1));
    }

    @Test
    void podToPodByPodIpTakesTheRedirect() throws Exception {
        assertTrue(pingPong(NodeBed.podAddress(1), 10_000) >= 0.99, "at least 99% of messages redirected");
    }

    @Test
    void podToServiceVipReachesItsEndpointThroughTheNodesNat() throws Exception {
        long before = natPackets();
        double share = pingPong(VIP, 2_000);
        long matched = natPackets() - before;
        System.out.printf(Locale.ROOT, "node bed: the Service's DNAT matched %d connection(s), %.2f%% redirected%n",
                matched, 100 * share);
        assertEquals(1, matched, "the one connection went through the Service's DNAT rule");
    }
}
