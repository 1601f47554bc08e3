package io.github.sockmap4j.agent.kubernetes;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.linux.sys.NetNamespace;
import io.github.sockmap4j.linux.sys.NetnsCookie;
import io.github.sockmap4j.testbed.ChildJvm;
import io.github.sockmap4j.testbed.NodeBed;
import io.github.sockmap4j.testbed.Netns;
import io.github.sockmap4j.testbed.Sh;
import io.github.sockmap4j.testsupport.Leftovers;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/**
 * Which namespace is a pod's, against real namespaces and processes: one root made (as a pod's
 * sandbox gets), one a user made for itself with the pod's addresses ({@code unshare -Urn}, any
 * user may), one in a user namespace root made (a pod with user namespaces), a second root-made one,
 * and the node's own.
 */
@Tag("kernel")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class PodNetnsTest {
    static final String V4 = "10.250.0.2";
    static final String V6 = "fd00:250::2";
    static final int USER = 4321;
    final String real = "sm4j-" + ProcessHandle.current().pid() % 100000 + "-pnr";
    final String second = "sm4j-" + ProcessHandle.current().pid() % 100000 + "-pns";
    final List<ChildJvm> processes = new ArrayList<>();
    final List<ServerSocketChannel> held = new ArrayList<>();
    List<InetAddress> addresses;
    String node;
    String ours;
    long sandbox;
    long other;
    long usersOwn;
    long runtimes;

    @BeforeAll
    void start() throws Exception {
        addresses = List.of(InetAddress.getByName(V4), InetAddress.getByName(V6));
        node = NetNamespace.ownId();
        ours = NetNamespace.ownUserNamespace();
        for (String ns : List.of(real, second)) {
            Netns.add(ns);
            Sh.run("ip", "-n", ns, "addr", "add", V4 + "/32", "dev", "lo");
            Sh.run("ip", "-n", ns, "-6", "addr", "add", V6 + "/128", "dev", "lo", "nodad");
        }
        sandbox = started(NodeBed.in(real, List.of("sh", "-c", "echo ready; exec sleep infinity")));
        other = started(NodeBed.in(second, List.of("sh", "-c", "echo ready; exec sleep infinity")));
        String addAddresses = "ip link set lo up && ip addr add " + V4 + "/32 dev lo && ip -6 addr add " + V6
                + "/128 dev lo nodad && echo ready && exec sleep infinity";
        // A user of the pod makes a namespace of its own, with the pod's addresses, from inside the pod's.
        usersOwn = started(NodeBed.in(real, List.of("setpriv", "--reuid=" + USER, "--regid=" + USER, "--clear-groups",
                "unshare", "-Urn", "sh", "-c", addAddresses)));
        // A pod with user namespaces: its runtime (root) makes the user namespace, then the network one in it.
        runtimes = started(List.of("unshare", "--user", "--map-root-user", "--net", "sh", "-c", addAddresses));
    }

    /** A process of {@code command}, once it said it is ready: its pid. */
    long started(List<String> command) throws Exception {
        ChildJvm p = ChildJvm.start(command);
        processes.add(p);
        p.expect("ready", 30);
        return p.pid();
    }

    @AfterAll
    void stop() throws Exception {
        List<AutoCloseable> all = new ArrayList<>(held);
        all.addAll(processes);
        all.add(() -> Netns.deleteAll(List.of(real, second)));
        Leftovers.closeAll(all.toArray(AutoCloseable[]::new));
    }

    PodNetns.Result find(boolean hostUsers, long... pids) {
        List<Long> list = new ArrayList<>();
        for (long pid : pids) {
            list.add(pid);
        }
        return PodNetns.find(list, addresses, hostUsers, node, ours);
    }

    String idOf(long pid) throws IOException {
        return Files.readSymbolicLink(Path.of("/proc/" + pid + "/ns/net")).toString();
    }

    @Test
    void theSandboxsNamespaceIsFoundWhateverElseThePodRuns() throws IOException {
        for (PodNetns.Result r : List.of(find(true, sandbox), find(true, usersOwn, sandbox),
                find(true, sandbox, usersOwn, runtimes), find(false, usersOwn, sandbox))) {
            PodNetns.Found f = assertInstanceOf(PodNetns.Found.class, r, String.valueOf(r.why()));
            assertEquals(idOf(sandbox), f.id());
            assertEquals(NetnsCookie.ofProcess(sandbox), f.cookie());
        }
    }

    /** The red team's namespace: a user's, holding the pod's addresses. Never the pod's. */
    @Test
    void aNamespaceAUserMadeIsNeverThePods() {
        PodNetns.Result r = find(true, usersOwn);
        assertInstanceOf(PodNetns.NotYet.class, r);
        assertTrue(r.why().contains("1 in namespaces not made"), r.why());
        assertInstanceOf(PodNetns.NotYet.class, find(false, usersOwn), "made by uid " + USER + ", not by root");
    }

    @Test
    void aPodWithUserNamespacesHasTheOneItsRuntimeMade() throws IOException {
        PodNetns.Found f = assertInstanceOf(PodNetns.Found.class, find(false, runtimes));
        assertEquals(idOf(runtimes), f.id());
        assertInstanceOf(PodNetns.NotYet.class, find(true, runtimes),
                "a pod without user namespaces: root in it may make one like that too");
    }

    @Test
    void twoNamespacesRootMadeInOnePodAreNotGuessedBetween() {
        PodNetns.Result r = find(true, sandbox, other);
        assertInstanceOf(PodNetns.CannotTell.class, r);
        assertTrue(r.why().contains("2 network namespaces"), r.why());
    }

    @Test
    void theNodesNamespaceAndNoProcessFindNothing() {
        PodNetns.Result r = find(true, ProcessHandle.current().pid());
        assertInstanceOf(PodNetns.NotYet.class, r);
        assertTrue(r.why().startsWith("1 of its processes in the node's"), r.why());
        assertInstanceOf(PodNetns.NotYet.class, find(true));
        assertInstanceOf(PodNetns.NotYet.class, find(true, Long.MAX_VALUE / 2), "a pid that is not there");
    }

    @Test
    void aNamespaceWithoutThePodsAddressesIsNotYetIts() throws IOException {
        List<InetAddress> more = new ArrayList<>(addresses);
        more.add(InetAddress.getByName("10.250.0.3"));
        PodNetns.Result r = PodNetns.find(List.of(sandbox), more, true, node, ours);
        assertInstanceOf(PodNetns.NotYet.class, r);
        assertTrue(r.why().contains("does not hold"), r.why());
    }

    /**
     * Every port of the pod's namespace held (its ephemeral range narrowed to two ports here, as a
     * user holding all of them would leave it): an address still counts as held, so the pod is found.
     */
    @Test
    void aNamespaceWhosePortsAreAllTakenStillHoldsItsAddresses() throws Exception {
        Sh.run("ip", "netns", "exec", real, "sysctl", "-q", "-w", "net.ipv4.ip_local_port_range=40000 40001");
        for (int port : List.of(40000, 40001)) {
            held.add(NodeBed.callIn(real, () -> {
                ServerSocketChannel ch = ServerSocketChannel.open();
                ch.bind(new InetSocketAddress(port));
                return ch;
            }));
        }
        assertThrows(IOException.class, () -> NodeBed.callIn(real, () -> {
            try (ServerSocketChannel ch = ServerSocketChannel.open()) {
                ch.bind(new InetSocketAddress(InetAddress.getByName(V4), 0));
            }
            return null;
        }), "every port is taken: a bind to port 0 fails");
        PodNetns.Found f = assertInstanceOf(PodNetns.Found.class, find(true, usersOwn, sandbox));
        assertEquals(idOf(sandbox), f.id());
    }
}
