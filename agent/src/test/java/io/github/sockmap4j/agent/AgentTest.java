package io.github.sockmap4j.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.SockmapConfig;
import io.github.sockmap4j.SockmapStats;
import io.github.sockmap4j.SockmapUnavailableException;
import io.github.sockmap4j.admin.PolicyClient;
import io.github.sockmap4j.admin.SockmapAdmin;
import io.github.sockmap4j.linux.bpf.ObjectLoader;
import io.github.sockmap4j.linux.bpf.Pins;
import io.github.sockmap4j.linux.bpf.RetiredSets;
import io.github.sockmap4j.testbed.Await;
import io.github.sockmap4j.testbed.ChildJvm;
import io.github.sockmap4j.testbed.KernelQueues;
import io.github.sockmap4j.testbed.Sh;
import io.github.sockmap4j.testbed.VethPods;
import io.github.sockmap4j.testsupport.Leftovers;
import io.github.sockmap4j.testsupport.TestKernel;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
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
 * The agent as a process of its own ({@link AgentMain}, as {@code sockmap4j agent} runs it), with
 * peers that are not sockmap4j (C programs, the test bed's peer.c) in a cgroup it attached to, in
 * the host's namespace and in two veth "pods", and no sockmap4j JVM among them. This test JVM is
 * not in that cgroup; it asks the agent for rules and Services through {@link PolicyClient}, as
 * the command line does.
 */
@Tag("kernel")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class AgentTest {
    static final String A_ADDR = "10.254.78.1";
    static final String B_ADDR = "10.254.78.2";
    static final int NOBODY = 65534;

    Path cgroup;
    Path pins;
    Path work;
    Path peer;
    Path policy;
    VethPods pods;
    String nsA;
    String nsB;
    ChildJvm agent;
    String metrics;

    @BeforeAll
    void start() throws Exception {
        work = Files.createTempDirectory("sockmap4j-agent", PosixFilePermissions.asFileAttribute(
                PosixFilePermissions.fromString("rwxr-xr-x")));
        peer = work.resolve("peer");
        ChildJvm.compilePeer(peer);
        policy = work.resolve("policy");
        Files.writeString(policy, "# uid nobody: two ports, bounds up to 1 MiB\nuid " + NOBODY + " 47301,47302 * 1048576\n"
                + "# and Services of port 47311 from a Service range to a pod range\nuid " + NOBODY
                + " 47311 10.96.0.0/12,10.244.0.0/16 0\n");
        cgroup = TestKernel.newCgroup("agent");
        pins = Path.of("/sys/fs/bpf").resolve(TestKernel.uniqueName("agent"));
        pods = VethPods.create("p", A_ADDR, B_ADDR);
        nsA = pods.nsA;
        nsB = pods.nsB;
        startAgent();
    }

    void startAgent() throws Exception {
        agent = ChildJvm.start(ChildJvm.javaCommand(AgentMain.class, "--pin-dir", pins.toString(), "agent",
                "--cgroup", cgroup.toString(), "--metrics-port", "0", "--policy", policy.toString()));
        String ready = agent.expect("agent: ready", 60);
        metrics = ready.substring(ready.indexOf("http://"));
    }

    /** SIGTERM: the agent exits 0 and leaves the pins. */
    void stopAgent() throws Exception {
        agent.terminate();
        try {
            agent.expect("agent: stopping", 30);
        } catch (AssertionError e) {
            Process j = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "jstack").toString(),
                    Long.toString(agent.pid())).redirectErrorStream(true).start();
            System.out.println("agent threads:\n" + new String(j.getInputStream().readAllBytes()));
            throw e;
        }
        assertEquals(0, agent.waitFor(30), agent.output());
    }

    @AfterAll
    void stop() throws Exception {
        try {
            Leftovers.removeAgent(agent, pins);
        } finally {
            if (pods != null) {
                pods.close();
            }
            Leftovers.removeCgroups(cgroup);
            Leftovers.removeDirectory(work);
        }
    }

    /** Once {@code server} listens (its "port=" line): a client started before could be refused. */
    AgentTest listening(ChildJvm server) throws InterruptedException {
        server.expect("port=", 30);
        return this;
    }

    /** The peer program in the agent's cgroup, optionally inside a namespace. */
    ChildJvm peer(String ns, String... args) throws IOException {
        List<String> cmd = new ArrayList<>();
        if (ns != null) {
            cmd.addAll(List.of("ip", "netns", "exec", ns));
        }
        cmd.add(peer.toString());
        cmd.addAll(List.of(args));
        return ChildJvm.startInCgroup(cgroup, cmd);
    }

    /** The rules the agent holds, a line each, as 'sockmap4j rules' prints them. */
    String rules() throws IOException {
        try (PolicyClient c = PolicyClient.open(pins)) {
            return String.join("\n", c.rules());
        }
    }

    /** The Services, a line each, as 'sockmap4j service list' prints them. */
    String services() throws IOException {
        try (PolicyClient c = PolicyClient.open(pins)) {
            return String.join("\n", c.services());
        }
    }

    SockmapStats stats() throws IOException {
        return SockmapAdmin.of(pins).stats();
    }

    long moved() throws IOException {
        SockmapStats s = stats();
        return s.bytesRedirected() + s.bytesPassed();
    }

    /** Waits until the writer stops: TCP's buffers are full too and no byte moves for a second. */
    SockmapStats awaitWriterHeld() throws Exception {
        Await.until("the writer is held", Duration.ofSeconds(30), () -> {
            long moved = moved();
            return !Await.holdsWithin(Duration.ofSeconds(1), () -> moved() != moved);
        });
        return stats();
    }

    static double share(long part, long other) {
        return part + other == 0 ? 0 : (double) part / (part + other);
    }

    /** A ping-pong of {@code count} round trips of 64 B; returns the messages' redirected share. */
    double pingPong(String serverNs, String clientNs, String addr, int port, int count) throws Exception {
        SockmapStats before = stats();
        try (ChildJvm server = peer(serverNs, "pp-server", addr, Integer.toString(port))) {
            server.expect("port=", 30);
            try (ChildJvm client = peer(clientNs, "pp-client", addr, Integer.toString(port), Integer.toString(count),
                    "64")) {
                assertEquals("1", client.expect("ok=", 120), client.output());
                assertEquals(0, client.waitFor(30));
            }
            assertEquals("1", server.expect("ok=", 30));
        }
        SockmapStats after = stats();
        long redirected = after.messagesRedirected() - before.messagesRedirected();
        long tcp = after.messagesPassed() - before.messagesPassed();
        System.out.printf(Locale.ROOT, "agent: ping-pong %s->%s %d x 64 B: %d messages redirected, %d by TCP (%.2f%%)%n",
                clientNs == null ? "host" : clientNs, serverNs == null ? "host" : serverNs, count, redirected, tcp,
                100 * share(redirected, tcp));
        assertEquals(2L * count, redirected + tcp, "every message counted once");
        return share(redirected, tcp);
    }

    /** What a stream measured: the bytes' redirected share and the MB/s its writer reached. */
    record Stream(double share, double mbps, long boundHits) {
    }

    /** A stream of {@code total} bytes checked by its reader, written as fast as the writer can. */
    Stream stream(String serverNs, String clientNs, String addr, int port, long total) throws Exception {
        return stream(serverNs, clientNs, addr, port, total, 0);
    }

    /** The same, the writer paced at {@code mbps} MB/s (0: unpaced). */
    Stream stream(String serverNs, String clientNs, String addr, int port, long total, long mbps) throws Exception {
        SockmapStats before = stats();
        String reached;
        List<String> args = new ArrayList<>(List.of("stream-client", addr, Integer.toString(port), Long.toString(total)));
        if (mbps > 0) {
            args.add(Long.toString(mbps));
        }
        try (ChildJvm server = peer(serverNs, "stream-server", addr, Integer.toString(port), Long.toString(total))) {
            server.expect("port=", 30);
            try (ChildJvm client = peer(clientNs, args.toArray(String[]::new))) {
                assertEquals("1", server.expect("ok=", 120), "every byte, in order: " + server.output());
                reached = client.expect("mbps=", 30);
                assertEquals("1", client.expect("ok=", 30), client.output());
            }
        }
        SockmapStats after = stats();
        long redirected = after.bytesRedirected() - before.bytesRedirected();
        long tcp = after.bytesPassed() - before.bytesPassed();
        System.out.printf(Locale.ROOT, "agent: stream %s->%s %d MiB at %s MB/s (%s): %d MiB redirected, %d MiB by TCP "
                        + "(%.2f%%), %d bound hits, %d resumes%n", clientNs == null ? "host" : clientNs,
                serverNs == null ? "host" : serverNs, total >> 20, reached, mbps > 0 ? "paced" : "unpaced",
                redirected >> 20, tcp >> 20, 100 * share(redirected, tcp), after.boundHits() - before.boundHits(),
                after.resumes() - before.resumes());
        assertEquals(total, redirected + tcp, "every byte counted once");
        // Without the agent's watcher and the drain check, a receiver that publishes nothing gets its first
        // bound's worth (tcp_rmem's default) and then TCP for good.
        assertTrue(redirected > 64L * KernelQueues.tcpRmemDefault(), () -> "the redirect went on past the first bound: "
                + redirected + " B");
        return new Stream(share(redirected, tcp), Double.parseDouble(reached), after.boundHits() - before.boundHits());
    }

    /**
     * A reader that keeps up: the writer first runs as fast as it can (the reader, checking every
     * sequence number, then sets the pace), then at half the rate it reached. A paced writer that
     * fell short of its pace, or whose reader fell a bound behind it (a bound hit: the bound at
     * work, sending the excess by TCP), met a reader (or a machine) slower than the first stream
     * showed, which is not the case measured: the pace is halved again from what it reached, once.
     * The last paced stream's share is returned.
     */
    double streamKeptUp(String serverNs, String clientNs, String addr, int port) throws Exception {
        long pace = Math.max(1, (long) stream(serverNs, clientNs, addr, port, 1L << 30).mbps() / 2);
        Stream paced = stream(serverNs, clientNs, addr, port, 1L << 30, pace);
        if (paced.mbps() < 0.9 * pace || paced.boundHits() > 0) {
            paced = stream(serverNs, clientNs, addr, port, 1L << 30, Math.max(1, (long) paced.mbps() / 2));
        }
        return paced.share();
    }

    @Test
    @Order(1)
    void cPeersInTheHostNamespaceStayOnTheRedirect() throws Exception {
        AsRoot.allow(pins, "47201");
        assertTrue(pingPong(null, null, "127.0.0.1", 47201, 20_000) >= 0.99, "at least 99% of messages redirected");
        assertTrue(streamKeptUp(null, null, "127.0.0.1", 47201) >= 0.99, "at least 99% of bytes redirected");
        AsRoot.deny(pins, "47201");
    }

    @Test
    @Order(2)
    void cPeersInTwoPodsStayOnTheRedirect() throws Exception {
        AsRoot.allow(pins, "47202");
        assertTrue(pingPong(nsA, nsB, A_ADDR, 47202, 20_000) >= 0.99, "at least 99% of messages redirected");
        assertTrue(streamKeptUp(nsA, nsB, A_ADDR, 47202) >= 0.99, "at least 99% of bytes redirected");
        // While processes of the cgroup live in both pods, the watcher looks in their namespaces too.
        try (ChildJvm a = peer(nsA, "sink-server", A_ADDR, "47210");
             ChildJvm b = peer(nsB, "sink-server", B_ADDR, "47211")) {
            a.expect("port=", 30);
            b.expect("port=", 30);
            Await.until("the watcher looks in the host's and both pods' namespaces", Duration.ofSeconds(10),
                    () -> scrape("/metrics").matches("(?s).*sockmap4j_agent_namespaces [3-9].*"));
        }
        AsRoot.deny(pins, "47202");
    }

    @Test
    @Order(3)
    void aReaderThatNeverReadsHoldsItsWriterWithinTheBound() throws Exception {
        AsRoot.allow(pins, "47203");
        SockmapStats before = stats();
        try (ChildJvm sink = peer(null, "sink-server", "127.0.0.1", "47203");
             ChildJvm writer = listening(sink).peer(null, "stream-client", "127.0.0.1", "47203",
                     Long.toString(1L << 30))) {
            sink.expect("accepted=", 30);
            SockmapStats held = awaitWriterHeld();
            long redirected = held.bytesRedirected() - before.bytesRedirected();
            System.out.printf(Locale.ROOT, "agent: never-reading receiver: %d B redirected, %d B by TCP%n", redirected,
                    held.bytesPassed() - before.bytesPassed());
            assertTrue(redirected <= KernelQueues.tcpRmemDefault() + 65536, "within the first bound (and one write): " + redirected);
            assertTrue(writer.isAlive(), "the writer is blocked, not failed");
        }
        AsRoot.deny(pins, "47203");
    }

    @Test
    @Order(4)
    void anAgentRestartMidStreamLosesNothingAndKeepsEveryRule() throws Exception {
        AsRoot.allow(pins, "47204");
        AsRoot.allowBounded(pins, 4194304, "47205");
        long total = 2L << 30;
        try (ChildJvm server = peer(null, "stream-server", "127.0.0.1", "47204", Long.toString(total))) {
            server.expect("port=", 30);
            SockmapStats before = stats();
            try (ChildJvm client = peer(null, "stream-client", "127.0.0.1", "47204", Long.toString(total))) {
                Await.until("the stream is under way", () -> stats().bytesRedirected() + stats().bytesPassed()
                        > before.bytesRedirected() + before.bytesPassed() + (64L << 20));
                stopAgent();
                assertTrue(SockmapAdmin.of(pins).isUp(), "the pins stay");
                // A rule root makes while no agent runs: the next agent adopts it as root's.
                AsRoot.allowBounded(pins, 65536, "47206");
                startAgent();
                assertEquals("1", server.expect("ok=", 120), "every byte, in order: " + server.output());
                assertEquals("1", client.expect("ok=", 30));
            }
        }
        String rules = rules();
        assertTrue(rules.contains("47204") && rules.contains("47205 bound 4194304"), "every rule kept: " + rules);
        assertTrue(rules.contains("47206 bound 65536 held by uid 0 (user)"), "adopted as root's: " + rules);
        assertTrue(pingPong(null, null, "127.0.0.1", 47204, 2_000) >= 0.99, "a connection made after the restart");
        AsRoot.deny(pins, "47204", "47205", "47206");
    }

    /**
     * An agent whose pinned maps differ from the running set's (another ABI) starts over that set:
     * the set is retired, not refused. The open connection, half-way through a checked stream,
     * finishes byte-exact on the retired set; the retired programs leave the cgroup; rules carry
     * over; a new connection is redirected by the new set; once the old connection closes, no pin of
     * the old ABI is left. The older version is played by the running agent's own pins with an
     * older ABI number written into their meta map: the retire reads nothing else of a set.
     */
    @Test
    @Order(4)
    void anUpgradeAcrossAnAbiChangeRetiresTheOldPinsAndLosesNothing() throws Exception {
        AsRoot.allow(pins, "47207");
        long total = 512L << 20;
        try (ChildJvm server = peer(null, "stream-server", "127.0.0.1", "47207", Long.toString(total));
             ChildJvm client = listening(server).peer(null, "step-client", "127.0.0.1", "47207", Long.toString(total))) {
            client.expect("half=", 60);
            List<String> before = Sh.run("bpftool", "cgroup", "show", cgroup.toString()).lines()
                    .filter(l -> l.contains("sm4j_sockops")).toList();
            assertEquals(1, before.size(), "one sockops program attached: " + before);
            stopAgent();
            int older = Pins.ABI_VERSION - 1;
            Sh.run("bpftool", "map", "update", "pinned", pins.resolve("meta").toString(), "key", "0", "0", "0", "0",
                    "value", Integer.toString(older & 0xff), Integer.toString((older >> 8) & 0xff), "0", "0");
            startAgent();
            List<Path> retired = RetiredSets.list(pins);
            assertEquals(1, retired.size(), "the older set retired: " + retired);
            assertTrue(retired.get(0).getFileName().toString().startsWith("retired-abi-" + older + "-"), retired::toString);
            assertEquals(retired, SockmapAdmin.of(pins).retiredSets(), "what 'sockmap4j status' says waits");
            List<String> after = Sh.run("bpftool", "cgroup", "show", cgroup.toString()).lines()
                    .filter(l -> l.contains("sm4j_sockops")).toList();
            assertEquals(1, after.size(), "only the new set's sockops program attached: " + after);
            assertFalse(after.equals(before), "a program of the new set: " + before + " then " + after);
            assertTrue(rules().contains("47207"), "the rule carried over: " + rules());
            // A connection made now: the new set's programs, its counters.
            assertTrue(pingPong(null, null, "127.0.0.1", 47207, 2_000) >= 0.99, "a new connection redirected");
            client.closeInput();
            assertEquals("1", server.expect("ok=", 120), "every byte of the old connection, in order: " + server.output());
            assertEquals("1", client.expect("ok=", 30), client.output());
        }
        Await.until("the retired set removed once its connection closed", Duration.ofSeconds(10),
                () -> RetiredSets.list(pins).isEmpty());
        AsRoot.deny(pins, "47207");
    }

    /** Lines to the agent's control socket from a process of uid nobody; the answers. */
    List<String> asNobody(String... lines) throws Exception {
        List<String> cmd = new ArrayList<>(List.of("setpriv", "--reuid=" + NOBODY, "--regid=" + NOBODY,
                "--clear-groups", peer.toString(), "agent-call", SockmapAdmin.of(pins).agentSocket().toString()));
        cmd.addAll(List.of(lines));
        try (ChildJvm c = ChildJvm.start(cmd)) {
            List<String> answers = new ArrayList<>();
            for (int i = 0; i < lines.length; i++) {
                answers.add(c.expect("answer=", 30));
            }
            assertEquals(0, c.waitFor(30), c.output());
            return answers;
        }
    }

    @Test
    @Order(5)
    void anUnprivilegedUserOptsInOnlyWhatThePolicyAllows() throws Exception {
        assertEquals("600", Integer.toOctalString(
                (Integer) Files.getAttribute(pins.resolve("policy"), "unix:mode") & 0777), "the policy pin is root's");
        // A bound is set on one's own server once it listens, never ahead of one.
        assertTrue(asNobody("ALLOW 47301 * 0 65536").get(0).startsWith("ERR no server of uid " + NOBODY
                + " listens on port 47301"));
        List<String> a;
        try (ChildJvm server = ChildJvm.start(List.of("setpriv", "--reuid=" + NOBODY, "--regid=" + NOBODY,
                "--clear-groups", peer.toString(), "conn-server", "127.0.0.1", "47301"))) {
            server.expect("port=", 30);
            a = asNobody("ALLOW 47301 * 0 65536", "ALLOW 47303 * 0 0", "ALLOW 47302 * 0 -1",
                    "ALLOW 47302 * 0 2097152", "DENY 47301 * 0");
            server.closeInput();
            server.expect("conns=", 30);
        }
        assertTrue(a.get(0).startsWith("OK allowed 47301"), a.get(0));
        assertTrue(a.get(1).startsWith("ERR uid 65534 may not opt in port 47303"), a.get(1));
        assertTrue(a.get(2).startsWith("ERR only root may make a rule unbounded"), a.get(2));
        assertTrue(a.get(3).startsWith("ERR uid 65534 may set bounds up to 1048576"), a.get(3));
        assertTrue(a.get(4).startsWith("OK denied 47301"), a.get(4));

        AsRoot.allow(pins, "47302");
        List<String> b = asNobody("DENY 47302 * 0");
        assertTrue(b.get(0).startsWith("ERR the rule for 47302 was made by uid 0"), b.get(0));
        assertTrue(rules().contains("47302"), "still there");
        // An OPTIN lasts as long as its connection: gone when the process is.
        assertTrue(asNobody("OPTIN 47301 * 0 0").get(0).startsWith("OK opted in 47301"));
        Await.until("the connection's rule is gone", () -> !rules().contains("47301"));
        AsRoot.deny(pins, "47302");
    }

    /**
     * Services through the agent's control socket: a user puts only what its grants cover (the
     * Service's address and port and each endpoint's), replaces and removes only its own, and an
     * agent restart keeps who put what.
     */
    @Test
    @Order(5)
    void anUnprivilegedUserPutsOnlyTheServicesThePolicyAllows() throws Exception {
        List<String> a = asNobody("SERVICE 10.96.5.5 47311 all 10.244.1.2:47311 10.244.2.2:47311",
                "SERVICE 10.96.5.6 47311 all 10.1.1.1:47311 -", "SERVICE 10.96.5.6 80 all 10.244.1.2:47311 -",
                "SERVICE 192.168.7.7 47311 all 10.244.1.2:47311 -", "SERVICES");
        assertTrue(a.get(0).startsWith("OK service 10.96.5.5:47311: 1 local, 1 remote"), a.get(0));
        assertTrue(a.get(1).startsWith("ERR uid 65534 may not put the Service 10.96.5.6:47311: its endpoint "
                + "10.1.1.1:47311 is not in a grant"), a.get(1));
        assertTrue(a.get(2).startsWith("ERR uid 65534 may not put the Service 10.96.5.6:80: its address"), a.get(2));
        assertTrue(a.get(3).startsWith("ERR uid 65534 may not put the Service 192.168.7.7:47311: its address"), a.get(3));
        assertEquals("OK 1", a.get(4), "one Service listed");
        String listed = services();
        assertTrue(listed.contains("10.96.5.5:47311 local=10.244.1.2:47311 remote=10.244.2.2:47311 put by uid "
                + NOBODY), listed);

        // Root's Service: the user may neither replace nor remove it.
        try (PolicyClient root = PolicyClient.open(pins)) {
            root.putService(new SockmapAdmin.Service(SockmapAdmin.endpoint("10.96.5.7:47311"),
                    List.of(SockmapAdmin.endpoint("10.244.1.3:47311")), List.of(), false));
        }
        List<String> b = asNobody("SERVICE 10.96.5.7 47311 all 10.244.1.2:47311 -", "UNSERVICE 10.96.5.7 47311");
        assertTrue(b.get(0).startsWith("ERR the Service 10.96.5.7:47311 was put by uid 0: only they, or root, may "
                + "replace it"), b.get(0));
        assertTrue(b.get(1).startsWith("ERR the Service 10.96.5.7:47311 was put by uid 0"), b.get(1));

        // An agent restart: the map is pinned, who put what is on file.
        stopAgent();
        startAgent();
        assertTrue(services().contains("10.96.5.5:47311 local=10.244.1.2:47311 remote=10.244.2.2:47311 "
                + "put by uid " + NOBODY), "kept after the restart");
        List<String> c = asNobody("UNSERVICE 10.96.5.5 47311", "UNSERVICE 10.96.5.5 47311");
        assertTrue(c.get(0).startsWith("OK removed service 10.96.5.5:47311"), c.get(0));
        assertTrue(c.get(1).startsWith("ERR no Service 10.96.5.5:47311"), c.get(1));
        try (PolicyClient root = PolicyClient.open(pins)) {
            root.removeService(SockmapAdmin.endpoint("10.96.5.7:47311"));
        }
        assertEquals(List.of(), SockmapAdmin.of(pins).services(), "nothing left in the map");
    }

    @Test
    @Order(6)
    void aPinDirectoryAnotherUserMadeIsRefused() throws Exception {
        Path planted = Path.of("/sys/fs/bpf").resolve(TestKernel.uniqueName("planted"));
        Files.createDirectory(planted);
        try {
            Files.setAttribute(planted, "unix:uid", NOBODY);
            Files.setPosixFilePermissions(planted, PosixFilePermissions.fromString("rwxrwxrwx"));
            SockmapUnavailableException refused = assertThrows(SockmapUnavailableException.class,
                    () -> SockmapAdmin.up(SockmapConfig.builder().pinDirectory(planted).cgroup(cgroup).build()));
            assertTrue(refused.getMessage().contains("refusing the pin directory " + planted)
                    && refused.getMessage().contains("uid 65534"), refused.getMessage());
            try (var files = Files.list(planted)) {
                assertEquals(0, files.count(), "nothing pinned there");
            }
            assertFalse(Files.exists(SockmapAdmin.of(planted).agentSocket().getParent()), "no lock directory either");
        } finally {
            Files.delete(planted);
        }
    }

    @Test
    @Order(7)
    void healthAndReadiness() throws Exception {
        assertTrue(scrape("/healthz").startsWith("ok"));
        assertTrue(scrape("/readyz").startsWith("ready"));
        // After a garbage collection too: a meter holding its source weakly would read NaN.
        Process gc = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "jcmd").toString(),
                Long.toString(agent.pid()), "GC.run").redirectErrorStream(true).start();
        assertEquals(0, gc.waitFor(), new String(gc.getInputStream().readAllBytes()));
        String m = scrape("/metrics");
        assertTrue(m.contains("sockmap4j_active 1.0"), () -> m + "\nagent output:\n" + agent.output());
    }

    @Test
    @Order(8)
    void streamsStayInOrderWhileACpuIsBusy() throws Exception {
        // A busy CPU stretches every race between the sender's verdict, its push to TCP, the
        // receiver's reads and the watcher's looks: a resume on a count above the truth shows
        // here as a reader that finds a byte out of place.
        AsRoot.allow(pins, "47207", "47208");
        AtomicBoolean spin = new AtomicBoolean(true);
        Thread hog = Thread.ofPlatform().daemon().name("cpu-hog").start(() -> {
            long x = 0;
            while (spin.get()) {
                x += System.nanoTime() & 1;
            }
            Blackhole.sink = x;
        });
        try {
            for (int round = 0; round < 4; round++) {
                stream(null, null, "127.0.0.1", 47207, 1L << 30);
            }
            stream(nsA, nsB, A_ADDR, 47208, 1L << 30);
        } finally {
            spin.set(false);
            hog.join();
        }
        AsRoot.deny(pins, "47207", "47208");
    }

    @Test
    @Order(9)
    void aReaderThatStopsHoldsItsWriterWithinTheCeiling() throws Exception {
        // A reader that keeps up earns a larger bound, up to tcp_rmem's maximum, as TCP's receive
        // buffer would grow; when it stops reading, what was redirected and is unread stays within it.
        AsRoot.allow(pins, "47209");
        long pace = Math.max(1, (long) stream(null, null, "127.0.0.1", 47209, 1L << 30).mbps() / 2);
        long first = 256L << 20;
        SockmapStats before = stats();
        try (ChildJvm sink = peer(null, "sink-server", "127.0.0.1", "47209", Long.toString(first));
             ChildJvm writer = listening(sink).peer(null, "stream-client", "127.0.0.1", "47209",
                     Long.toString(1L << 30), Long.toString(pace))) {
            sink.expect("stopped=", 60);
            SockmapStats held = awaitWriterHeld();
            long redirected = held.bytesRedirected() - before.bytesRedirected();
            // The reader took at most `first` of the redirected bytes: at least this many are unread.
            long unread = redirected - first;
            System.out.printf(Locale.ROOT, "agent: receiver that stopped after %d MiB (writer at %d MB/s): %d B "
                            + "redirected, %d B by TCP, at least %d redirected B unread (ceiling %d)%n", first >> 20,
                    pace, redirected, held.bytesPassed() - before.bytesPassed(), unread, ObjectLoader.watchCeiling());
            assertTrue(redirected > first / 2, "the redirect carried most of what was read: " + redirected);
            assertTrue(unread <= ObjectLoader.watchCeiling(), "unread redirected bytes within tcp_rmem's maximum: " + unread);
            assertTrue(writer.isAlive(), "the writer is blocked, not failed");
        }
        AsRoot.deny(pins, "47209");
    }

    @Test
    @Order(10)
    void pinsRemovedUnderARunningAgentMakeItExitToBeStartedAgain() throws Exception {
        assertTrue(scrape("/readyz").startsWith("ready"));
        assertTrue(SockmapAdmin.of(pins).removePins() > 0, "what 'sockmap4j down --force' does");
        assertEquals(AgentCommand.PINS_LOST, agent.waitFor(30), agent.output());
        assertTrue(agent.output().contains("were removed while the agent ran"), agent.output());
        startAgent(); // it sets them up again, as whatever restarts it would
        assertTrue(scrape("/readyz").startsWith("ready"));
    }

    /** Keeps the busy loop's result alive, so that it is not optimized away. */
    static final class Blackhole {
        static volatile long sink;
    }

    String scrape(String path) throws Exception {
        String base = metrics.substring(0, metrics.indexOf("/metrics"));
        try (HttpClient http = HttpClient.newHttpClient()) {
            HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(base + path)).build(),
                    HttpResponse.BodyHandlers.ofString());
            assertEquals(200, r.statusCode(), r.body());
            return r.body();
        }
    }
}
