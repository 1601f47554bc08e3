package io.github.sockmap4j.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.SockmapStats;
import io.github.sockmap4j.admin.SockmapAdmin;
import io.github.sockmap4j.testbed.ChildJvm;
import io.github.sockmap4j.testbed.Netns;
import io.github.sockmap4j.testbed.Sh;
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
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Trust III's and Trust IV's attacks on the node agent at once, for {@code sockmap4j.soakSeconds}
 * (60 in the build, 300 from scripts/agent.sh soak), against an agent with the heap the
 * DaemonSet's memory limit gives it ({@code -Xmx96m}). Trust III:
 * <ul>
 * <li>row 1: a user without a grant holds more HTTP connections than the agent serves, each sent a
 *     byte of a request every second, dialled again whenever cut off;</li>
 * <li>row 2: the same user pipelines {@code GET /metrics} on two connections, reading no answer,
 *     and connects again when cut off;</li>
 * <li>row 5: the same user, from 8 uids of a user namespace of its own, runs 16 processes of 8
 *     control-socket connections per uid with a PING every 20 s (Trust IV, row 4: half of them a
 *     refused DENY instead), dialling again when closed;</li>
 * <li>row 6: the same user holds 600 connections to a port root opted in for every address, from
 *     a network and user namespace of its own, against a map of 1,024.</li>
 * </ul>
 * Trust IV:
 * <ul>
 * <li>row 1: in a network namespace the bystander shares with the attacker and a mesh's proxy
 *     (uid 1337, its NAT rule sending the bystander's connects to its port), the attacker holds a
 *     socket on nearly half the ephemeral ports of the namespace, each translated at a connect to
 *     root's loopback Service that failed before its SYN and then connected to a sink of its own;</li>
 * <li>rows 2 and 3: a pod's cgroup, from a user namespace root made, holds 200 entries in each of
 *     three nested network namespaces and runs 1,000 more namespaces;</li>
 * <li>row 7: another granted user holds the bystander's loopback VIP in a namespace of its own.</li>
 * </ul>
 * Row 6 of Trust IV (a tuple rebuilt in a close window) is not repeated here: its test is
 * SecurityModelTest's. Every second, as the kubelet and a bystander would: the DaemonSet's probes
 * and a scrape of {@code /metrics} over the agent's Unix socket and root's probe on the metrics
 * port, each answered 200 within 1 s; the bystander's meshed call, whose proxy must be told where
 * it was going; the bystander's Service on its loopback VIP put and removed, and its opt-in, each
 * answered within 1 s, and its 20 round trips redirected; the agent's resident memory and
 * descriptors are read, and must be as high at the end as after the first quarter, no higher.
 * Every second, as the kubelet and a bystander would: the DaemonSet's probes over the agent's
 * Unix socket and root's probe on the metrics port, each answered 200 within 1 s; a granted user's
 * opt-in answered within 1 s, and its 20 round trips redirected; the agent's resident memory is
 * read, and must be as high at the end as after the first quarter, no higher. The RSS is read
 * from the end of a warm-up of the same attacks and checks ({@link #WARMUP_SECONDS}), with the
 * heap resident from the start: what it measures is then what the agent holds outside the heap.
 */
@Tag("kernel")
@Timeout(value = 900, unit = TimeUnit.SECONDS)
class AgentSoakTest {
    /**
     * A user with a grant on ports 27351-27352 of 127.0.0.0/8: the bystander. The test's fixed
     * ports are below the kernel's ephemeral range (32768-60999 by default): the attacks' hundreds of
     * connections take ports from that range, and one on a bystander's port made its bind fail
     * (EADDRINUSE) in two runs of ten here.
     */
    static final int BYSTANDER = 65534;
    /** A user with no grant: the attacker. */
    static final int ATTACKER = 65533;
    static final int HELD_PORT = 27353;
    /** Another user granted the bystander's ports, in a namespace of its own (Trust IV, row 7). */
    static final int NEIGHBOUR = 65532;
    /** The mesh proxy's uid (Istio's), which its NAT rule leaves alone. */
    static final int PROXY = 1337;
    /** In the shared namespace: root's loopback Service, its endpoint, the attacker's sink, the bystander's server. */
    static final int VIP_PORT = 27354;
    static final int SINK_PORT = 27356;
    static final int MESHED_PORT = 27357;
    static final int PROXY_PORT = 15001;
    /**
     * The shared namespace's ephemeral ports, and how many of them the attacker holds a socket on
     * (its sink's backlog takes 128): nearly every other meshed call of the bystander's shares its
     * port with one of them.
     */
    static final int EPHEMERAL_FIRST = 40000;
    static final int EPHEMERAL_PORTS = 256;
    static final int SQUATTED = 120;
    /**
     * How long the attacks and checks run before the agent's RSS counts: two of row 5's keep-alive
     * periods (20 s) and then some. With the heap pre-touched, the RSS of a 60 s run without it
     * rose by about 10 MB a step at 20 s and at 40 s and then stayed flat (a 300 s run was flat
     * over its last three quarters): a run's first quarter was a baseline its warm-up did not keep.
     */
    static final int WARMUP_SECONDS = 45;

    @Test
    void trustThreeAndFourTogetherStallNoProbeAndNoBystander() throws Exception {
        int seconds = Integer.getInteger("sockmap4j.soakSeconds", 60);
        Path work = Files.createTempDirectory("sockmap4j-soak", PosixFilePermissions.asFileAttribute(
                PosixFilePermissions.fromString("rwxr-xr-x")));
        Path cgroup = null;
        Path attackers = null;
        Path pod = null;
        String shared = "sm4j-" + ProcessHandle.current().pid() % 100000 + "-soak";
        Path pins = Path.of("/sys/fs/bpf").resolve(TestKernel.uniqueName("soak"));
        ChildJvm agent = null;
        List<ChildJvm> attacks = new ArrayList<>();
        try {
            Path peer = ChildJvm.compilePeer(work.resolve("peer"));
            Path policy = work.resolve("policy");
            Files.writeString(policy, "uid " + BYSTANDER + " 27351,27352 127.0.0.0/8 1048576\n"
                    + "uid " + NEIGHBOUR + " 27351,27352 127.0.0.0/8 1048576\n");
            cgroup = TestKernel.newCgroup("soak");
            attackers = TestKernel.newCgroup("soak-attack");
            List<String> command = ChildJvm.javaCommand(AgentMain.class, "--pin-dir", pins.toString(), "agent",
                    "--cgroup", cgroup.toString(), "--metrics-port", "0", "--policy", policy.toString(),
                    "--max-sockets", "1024");
            // The whole heap resident from the start (-Xms = -Xmx, pre-touched), so that the RSS does
            // not grow with the heap's first use of its pages (163 to 205 MB over 60 s here without).
            command.addAll(1, List.of("-Xmx96m", "-Xms96m", "-XX:+AlwaysPreTouch"));
            agent = ChildJvm.start(command);
            String ready = agent.expect("agent: ready", 60);
            URI http = URI.create(ready.substring(ready.indexOf("http://"), ready.indexOf("/metrics")));
            Path probe = AgentHttp.probeSocket(pins);
            Path control = SockmapAdmin.of(pins).agentSocket();
            AsRoot.allow(pins, Integer.toString(HELD_PORT));

            // Row 1 and row 2.
            ChildJvm dribble = ChildJvm.startInCgroup(attackers, SecurityModelTest.as(ATTACKER, List.of(
                    peer.toString(), "dribble", http.getHost(), Integer.toString(http.getPort()),
                    Integer.toString(AgentHttp.MAX_CONNECTIONS + 16), "1000")));
            attacks.add(dribble);
            assertTrue(Integer.parseInt(dribble.expect("dribbling=", 30)) > 0, dribble.output());
            for (int i = 0; i < 2; i++) {
                ChildJvm pipe = ChildJvm.startInCgroup(attackers, SecurityModelTest.as(ATTACKER, List.of(
                        peer.toString(), "pipeline", http.getHost(), Integer.toString(http.getPort()))));
                attacks.add(pipe);
                pipe.expect("pipelining=", 30);
            }
            // Row 5: a user namespace of the attacker's, its uid map written by root as newuidmap would.
            int base = 310_000 + (int) (ProcessHandle.current().pid() % 1000) * 16;
            ChildJvm holder = ChildJvm.start(SecurityModelTest.as(ATTACKER, List.of("unshare", "--user", "--", "sh",
                    "-c", "echo ns=1; exec cat")));
            attacks.add(holder);
            holder.expect("ns=", 30);
            Files.writeString(Path.of("/proc/" + holder.pid() + "/uid_map"), "0 " + base + " 8\n");
            Files.writeString(Path.of("/proc/" + holder.pid() + "/gid_map"), "0 " + base + " 8\n");
            int kept = 0;
            for (int u = 0; u < 8; u++) {
                ChildJvm keepalive = ChildJvm.startInCgroup(attackers, List.of("nsenter", "--user=/proc/"
                        + holder.pid() + "/ns/user", "--setuid=" + u, "--setgid=" + u, "sh", "-c",
                        "for i in $(seq 8); do '" + peer + "' ctl-keepalive '" + control + "' 8 20000 & '" + peer
                                + "' ctl-keepalive '" + control + "' 8 20000 'DENY 27399 127.0.0.1 128' 'ERR no rule' & done; "
                                + "wait"));
                attacks.add(keepalive);
                for (int p = 0; p < 16; p++) {
                    kept += Integer.parseInt(keepalive.expect("kept=", 30));
                }
            }
            // Row 6.
            ChildJvm hold = ChildJvm.startInCgroup(cgroup, SecurityModelTest.as(ATTACKER, List.of("unshare", "-Urn",
                    "sh", "-c", "ip link set lo up && exec " + peer + " hold 127.0.0.1 " + HELD_PORT + " 600")));
            attacks.add(hold);
            assertEquals("600", hold.expect("held=", 120), hold.output());

            // Trust IV, rows 2 and 3: a pod's cgroup, its namespaces made from a user namespace root made.
            pod = Files.createDirectory(cgroup.resolve("soak-pod"));
            String nestedHold = "ip link set lo up && exec " + peer + " hold 127.0.0.1 " + HELD_PORT + " 200";
            ChildJvm nests = ChildJvm.startInCgroup(pod, List.of("unshare", "-Urn", "sh", "-c", "exec 3<&0; "
                    + "ip link set lo up; for i in 1 2 3; do unshare -Urn sh -c '" + nestedHold + "' <&3 & done; wait"));
            attacks.add(nests);
            for (int i = 0; i < 3; i++) {
                assertEquals("200", nests.expect("held=", 120), nests.output());
            }
            ChildJvm many = ChildJvm.startInCgroup(pod, List.of("unshare", "-Urn", "sh", "-c", "pids=''; "
                    + "trap 'kill $pids 2>/dev/null; exit 1' TERM; for i in $(seq 1000); do unshare -Urn sleep 3600 & "
                    + "pids=\"$pids $!\"; done; echo spawned=1; read x; kill $pids; wait"));
            attacks.add(many);
            many.expect("spawned=", 120);

            // Trust IV, row 1: a namespace shared by the bystander, a mesh's proxy and the attacker.
            Netns.add(shared);
            inShared(shared, List.of("sysctl", "-q", "-w", "net.ipv4.ip_local_port_range=" + EPHEMERAL_FIRST + " "
                    + (EPHEMERAL_FIRST + EPHEMERAL_PORTS - 1)));
            inShared(shared, List.of("iptables", "-w", "-t", "nat", "-A", "OUTPUT", "-p", "tcp", "--dport",
                    Integer.toString(MESHED_PORT), "-m", "owner", "!", "--uid-owner", Integer.toString(PROXY), "-j",
                    "REDIRECT", "--to-ports", Integer.toString(PROXY_PORT)));
            String rootService = sharedCall(shared, 0, peer, control, "SERVICE 127.0.0.2 " + VIP_PORT
                    + " all 127.0.0.1:" + (VIP_PORT + 1) + " -");
            assertTrue(rootService.startsWith("OK"), rootService);
            ChildJvm sink = ChildJvm.startInCgroup(cgroup, shared(shared, ATTACKER, List.of(peer.toString(),
                    "conn-server", "127.0.0.1", Integer.toString(SINK_PORT))));
            attacks.add(sink);
            sink.expect("port=", 30);
            long translated = SockmapAdmin.of(pins).stats().servicesTranslated();
            ChildJvm squat = ChildJvm.startInCgroup(cgroup, shared(shared, ATTACKER, List.of(peer.toString(),
                    "origdst-squat", "127.0.0.2", Integer.toString(VIP_PORT), "127.0.0.1", Integer.toString(SINK_PORT),
                    Integer.toString(SQUATTED))));
            attacks.add(squat);
            assertEquals(Integer.toString(SQUATTED), squat.expect("squat=", 60), squat.output());
            assertEquals(SQUATTED, SockmapAdmin.of(pins).stats().servicesTranslated() - translated,
                    "each of the attacker's sockets was translated at its connect that failed");
            // Trust IV, row 7: another granted user's Service of the bystander's loopback VIP, in its namespace.
            String neighbours = sharedCall(shared, NEIGHBOUR, peer, control, "SERVICE 127.0.0.2 27351 all "
                    + "127.0.0.1:27352 -");
            assertTrue(neighbours.startsWith("OK"), neighbours);
            System.out.printf("soak: %d control connections of the attacker's namespace served at first; %d entries "
                    + "in the map%n", kept, SockmapAdmin.of(pins).stats().socketsInMap());

            long warmup = TimeUnit.SECONDS.toNanos(WARMUP_SECONDS);
            long start = System.nanoTime() + warmup; // the RSS counts from here
            long end = start + TimeUnit.SECONDS.toNanos(seconds);
            List<long[]> rss = new ArrayList<>(); // {nanos since start, kB}
            List<long[]> fds = new ArrayList<>(); // {nanos since start, descriptors}
            long slowestProbe = 0;
            String slowestWhat = "";
            long slowestOptIn = 0;
            long slowestService = 0;
            int meshed = 0;
            int cycles = 0;
            long redirected = 0;
            while (System.nanoTime() - end < 0) {
                long c0 = System.nanoTime();
                for (String path : List.of("/healthz", "/readyz", "/metrics")) {
                    long t = System.nanoTime();
                    int status = probe(probe, path);
                    long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t);
                    if (ms > slowestProbe) {
                        slowestProbe = ms;
                        slowestWhat = path + " at cycle " + cycles;
                    }
                    assertEquals(200, status, "cycle " + cycles + ": the exec probe of " + path);
                    assertTrue(ms < 1000, "cycle " + cycles + ": the exec probe of " + path + " took " + ms + " ms");
                }
                assertEquals(200, rootProbe(http), "cycle " + cycles + ": root's probe on the metrics port");
                int port = 27351 + cycles % 2;
                long t = System.nanoTime();
                String allowed = call(peer, control, "ALLOW " + port + " 127.0.0.1 128 0");
                long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t);
                slowestOptIn = Math.max(slowestOptIn, ms);
                assertTrue(allowed.startsWith("OK"), "cycle " + cycles + ": the bystander's opt-in: " + allowed);
                assertTrue(ms < 1000, "cycle " + cycles + ": the bystander's opt-in took " + ms + " ms");
                for (String line : List.of("SERVICE 127.0.0.2 27351 all 127.0.0.1:27352 -", "UNSERVICE 127.0.0.2 27351")) {
                    t = System.nanoTime();
                    String done = call(peer, control, line);
                    ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t);
                    slowestService = Math.max(slowestService, ms);
                    assertTrue(done.startsWith("OK"), "cycle " + cycles + ": the bystander's '" + line + "': " + done);
                    assertTrue(ms < 1000, "cycle " + cycles + ": the bystander's '" + line + "' took " + ms + " ms");
                }
                try (ChildJvm server = ChildJvm.startInCgroup(cgroup, shared(shared, BYSTANDER, List.of(
                        peer.toString(), "pp-server", "127.0.0.1", Integer.toString(MESHED_PORT))));
                     ChildJvm proxy = ChildJvm.startInCgroup(cgroup, shared(shared, PROXY, List.of(
                             peer.toString(), "mesh-proxy", "0.0.0.0", Integer.toString(PROXY_PORT))))) {
                    server.expect("port=", 30);
                    proxy.expect("port=", 30);
                    try (ChildJvm client = ChildJvm.startInCgroup(cgroup, shared(shared, BYSTANDER, List.of(
                            peer.toString(), "pp-client", "127.0.0.1", Integer.toString(MESHED_PORT), "5", "64")))) {
                        assertEquals("127.0.0.1:" + MESHED_PORT, proxy.expect("origdst=", 30),
                                "cycle " + cycles + ": the proxy learns where the bystander was going");
                        assertEquals("1", client.expect("ok=", 30), client.output());
                    }
                    assertEquals("1", proxy.expect("ok=", 30), proxy.output());
                    assertEquals("1", server.expect("ok=", 30), server.output());
                    meshed++;
                }
                SockmapStats before = SockmapAdmin.of(pins).stats();
                try (ChildJvm server = ChildJvm.startInCgroup(cgroup, SecurityModelTest.as(BYSTANDER, List.of(
                        peer.toString(), "pp-server", "127.0.0.1", Integer.toString(port))))) {
                    server.expect("port=", 30);
                    try (ChildJvm client = ChildJvm.startInCgroup(cgroup, SecurityModelTest.as(BYSTANDER, List.of(
                            peer.toString(), "pp-client", "127.0.0.1", Integer.toString(port), "20", "64")))) {
                        assertEquals("1", client.expect("ok=", 30), client.output());
                    }
                    assertEquals("1", server.expect("ok=", 30), server.output());
                }
                long moved = SockmapAdmin.of(pins).stats().messagesRedirected() - before.messagesRedirected();
                assertTrue(moved >= 40, "cycle " + cycles + ": the bystander's 20 round trips redirected: " + moved);
                redirected += moved;
                String denied = call(peer, control, "DENY " + port + " 127.0.0.1 128");
                assertTrue(denied.startsWith("OK"), "cycle " + cycles + ": " + denied);
                if (System.nanoTime() - start >= 0) {
                    rss.add(new long[] {System.nanoTime() - start, residentKb(agent.pid())});
                    fds.add(new long[] {System.nanoTime() - start, descriptors(agent.pid())});
                }
                cycles++;
                long rest = TimeUnit.SECONDS.toMillis(1) - TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - c0);
                if (rest > 0) {
                    Thread.sleep(rest); // the probes' period, not a wait for a condition
                }
            }
            long quarter = TimeUnit.SECONDS.toNanos(seconds) / 4;
            long early = rss.stream().filter(r -> r[0] <= quarter).mapToLong(r -> r[1]).max().orElseThrow();
            long late = rss.stream().filter(r -> r[0] >= 3 * quarter).mapToLong(r -> r[1]).max().orElseThrow();
            long highest = rss.stream().mapToLong(r -> r[1]).max().orElseThrow();
            long fdsEarly = fds.stream().filter(r -> r[0] <= quarter).mapToLong(r -> r[1]).max().orElseThrow();
            long fdsLate = fds.stream().filter(r -> r[0] >= 3 * quarter).mapToLong(r -> r[1]).max().orElseThrow();
            System.out.printf("soak of %d s after %d s of warm-up: %d cycles; probes and scrapes within %d ms (%s), the "
                    + "bystander's opt-in within %d ms and its Service put and removed within %d ms, %d of its messages "
                    + "redirected, its proxy told its destination in %d of %d meshed calls; agent RSS %d kB after the "
                    + "first quarter, %d kB in the last, %d kB at most; descriptors %d then %d; %d entries in the map%n",
                    seconds, WARMUP_SECONDS, cycles, slowestProbe, slowestWhat, slowestOptIn, slowestService, redirected, meshed,
                    cycles, early, late, highest, fdsEarly, fdsLate, SockmapAdmin.of(pins).stats().socketsInMap());
            assertTrue(late <= early + early / 10, "the agent's RSS flat: " + early + " kB then " + late + " kB");
            assertTrue(fdsLate <= fdsEarly + fdsEarly / 10, "the agent's descriptors flat: " + fdsEarly + " then "
                    + fdsLate);
            assertTrue(agent.isAlive(), agent.output());
        } finally {
            for (ChildJvm a : attacks) {
                a.close();
            }
            for (Path cg : new Path[] {attackers, cgroup}) {
                if (cg != null && Files.exists(cg)) {
                    Files.writeString(cg.resolve("cgroup.kill"), "1");
                }
            }
            try {
                Leftovers.removeAgent(agent, pins);
            } finally {
                try {
                    Netns.deleteAll(List.of(shared));
                } finally {
                    Leftovers.removeCgroups(pod, cgroup, attackers);
                    Leftovers.removeDirectory(work);
                }
            }
        }
    }

    /** The kubelet's exec probe (curl -m 1 over the Unix socket): the status, or -1. */
    static int probe(Path socket, String path) throws IOException {
        return SecurityModelTest.probeOverUnixSocket(socket, path);
    }

    /** Root's probe on the metrics port with the kubelet's 1 s timeout: the status. */
    static int rootProbe(URI http) throws IOException, InterruptedException {
        try (HttpClient c = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(1)).build()) {
            return c.send(HttpRequest.newBuilder(http.resolve("/healthz")).timeout(Duration.ofSeconds(1)).build(),
                    HttpResponse.BodyHandlers.discarding()).statusCode();
        }
    }

    /** One request of the bystander's on the control socket: the answer. */
    static String call(Path peer, Path control, String line) throws Exception {
        try (ChildJvm c = ChildJvm.start(SecurityModelTest.as(BYSTANDER, List.of(peer.toString(), "agent-call",
                control.toString(), line)))) {
            String answer = c.expect("answer=", 30);
            assertEquals(0, c.waitFor(30), c.output());
            return answer;
        }
    }

    /** {@code command} as {@code uid} in the shared namespace {@code ns} (entered as root, then the uid). */
    static List<String> shared(String ns, int uid, List<String> command) {
        List<String> all = new ArrayList<>(List.of("ip", "netns", "exec", ns));
        all.addAll(SecurityModelTest.as(uid, command));
        return all;
    }

    /** Runs {@code command} as root in namespace {@code ns}. */
    static void inShared(String ns, List<String> command) throws IOException, InterruptedException {
        List<String> all = new ArrayList<>(List.of("ip", "netns", "exec", ns));
        all.addAll(command);
        Sh.run(all.toArray(String[]::new));
    }

    /** One request of {@code uid}'s on the control socket from namespace {@code ns}: the answer. */
    static String sharedCall(String ns, int uid, Path peer, Path control, String line) throws Exception {
        try (ChildJvm c = ChildJvm.start(shared(ns, uid, List.of(peer.toString(), "agent-call", control.toString(),
                line)))) {
            String answer = c.expect("answer=", 30);
            assertEquals(0, c.waitFor(30), c.output());
            return answer;
        }
    }

    static long descriptors(long pid) throws IOException {
        try (var fd = Files.list(Path.of("/proc", Long.toString(pid), "fd"))) {
            return fd.count();
        }
    }

    static long residentKb(long pid) throws IOException {
        for (String line : Files.readAllLines(Path.of("/proc", Long.toString(pid), "status"))) {
            if (line.startsWith("VmRSS:")) {
                return Long.parseLong(line.substring(6).trim().split("\\s+")[0]);
            }
        }
        throw new IOException("no VmRSS for pid " + pid);
    }
}
