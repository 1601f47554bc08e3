package io.github.sockmap4j.agent;

import io.github.sockmap4j.linux.bpf.PolicyRule;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.admin.PolicyClient;
import io.github.sockmap4j.admin.Rule;
import io.github.sockmap4j.admin.SockmapAdmin;
import io.github.sockmap4j.agent.control.ControlServer;
import io.github.sockmap4j.control.AgentClient;
import io.github.sockmap4j.control.AgentRequest;
import io.github.sockmap4j.testbed.ChildJvm;
import io.github.sockmap4j.testsupport.TestKernel;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
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
 * The agent's control socket against users who try to break it: many connections, a flood of
 * requests, lines without an end, more rules than their share, a connection handed on by a
 * process that then exits, and an agent out of file descriptors. Each is refused with its reason,
 * or served, and root is served throughout.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 180, unit = TimeUnit.SECONDS)
@Tag("kernel")
class ControlSocketAbuseTest {
    static final int USER = 4002;
    static final int GROUP = 5002;
    Path cgroup;
    Path pins;
    Path policy;
    Path bin;
    NodeAgent agent;
    int port;

    @BeforeAll
    void start() throws IOException, InterruptedException {
        cgroup = TestKernel.newCgroup("control");
        pins = Path.of("/sys/fs/bpf").resolve(TestKernel.uniqueName("control"));
        port = 41_000 + (int) (ProcessHandle.current().pid() % 1000) * 10;
        policy = Files.createTempFile("policy", "");
        Files.writeString(policy, "uid " + USER + " " + port + "-" + (port + 9) + " * 0\n"
                + "gid " + GROUP + " " + (port + 9) + " * 0\n"
                + "quota uid " + USER + " 3\n");
        bin = Files.createTempDirectory("sm4j-client", PosixFilePermissions.asFileAttribute(
                PosixFilePermissions.fromString("rwxr-xr-x")));
        ChildJvm.compileC("src/test/c/agent_client.c", bin.resolve("agent_client"));
        agent = NodeAgent.start(new NodeAgent.Options(pins, List.of(cgroup), policy, 1024, false));
    }

    @AfterAll
    void stop() throws IOException {
        try {
            if (agent != null) {
                agent.close();
            }
        } finally {
            SockmapAdmin.of(pins).removePins();
            Files.deleteIfExists(policy);
            Files.deleteIfExists(bin.resolve("agent_client"));
            Files.deleteIfExists(bin);
            Files.deleteIfExists(cgroup);
        }
    }

    /**
     * The C client as {@code uid} (groups: its own and {@code extraGroup}, when not 0). With
     * {@code handoff}, the process that connects exits at once and its child runs {@code commands}.
     */
    ChildJvm client(int uid, int extraGroup, int connections, boolean handoff, String... commands)
            throws IOException {
        List<String> cmd = new ArrayList<>(List.of("setpriv", "--reuid=" + uid, "--regid=" + uid,
                extraGroup == 0 ? "--clear-groups" : "--groups=" + extraGroup, "--inh-caps=-all", "--bounding-set=-all",
                bin.resolve("agent_client").toString(), SockmapAdmin.of(pins).agentSocket().toString(),
                Integer.toString(connections)));
        if (handoff) {
            cmd.add("handoff");
            cmd.addAll(List.of(commands));
            // The JDK stops reading a process's output when it exits: cat carries the child's.
            List<String> piped = new ArrayList<>(List.of("sh", "-c", "\"$@\" | cat", "sh"));
            piped.addAll(cmd);
            return ChildJvm.start(piped);
        }
        return ChildJvm.start(cmd);
    }

    /** The C client as {@code uid} with no other group, on the control socket {@code socket}. */
    ChildJvm client(Path socket, int uid, int connections) throws IOException {
        return ChildJvm.start(List.of("setpriv", "--reuid=" + uid, "--regid=" + uid, "--clear-groups",
                "--inh-caps=-all", "--bounding-set=-all", bin.resolve("agent_client").toString(), socket.toString(),
                Integer.toString(connections)));
    }

