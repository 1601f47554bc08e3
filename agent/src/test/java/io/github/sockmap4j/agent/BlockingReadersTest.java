package io.github.sockmap4j.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.SockmapStats;
import io.github.sockmap4j.admin.SockmapAdmin;
import io.github.sockmap4j.testbed.BlockingPeers;
import io.github.sockmap4j.testbed.ChildJvm;
import io.github.sockmap4j.testsupport.Leftovers;
import io.github.sockmap4j.testsupport.TestKernel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/**
 * Blocking C readers and writers on the ports of services that do not change, opted in through the
 * agent as an operator opts them in (docs/kernel.md, "A blocking read that returns EAGAIN"): their
 * sockets are registered without their programs asking, and a blocking read goes through the
 * kernel's sockmap receive path. Thousands of connections in each way a plain service uses a
 * connection: none of their reads may fail with EAGAIN, but where the kernel's receive path is woken
 * with nothing queued: the reader's own socket reset by its peer, or shut for writing by another
 * thread (a relay passing a half-close on). Those are counted, and the programs retry them, so that
 * every byte and every end is still checked.
 */
@Tag("kernel")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class BlockingReadersTest {
    static final String LO = "127.0.0.1";
    Path cgroup;
    Path pins;
    Path work;
    Path blocking;
    ChildJvm agent;

    @BeforeAll
    void start() throws Exception {
        work = Files.createTempDirectory("sockmap4j-blocking", PosixFilePermissions.asFileAttribute(
                PosixFilePermissions.fromString("rwxr-xr-x")));
        blocking = ChildJvm.compileBed("blocking.c", work.resolve("blocking"));
        cgroup = TestKernel.newCgroup("blocking");
        pins = Path.of("/sys/fs/bpf").resolve(TestKernel.uniqueName("blocking"));
        agent = ChildJvm.start(ChildJvm.javaCommand(AgentMain.class, "--pin-dir", pins.toString(), "agent",
                "--cgroup", cgroup.toString(), "--metrics-port", "-1"));
        agent.expect("agent: ready", 60);
    }

    @AfterAll
    void stop() throws Exception {
        try {
            Leftovers.removeAgent(agent, pins);
        } finally {
            Leftovers.removeCgroups(cgroup);
            Leftovers.removeDirectory(work);
        }
    }

    /** One run in the agent's cgroup, each port opted in by root through the agent; checks every byte and end. */
    BlockingPeers.Result run(String what, int conns, int rounds, int size, String end, boolean relayed)
            throws Exception {
        SockmapStats before = SockmapAdmin.of(pins).stats();
        BlockingPeers.Result r = BlockingPeers.run(blocking, LO, conns, rounds, size, end, relayed,
                cmd -> ChildJvm.startInCgroup(cgroup, cmd), port -> {
                    AsRoot.allow(pins, Integer.toString(port));
                    return () -> AsRoot.deny(pins, Integer.toString(port));
                });
        SockmapStats after = SockmapAdmin.of(pins).stats();
        long redirected = after.bytesRedirected() - before.bytesRedirected();
        long byTcp = after.bytesPassed() - before.bytesPassed();
        System.out.printf(Locale.ROOT, "blocking readers, %s: %d connections, %d x %d B: EAGAIN %d (%s); %d B "
                + "redirected, %d B by TCP%n", what, conns, rounds, size, r.eagain(), r, redirected, byTcp);
        assertEquals(conns, r.client().conns(), r.toString());
        assertEquals(0, r.client().errors() + r.server().errors() + (r.relay() == null ? 0 : r.relay().errors()),
                "every byte and every end as sent: " + r);
        assertTrue(redirected > 0, "the connections were registered and redirected: " + redirected + " B");
        return r;
    }

    @Test
    void requestsAndRepliesUntilTheClientCloses() throws Exception {
        assertEquals(0, run("request-reply", 2_000, 10, 64, "keep", false).eagain());
    }

    @Test
    void theServerClosesWhileItsClientWaits() throws Exception {
        assertEquals(0, run("the server's close", 2_000, 10, 64, "close", false).eagain());
    }

    /** Replies past the kernel's bound, to a client blocked in its read: the rest comes by TCP meanwhile. */
    @Test
    void repliesPastTheBoundComeByTcpToABlockedReader() throws Exception {
        assertEquals(0, run("past the bound", 100, 4, 512 * 1024, "keep", false).eagain());
    }

    /**
     * The kernel's part (docs/kernel.md): a reset wakes the blocked reader with nothing queued; its
     * read fails with EAGAIN where a plain socket's fails with ECONNRESET (the next read says that).
     */
    @Test
    void theServerResetsWhileItsClientWaits() throws Exception {
        run("the server's reset", 2_000, 10, 64, "reset", false);
    }

    /**
     * The kernel's part: a relay whose thread shuts one side for writing (passing a half-close on)
     * wakes its other thread, blocked reading that side, with nothing queued: that read fails with
     * EAGAIN; retried, it gets the rest and the end.
     */
    @Test
    void aRelayPassingAHalfCloseOn() throws Exception {
        run("a relay's half-close", 2_000, 10, 64, "keep", true);
    }
}
