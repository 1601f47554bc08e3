package io.github.sockmap4j.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.SockmapStats;
import io.github.sockmap4j.admin.SockmapAdmin;
import io.github.sockmap4j.testbed.Await;
import io.github.sockmap4j.testbed.ChildJvm;
import io.github.sockmap4j.testbed.Sh;
import io.github.sockmap4j.testsupport.Leftovers;
import io.github.sockmap4j.testsupport.TestKernel;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
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
 * Another sockmap user next to sockmap4j, as observability agents are (their own sockops,
 * SOCKHASH and sk_msg program: src/test/bpf/other_sockmap.bpf.c, which registers the sockets of
 * port {@value #OTHER_PORT} and passes every send). The kernel gives a socket one sk_msg program:
 * whichever registers a socket first keeps it. The agent runs on cgroup {@code parent/agent}; the
 * other program on the parent (sockmap4j's program runs first: the other's inserts are refused) or
 * on a cgroup below the agent's (the other's runs first: sockmap4j's are refused). Either way no
 * byte is lost or reordered, and sockmap4j counts and names what it could not register, keeping
 * the fast path for every other socket.
 */
@Tag("kernel")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class AnotherSockmapUserTest {
    // Below the ephemeral range (32768-60999): no connection of another test takes them meanwhile.
    static final int OTHER_PORT = 27361;
    static final int PORT = 27362;
    static final long TOTAL = 16L << 20;

    Path work;
    Path peer;
    Path parent;
    Path cgroup;
    Path inner;
    Path pins;
    /** Where the other program's objects are pinned. */
    Path otherPins;
    ChildJvm agent;

    @BeforeAll
    void start() throws Exception {
        work = Files.createTempDirectory("sockmap4j-other", PosixFilePermissions.asFileAttribute(
                PosixFilePermissions.fromString("rwxr-xr-x")));
        peer = ChildJvm.compilePeer(work.resolve("peer"));
        Path object = work.resolve("other_sockmap.bpf.o");
        Sh.run("../bpf/build.sh", "src/test/bpf/other_sockmap.bpf.c", object.toString(), "-DOTHER_PORT=" + OTHER_PORT);
        parent = TestKernel.newCgroup("other");
        cgroup = Files.createDirectory(parent.resolve("agent"));
        inner = Files.createDirectory(cgroup.resolve("inner"));
        otherPins = Path.of("/sys/fs/bpf").resolve(TestKernel.uniqueName("other"));
        Files.createDirectory(otherPins);
        Sh.run("bpftool", "prog", "loadall", object.toString(), otherPins.toString(), "pinmaps",
                otherPins.resolve("maps").toString());
        Sh.run("bpftool", "prog", "attach", "pinned", otherPins.resolve("other_msg").toString(), "msg_verdict", "pinned",
                otherPins.resolve("maps/other_socks").toString());
        pins = Path.of("/sys/fs/bpf").resolve(TestKernel.uniqueName("other-agent"));
        agent = ChildJvm.start(ChildJvm.javaCommand(AgentMain.class, "--pin-dir", pins.toString(), "agent",
                "--cgroup", cgroup.toString(), "--metrics-port", "-1"));
        agent.expect("agent: ready", 60);
        AsRoot.allow(pins, Integer.toString(OTHER_PORT), Integer.toString(PORT));
    }

    @AfterAll
    void stop() throws Exception {
        try {
            Leftovers.removeAgent(agent, pins);
        } finally {
            for (Path cg : new Path[] {parent, inner}) {
                if (cg != null) {
                    detachOther(cg);
                }
            }
            if (otherPins != null) {
                Sh.run("rm", "-rf", otherPins.toString());
            }
            Leftovers.removeCgroups(inner, cgroup, parent);
            Leftovers.removeDirectory(work);
        }
    }

    void attachOther(Path cg) throws IOException, InterruptedException {
        Sh.run("bpftool", "cgroup", "attach", cg.toString(), "sock_ops", "pinned", otherPins.resolve("other_sockops")
                .toString(), "multi");
    }

    void detachOther(Path cg) throws IOException, InterruptedException {
        if (Files.exists(cg) && Sh.run("bpftool", "cgroup", "show", cg.toString()).contains("other_sockops")) {
            Sh.run("bpftool", "cgroup", "detach", cg.toString(), "sock_ops", "pinned", otherPins.resolve("other_sockops")
                    .toString());
        }
    }

    /** The other program's counter {@code i}: 0 sockets it registered, 1 inserts refused, 2 sends it saw. */
    long otherCount(int i) throws IOException, InterruptedException {
        String out = Sh.run("bpftool", "-j", "map", "lookup", "pinned", otherPins.resolve("maps/other_counts").toString(),
                "key", Integer.toString(i), "0", "0", "0");
        Matcher m = Pattern.compile("\"formatted\":\\{\"key\":" + i + ",\"value\":(\\d+)").matcher(out);
        assertTrue(m.find(), out);
        return Long.parseLong(m.group(1));
    }

    /** A 16 MiB stream of sequence numbers between two peers in {@code cg}, every byte checked in order. */
    void stream(Path cg, int port) throws Exception {
        try (ChildJvm server = ChildJvm.startInCgroup(cg, List.of(peer.toString(), "stream-server", "127.0.0.1",
                Integer.toString(port), Long.toString(TOTAL)))) {
            server.expect("port=", 30);
            try (ChildJvm client = ChildJvm.startInCgroup(cg, List.of(peer.toString(), "stream-client", "127.0.0.1",
                    Integer.toString(port), Long.toString(TOTAL)))) {
                assertEquals("1", server.expect("ok=", 120), "every byte, in order: " + server.output());
                assertEquals("1", client.expect("ok=", 30), client.output());
            }
        }
    }

    /** The other program on the parent: sockmap4j registers first, the other's inserts are refused. */
    @Test
    void onTheParentItsInsertsAreRefusedAndTheFastPathStays() throws Exception {
        attachOther(parent);
        try {
            SockmapStats before = SockmapAdmin.of(pins).stats();
            long refused = otherCount(1);
            stream(cgroup, OTHER_PORT);
            SockmapStats after = SockmapAdmin.of(pins).stats();
            assertEquals(2, otherCount(1) - refused, "the other program's inserts of both sockets were refused");
            assertEquals(0, after.socketsBusy() - before.socketsBusy());
            assertTrue(after.bytesRedirected() > before.bytesRedirected(), "the stream went through the redirect");
            List<String> programs = SockmapAdmin.of(pins).collisions(cgroup).programs();
            assertTrue(programs.stream().anyMatch(p -> p.contains("'other_sockops' on " + cgroup + " or an ancestor")),
                    "named: " + programs);
        } finally {
            detachOther(parent);
        }
    }

    /**
     * The other program below the agent's cgroup: it registers first; sockmap4j's inserts of those
     * sockets are refused, counted and named with the program, and they run on TCP under the other
     * program, every byte in order. Sockets the other program leaves alone stay on the fast path.
     */
    @Test
    void belowItRegistersFirstAndThoseSocketsAloneLeaveTheFastPath() throws Exception {
        attachOther(inner);
        try {
            SockmapStats before = SockmapAdmin.of(pins).stats();
            long sent = otherCount(2);
            stream(inner, OTHER_PORT);
            SockmapStats mid = SockmapAdmin.of(pins).stats();
            // The client is refused as the other's; its server then as one whose client did not register.
            assertEquals(1, mid.socketsBusy() - before.socketsBusy(), "the client was in the other's map: " + mid);
            assertEquals(1, mid.clientsUnregistered() - before.clientsUnregistered(), "its server left out: " + mid);
            assertEquals(before.bytesRedirected(), mid.bytesRedirected(), "none of their bytes went through ours");
            assertTrue(otherCount(2) > sent, "the other program's sk_msg saw their sends");
            SockmapAdmin.Collisions c = SockmapAdmin.of(pins).collisions(cgroup);
            assertTrue(c.sockets().stream().anyMatch(s -> s.contains("-> 127.0.0.1:" + OTHER_PORT + " (socket cookie ")),
                    "the client named: " + c);
            assertTrue(c.programs().stream().anyMatch(p -> p.contains("'other_sockops' on " + inner)), "named: " + c);
            Await.until("the agent says which sockets and which program", () -> agent.output().lines().anyMatch(
                    l -> l.contains("already in another program's sockmap") && l.contains("other_sockops")));
            System.out.println("agent said: " + agent.output().lines()
                    .filter(l -> l.contains("already in another program's sockmap")).findFirst().orElseThrow());

            stream(inner, PORT);
            SockmapStats after = SockmapAdmin.of(pins).stats();
            assertEquals(mid.socketsBusy(), after.socketsBusy());
            assertTrue(after.bytesRedirected() > mid.bytesRedirected(), "another port's stream was redirected");
        } finally {
            detachOther(inner);
        }
    }
}