    /**
     * A user namespace of {@link #USER}'s mapping the 8 uids from {@code base}, its maps written by
     * root as newuidmap writes /etc/subuid's: it lives as long as the process returned.
     */
    static ChildJvm userNamespace(int base) throws IOException, InterruptedException {
        ChildJvm holder = ChildJvm.start(List.of("setpriv", "--reuid=" + USER, "--regid=" + USER,
                "--clear-groups", "unshare", "--user", "--", "sh", "-c", "echo ns=1; exec cat"));
        try {
            holder.expect("ns=", 30);
            Files.writeString(Path.of("/proc/" + holder.pid() + "/uid_map"), "0 " + base + " 8\n");
            Files.writeString(Path.of("/proc/" + holder.pid() + "/gid_map"), "0 " + base + " 8\n");
            return holder;
        } catch (IOException | InterruptedException | RuntimeException | Error e) {
            holder.close();
            throw e;
        }
    }

    static String send(ChildJvm c, int conn, String line) throws InterruptedException {
        c.send("send " + conn + " " + line);
        return c.expect("answer=" + conn + " ", 30);
    }

    String rootPing() throws IOException {
        try (AgentClient root = AgentClient.connectIfRunning(SockmapAdmin.of(pins).agentSocket())) {
            return root.call(AgentRequest.ping());
        }
    }

    @Test
    void oneProcessHasAtMostItsShareOfConnectionsAndRootIsStillServed() throws Exception {
        int limit = ControlServer.Limits.DEFAULT.connectionsPerProcess();
        int uid = USER + 10;
        try (ChildJvm c = client(uid, 0, limit + 3, false)) {
            assertEquals(Integer.toString(limit + 3), c.expect("connected=", 30));
            for (int k = 0; k < limit; k++) {
                assertEquals("OK agent", send(c, k, "PING"));
            }
            for (int k = limit; k < limit + 3; k++) {
                String a = send(c, k, "PING");
                assertTrue(a.startsWith("ERR process ") && a.contains("(uid " + uid + ") has " + limit
                        + " connections to the agent open"), a);
            }
            try (ChildJvm other = client(uid, 0, 1, false)) {
                other.expect("connected=", 30);
                assertEquals("OK agent", send(other, 0, "PING"), "another process of the same uid is served");
            }
            assertEquals("agent", rootPing());
        }
    }

    /**
     * Trust IV, row 5: connections refused at admission made no request, and the agent's "done"
     * count was requests minus refusals: on a fresh agent 10 such refusals made it negative, and
     * every scrape of {@code /metrics} got an empty reply with nothing logged. Now each outcome is
     * counted as it happens: the scrape answers, "done" counts the PINGs served, and the refusals
     * are counted once under their reason.
     */
    @Test
    void connectionsRefusedOnAFreshAgentLeaveEveryScrapeAnswered() throws Exception {
        int limit = ControlServer.Limits.DEFAULT.connectionsPerProcess();
        Path cg = TestKernel.newCgroup("fresh");
        Path dir = Path.of("/sys/fs/bpf").resolve(TestKernel.uniqueName("fresh"));
        try (NodeAgent fresh = NodeAgent.start(new NodeAgent.Options(dir, List.of(cg), policy, 1024, false));
             AgentHttp http = AgentHttp.start(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), fresh,
                     () -> true);
             ChildJvm c = client(SockmapAdmin.of(dir).agentSocket(), USER + 14, limit + 10)) {
            assertEquals(Integer.toString(limit + 10), c.expect("connected=", 30));
            for (int k = 0; k < limit + 10; k++) {
                String a = send(c, k, "PING");
                assertEquals(k < limit, a.equals("OK agent"), "connection " + k + ": " + a);
            }
            assertTrue(send(c, 0, "DENY " + (port + 1) + " * 0").startsWith("ERR no rule"), "a refused request");
            HttpResponse<String> scrape;
            try (HttpClient h = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build()) {
                scrape = h.send(HttpRequest.newBuilder(URI.create("http://" + http.address().getHostString() + ":"
                        + http.address().getPort() + "/metrics")).timeout(Duration.ofSeconds(10)).build(),
                        HttpResponse.BodyHandlers.ofString());
            }
            assertEquals(200, scrape.statusCode(), scrape.body());
            assertEquals(limit, metric(scrape.body(), "sockmap4j_agent_requests_total{outcome=\"done\"}"), "PINGs served");
            assertEquals(1, metric(scrape.body(), "sockmap4j_agent_requests_total{outcome=\"refused\"}"));
            assertEquals(10, metric(scrape.body(), "sockmap4j_agent_refusals_total{reason=\"connection\"}"));
            assertEquals(1, metric(scrape.body(), "sockmap4j_agent_refusals_total{reason=\"book\"}"));
        } finally {
            SockmapAdmin.of(dir).removePins();
            Files.deleteIfExists(cg);
        }
    }

    /** A scrape that fails all the same (a meter gone wrong) is answered with why, not an empty reply. */
    @Test
    void aScrapeThatFailsIsAnsweredWithWhy() throws Exception {
        try (AgentHttp http = AgentHttp.start(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), agent,
                () -> true)) {
            io.micrometer.core.instrument.FunctionCounter.builder("test.broken", http, h -> -1)
                    .register(http.registry());
            HttpResponse<String> scrape;
            try (HttpClient h = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build()) {
                scrape = h.send(HttpRequest.newBuilder(URI.create("http://" + http.address().getHostString() + ":"
                        + http.address().getPort() + "/metrics")).timeout(Duration.ofSeconds(10)).build(),
                        HttpResponse.BodyHandlers.ofString());
            }
            assertEquals(500, scrape.statusCode(), scrape.body());
            assertTrue(scrape.body().startsWith("the metrics could not be written: "), scrape.body());
        }
    }

    /** A sample's value in a Prometheus text scrape; fails when the sample is missing. */
    static double metric(String scrape, String sample) {
        return scrape.lines().filter(l -> l.startsWith(sample + " ")).findFirst()
                .map(l -> Double.parseDouble(l.substring(sample.length() + 1).strip()))
                .orElseThrow(() -> new AssertionError(sample + " not in the scrape:\n" + scrape));
    }

    /**
     * More processes of one uid than the old per-uid limit of 16 (pods sharing a runAsUser), each
     * holding its connection as a library's opt-in does: every one is served.
     */
    @Test
    void manyProcessesOfOneUidEachHoldAConnection() throws Exception {
        int uid = USER + 13;
        List<ChildJvm> clients = new ArrayList<>();
        try {
            for (int i = 0; i < 24; i++) {
                ChildJvm c = client(uid, 0, 1, false);
                clients.add(c);
                c.expect("connected=", 30);
                assertEquals("OK agent", send(c, 0, "PING"), "process " + i + " of uid " + uid);
            }
        } finally {
            for (ChildJvm c : clients) {
                c.close();
            }
        }
    }

    /**
     * Before, 16 uids with 16 connections each filled the 256 connections all users but root
     * shared, and locked every other user out. Now 17 uids hold 16 each (two processes of 8) and an
     * 18th uid is still served.
     */
    @Test
    void seventeenUidsOfSixteenConnectionsLockNobodyOut() throws Exception {
        List<ChildJvm> clients = new ArrayList<>();
        try {
            for (int u = 0; u < 17; u++) {
                for (int half = 0; half < 2; half++) {
                    ChildJvm c = client(USER + 100 + u, 0, 8, false);
                    clients.add(c);
                    assertEquals("8", c.expect("connected=", 30));
                    for (int k = 0; k < 8; k++) {
                        assertEquals("OK agent", send(c, k, "PING"), "uid " + (USER + 100 + u) + ", connection " + k);
                    }
                }
            }
            try (ChildJvm late = client(USER + 200, 0, 1, false)) {
                late.expect("connected=", 30);
                assertEquals("OK agent", send(late, 0, "PING"), "another user is still served");
            }
        } finally {
            for (ChildJvm c : clients) {
                c.close();
            }
        }
    }

    /**
     * Trust V, row 5: eight users, each with 16 processes of 8 connections (all a share may hold),
     * take what they can; a user holding nothing is still served, up to a process's 8, and so is a
     * ninth user's first 8, while none of the eight gets past its share.
     */
    @Test
    void eightUsersHoldingAllTheyMayLockNobodyOut() throws Exception {
        List<ChildJvm> clients = new ArrayList<>();
        try {
            int held = 0;
            for (int u = 0; u < 8; u++) {
                int mine = 0;
                for (int p = 0; p < 16; p++) {
                    ChildJvm c = client(USER + 300 + u, 0, 8, false);
                    clients.add(c);
                    assertEquals("8", c.expect("connected=", 30));
                    for (int k = 0; k < 8; k++) {
                        mine += send(c, k, "PING").startsWith("OK") ? 1 : 0;
                    }
                }
                assertTrue(mine <= 128, "uid " + (USER + 300 + u) + " holds at most its share: " + mine);
                held += mine;
            }
            assertTrue(held >= 7 * 128, "the eight took what they may: " + held);
            for (int victim : List.of(USER + 400, USER + 401)) {
                try (ChildJvm late = client(victim, 0, 8, false)) {
                    assertEquals("8", late.expect("connected=", 30), "a user holding nothing is served: " + late.output());
                    for (int k = 0; k < 8; k++) {
                        assertEquals("OK agent", send(late, k, "PING"), "uid " + victim + ", connection " + k);
                    }
                }
            }
        } finally {
            for (ChildJvm c : clients) {
                c.close();
            }
        }
    }

    /**
     * Trust III, row 5, the keep-alive: a connection that holds no rule and sends a PING every few
     * seconds (the report's every 20 s, under the 30 s idle time) is closed all the same once the
     * idle time has passed since it last got anything done: queries hold no slot, and (Trust IV,
     * row 4) neither do refused requests.
     */
    @Test
    void pingsDoNotKeepAnIdleConnection() throws Exception {
        ControlServer.Limits l = ControlServer.Limits.DEFAULT;
        try (ChildJvm c = client(USER, 0, 1, false)) {
            c.expect("connected=", 30);
            long start = System.nanoTime();
            String answer = "";
            // A PING, a refused DENY (Trust IV, row 4: it kept the connection before) and a LIST in
            // turn every 5 s, until the agent answers one with the idle close or twice the idle
            // time has passed.
            for (int i = 0; System.nanoTime() - start < TimeUnit.SECONDS.toNanos(2L * l.idleSeconds()); i++) {
                answer = send(c, 0, switch (i % 3) {
                    case 0 -> "PING";
                    case 1 -> "DENY " + (port + 1) + " * 0";
                    default -> "LIST";
                });
                if (answer.startsWith(AgentRequest.IDLE_CLOSED) || answer.equals("EOF")) {
                    break;
                }
                assertTrue(i % 3 == 1 ? answer.startsWith("ERR no rule") : answer.startsWith("OK"), answer);
                Thread.sleep(5_000); // the keep-alive's period: what the attack does, not a wait for a condition
            }
            if (!answer.startsWith(AgentRequest.IDLE_CLOSED)) {
                answer = "(still open after " + 2 * l.idleSeconds() + " s: " + answer + ")";
            }
            // The close comes between two requests: the line read after the next one is the idle close.
            long seconds = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - start);
            assertTrue(answer.startsWith(AgentRequest.IDLE_CLOSED), "closed within twice the idle time: " + answer);
            assertTrue(seconds >= l.idleSeconds() - 1, "not before the idle time: " + seconds + " s");
        }
    }

    /**
     * Trust III, row 5, many uids: a user with a range of subordinate uids (a user namespace of
     * its own mapping 8 uids, as newuidmap maps /etc/subuid's) opens from each uid 16 processes
     * of 8 connections, as many as the agent serves users other than root. They are one user's:
     * together they get that user's share (the report's 8 uids took all 1,024), and another user
     * is served.
     */
    @Test
    void theUidsOfOneUsersNamespaceShareThatUsersSlots() throws Exception {
        int base = 300_000 + (int) (ProcessHandle.current().pid() % 1000) * 16;
        ControlServer.Limits l = ControlServer.Limits.DEFAULT;
        List<ChildJvm> clients = new ArrayList<>();
        try (ChildJvm holder = userNamespace(base)) {
            long pid = holder.pid();
            int connected = 0;
            int refused = 0;
            String refusal = null;
            try {
                outer:
                for (int u = 0; u < 8; u++) {
                    for (int p = 0; p < l.connections() / 8 / l.connectionsPerProcess(); p++) {
                        ChildJvm c = ChildJvm.start(List.of("nsenter", "--user=/proc/" + pid + "/ns/user",
                                "--setuid=" + u, "--setgid=" + u, bin.resolve("agent_client").toString(),
                                SockmapAdmin.of(pins).agentSocket().toString(), Integer.toString(l.connectionsPerProcess())));
                        clients.add(c);
                        c.expect("connected=", 30);
                        for (int k = 0; k < l.connectionsPerProcess(); k++) {
                            String a = send(c, k, "PING");
                            if (a.startsWith("OK")) {
                                connected++;
                            } else {
                                refused++;
                                refusal = a;
                            }
                        }
                        if (refused > 2 * l.connectionsPerProcess()) {
                            break outer; // refused well past the share: the point is made
                        }
                    }
                }
                System.out.printf("8 uids of one user's namespace: %d connections served, %d refused: %s%n", connected,
                        refused, refusal);
                assertTrue(connected <= l.connectionsPerUid(), "one user's share at most: " + connected);
                assertTrue(refusal != null && refusal.contains("in a user namespace of uid " + USER), refusal);
                try (ChildJvm other = client(USER + 300, 0, 1, false)) {
                    other.expect("connected=", 30);
                    assertEquals("OK agent", send(other, 0, "PING"), "another user is served");
                }
            } finally {
                for (ChildJvm c : clients) {
                    c.close();
                }
                holder.closeInput();
            }
        }
    }

    /**
     * Trust IV, row 4, the hand-off: processes of the uids of one user's namespace connect and exit
     * at once, a child holding their connections (agent_client vanish). The agent looked at
     * /proc/PID after the process had gone, could not see its user namespace, and counted the
     * connection as its uid's: the user held 457 connections, 3.6 times its share. Now a connection
     * whose process has gone before it is admitted is refused with why; whatever the race, the
     * user holds its share at most, and another user is served.
     */
    @Test
    void connectionsOfProcessesThatExitAtOnceTakeNoShareOfTheirOwn() throws Exception {
        int base = 400_000 + (int) (ProcessHandle.current().pid() % 1000) * 16;
        ControlServer.Limits l = ControlServer.Limits.DEFAULT;
        int per = l.connectionsPerProcess();
        List<ChildJvm> clients = new ArrayList<>();
        try (ChildJvm holder = userNamespace(base)) {
            long pid = holder.pid();
            int served = 0;
            int gone = 0;
            String refusal = null;
            try {
                for (int u = 0; u < 8; u++) {
                    for (int p = 0; p < 2 * l.connectionsPerUid() / 8 / per; p++) {
                        // The JDK stops reading a process's output when it exits: cat carries the child's.
                        List<String> cmd = new ArrayList<>(List.of("sh", "-c", "\"$@\" | cat", "sh", "nsenter",
                                "--user=/proc/" + pid + "/ns/user", "--setuid=" + u, "--setgid=" + u,
                                bin.resolve("agent_client").toString(), SockmapAdmin.of(pins).agentSocket().toString(),
                                Integer.toString(per), "vanish"));
                        for (int k = 0; k < per; k++) {
                            cmd.add("send " + k + " PING");
                        }
                        cmd.add("wait 0"); // holds the connections until the agent closes the first
                        ChildJvm c = ChildJvm.start(cmd);
                        clients.add(c);
                        c.expect("connected=", 30);
                        for (int k = 0; k < per; k++) {
                            String a = c.expect("answer=", 30);
                            if (a.equals(k + " OK agent")) {
                                served++;
                            } else if (a.contains("exited before the agent could see whose it is")) {
                                gone++;
                            } else {
                                refusal = a;
                            }
                        }
                    }
                }
                System.out.printf("8 uids of one user's namespace, connecting and exiting at once: %d connections "
                        + "served, %d refused as their process had gone, other refusals: %s%n", served, gone, refusal);
                assertTrue(served <= l.connectionsPerUid(), "one user's share at most: " + served);
                try (ChildJvm other = client(USER + 301, 0, 1, false)) {
                    other.expect("connected=", 30);
                    assertEquals("OK agent", send(other, 0, "PING"), "another user is served");
                }
            } finally {
                for (ChildJvm c : clients) {
                    // Its child ends when the agent closes the connection it waits on (the idle
                    // time), or at once where that one was refused.
                    try {
                        c.expect("answer=0 ", l.idleSeconds() + 60L);
                    } catch (AssertionError | RuntimeException notThere) {
                        // A test that failed before its waits: the children end at the idle close.
                    }
                    c.close();
                }
                holder.closeInput();
            }
        }
    }

    /**
     * Connections that cost a user nothing to keep are closed: one that leaves half a line for the
     * line time, one that sends nothing and holds no rule for the idle time. One that holds an
     * OPTIN rule stays, idle or not, and a line over the limit is refused even when its newline
     * comes in the same read.
     */
    @Test
    void halfLinesAndIdleConnectionsAreClosedHoldersStay() throws Exception {
        ControlServer.Limits l = ControlServer.Limits.DEFAULT;
        try (ChildJvm c = client(USER, 0, 4, false)) {
            c.expect("connected=", 30);
            assertTrue(send(c, 2, "OPTIN " + (port + 5) + " * 0 0").startsWith("OK"));
            String over = send(c, 3, "PING " + "x".repeat(AgentRequest.MAX_LINE));
            assertTrue(over.startsWith("ERR a line over " + AgentRequest.MAX_LINE + " bytes"), over);
            c.send("long 0 3");
            String half = c.expect("answer=0 ", l.lineSeconds() + 30L);
            assertTrue(half.startsWith("ERR half a line for " + l.lineSeconds() + " s"), half);
            c.send("wait 1");
            String idle = c.expect("answer=1 ", l.idleSeconds() + 30L);
            assertTrue(idle.startsWith(AgentRequest.IDLE_CLOSED + " no request that changed anything for "
                    + l.idleSeconds() + " s"), idle);
            assertEquals("OK agent", send(c, 2, "PING"), "the connection holding a rule stays");
            assertTrue(send(c, 2, "DENY " + (port + 5) + " * 0").startsWith("OK"));
        }
    }

    @Test
    void aFloodOfRequestsIsAnsweredWithTheRateLimit() throws Exception {
        try (ChildJvm c = client(USER + 11, 0, 1, false)) {
            c.expect("connected=", 30);
            c.send("flood 0 5000");
            String[] counts = c.expect("flood=", 60).split(" ");
            int ok = Integer.parseInt(counts[0]);
            int err = Integer.parseInt(counts[1]);
            assertEquals(5000, ok + err, "every request answered");
            assertTrue(ok >= ControlServer.Limits.DEFAULT.burst() / 2 && err > 0, "ok " + ok + ", refused " + err);
            assertEquals("agent", rootPing());
        }
    }

    @Test
    void aLineWithoutAnEndGetsItsReasonAndTheConnectionCloses() throws Exception {
        try (ChildJvm c = client(USER + 12, 0, 1, false)) {
            c.expect("connected=", 30);
            c.send("long 0 100000");
            String a = c.expect("answer=0 ", 30);
            assertTrue(a.startsWith("ERR a line over " + AgentRequest.MAX_LINE + " bytes"), a);
            assertEquals("EOF", send(c, 0, "PING"));
        }
    }

    @Test
    void aUserHoldsAtMostItsQuotaOfRules() throws Exception {
        try (ChildJvm c = client(USER, 0, 1, false)) {
            c.expect("connected=", 30);
            for (int i = 0; i < 3; i++) {
                String a = send(c, 0, "ALLOW " + (port + i) + " * 0 0");
                assertTrue(a.startsWith("OK allowed"), a);
            }
            String a = send(c, 0, "ALLOW " + (port + 3) + " * 0 0");
            assertTrue(a.startsWith("ERR uid " + USER + " holds 3 rules, its quota"), a);
            assertTrue(send(c, 0, "ALLOW " + port + " * 0 0").startsWith("OK"), "a rule it holds counts once");
            for (int i = 0; i < 3; i++) {
                assertTrue(send(c, 0, "DENY " + (port + i) + " * 0").startsWith("OK denied"));
            }
        }
        try (AgentClient root = AgentClient.connectIfRunning(SockmapAdmin.of(pins).agentSocket())) {
            for (int i = 0; i < 5; i++) {
                root.call(new AgentRequest(AgentRequest.Verb.ALLOW, PolicyRule.anyAddress(port + i), 0));
            }
            for (int i = 0; i < 5; i++) {
                root.call(new AgentRequest(AgentRequest.Verb.DENY, PolicyRule.anyAddress(port + i), 0));
            }
        }
    }

    @Test
    void theGroupsOfAConnectionAreThoseItWasMadeWith() throws Exception {
        // The process that connected (with the granted group) exits; its child serves the
        // connection. Reading groups from /proc/PID afterwards would find nothing, or whoever
        // has that pid now.
        int a = port + 9;
        try (ChildJvm c = client(USER + 1, GROUP, 1, true, "send 0 ALLOW " + a + " * 0 0", "send 0 DENY " + a + " * 0",
                "send 0 ALLOW " + (a - 1) + " * 0 0")) {
            c.expect("connected=", 30);
            String allow = c.expect("answer=0 ", 30);
            assertTrue(allow.startsWith("OK allowed " + a), allow);
            assertTrue(c.expect("answer=0 ", 30).startsWith("OK denied"));
            String other = c.expect("answer=0 ", 30);
            assertTrue(other.startsWith("ERR uid " + (USER + 1) + " may not opt in port " + (a - 1)),
                    "the group's grant, and no more: " + other);
        }
    }

    @Test
    void aSecondAgentOfTheDirectoryIsRefusedBeforeItTouchesThePins() throws Exception {
        List<String> before;
        try (var files = Files.list(pins)) {
            before = files.map(p -> p.getFileName().toString()).sorted().toList();
        }
        IOException e = assertThrows(IOException.class,
                () -> NodeAgent.start(new NodeAgent.Options(pins, List.of(cgroup), policy, 1024, false)).close());
        assertTrue(e.getMessage().contains("another sockmap4j agent serves " + pins), e.getMessage());
        try (var files = Files.list(pins)) {
            assertEquals(before, files.map(p -> p.getFileName().toString()).sorted().toList(), "the pins as they were");
        }
        assertTrue(agent.isReady(), "the running agent serves on");
    }

    @Test
    void everyRuleIsListedHoweverManyThereAre() throws Exception {
        int n = 5000;
        List<Rule> many = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            byte[] a = {10, (byte) (i >> 8), (byte) i, 1};
            many.add(new Rule(9000, InetAddress.getByAddress(a), 32, 0));
        }
        agent.hold(Owner.named("test-many"), many);
        try {
            List<String> listed;
            try (PolicyClient client = PolicyClient.open(pins)) {
                listed = client.rules();
            }
            assertEquals(n, listed.stream().filter(r -> r.contains("test-many")).count(), "rules listed");
        } finally {
            agent.hold(Owner.named("test-many"), List.of());
        }
        assertEquals(0, agent.rules());
    }

    @Test
    void anAgentOutOfFileDescriptorsIsNotReadyThenServesAgain() throws Exception {
        Path cg = TestKernel.newCgroup("control-fds");
        Path dir = Path.of("/sys/fs/bpf").resolve(TestKernel.uniqueName("control-fds"));
        try (ChildJvm a = ChildJvm.start(ChildJvm.javaCommand(AgentProcess.class, dir.toString(),
                cg.toString(), "-"))) {
            int fds = Integer.parseInt(a.expect("fds=", 60));
            assertEquals("true", a.expect("ready=", 30));
            int limit = fds + 24;
            Process p = new ProcessBuilder("prlimit", "--pid", Long.toString(a.pid()), "--nofile=" + limit + ":" + limit)
                    .inheritIO().start();
            assertEquals(0, p.waitFor());
            // Root's connections are not limited by count: more than the agent has descriptors for.
            try (ChildJvm c = ChildJvm.start(List.of(bin.resolve("agent_client").toString(),
                    SockmapAdmin.of(dir).agentSocket().toString(), "48"))) {
                assertEquals("48", c.expect("connected=", 30));
                assertEquals("false", a.expect("ready=", 30), "not ready while accept fails");
            }
            assertEquals("true", a.expect("ready=", 30), "ready again once descriptors are free");
            try (AgentClient root = AgentClient.connectIfRunning(SockmapAdmin.of(dir).agentSocket())) {
                assertEquals("agent", root.call(AgentRequest.ping()));
            }
            a.send("quit");
            assertEquals(0, a.waitFor(30));
        } finally {
            SockmapAdmin.of(dir).removePins();
            Files.deleteIfExists(cg);
        }
    }
}
