package io.github.sockmap4j.netty;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.testbed.Await;
import io.github.sockmap4j.testbed.BlockingPeers;
import io.github.sockmap4j.testbed.ChildJvm;
import io.github.sockmap4j.Fionread;
import io.github.sockmap4j.OptIn;
import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapChannel;
import io.github.sockmap4j.SockmapServerChannel;
import io.github.sockmap4j.SockmapStats;
import java.io.BufferedReader;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * What the kernel matrix (scripts/kernel-matrix.sh) runs on every kernel it boots, next to
 * {@code GrpcFastPathTest#unary}: the fast path is active, {@code available()} of each java.net
 * socket kind says what the start-up probe found FIONREAD to count, and a JVM and a C ping-pong are
 * redirected. It runs on the host's kernel with the rest of the suite too.
 */
@Tag("kernel")
@Timeout(value = 300, unit = TimeUnit.SECONDS)
@SuppressWarnings("try") // opt-ins held for a block's length
class KernelSmokeTest {
    private static final int ROUND_TRIPS = 500;
    private static final int SIZE = 64;
    private static final int BLOCKING_CONNECTIONS = 100;

    @Test
    void theFastPathIsActiveAndTheProbeRan() {
        Sockmap s = Sockmap.global();
        assertTrue(s.isActive(), s::unavailabilityCause);
        assertNotEquals(Fionread.NOT_PROBED, s.fionread(), "the start-up probe must run in this process's cgroup");
        System.out.println("kernel-smoke: kernel " + System.getProperty("os.version") + " active, FIONREAD counts "
                + s.fionread());
    }

    /** What FIONREAD should say with {@code n} redirected bytes queued (and no TCP bytes). */
    private static int fionreadOfRedirected(int n) {
        Fionread f = Sockmap.global().fionread();
        return f == Fionread.ALL_BYTES || f == Fionread.REDIRECTED_BYTES_ONLY ? n : 0;
    }

    @Test
    void availableOfJavaNetSocketsSaysWhatTheProbeFound() throws Exception {
        InetAddress lo = InetAddress.getByName("127.0.0.1");
        byte[] msg = new byte[100];
        for (int i = 0; i < msg.length; i++) {
            msg[i] = (byte) i;
        }
        SockmapStats before = Sockmap.global().stats();
        try (ServerSocket server = new ServerSocket(0, 4, lo);
             OptIn in = Sockmap.global().optIn(server.getLocalPort());
             SocketChannel client = SocketChannel.open(new InetSocketAddress(lo, server.getLocalPort()));
             Socket accepted = server.accept()) {
            // java.net.Socket: one byte read (which waits for the message), the rest queued.
            client.write(ByteBuffer.wrap(msg));
            InputStream sin = accepted.getInputStream();
            assertEquals(0, sin.read());
            assertEquals(fionreadOfRedirected(msg.length - 1), sin.available(), "Socket.getInputStream().available()");
            byte[] rest = sin.readNBytes(msg.length - 1);
            assertEquals(msg[1], rest[0]);
            assertEquals(msg[msg.length - 1], rest[rest.length - 1]);

            // A SocketChannel's stream (Channels.newInputStream), the same way back.
            OutputStream sout = accepted.getOutputStream();
            sout.write(msg);
            sout.flush();
            InputStream cin = Channels.newInputStream(client);
            assertEquals(0, cin.read());
            assertEquals(fionreadOfRedirected(msg.length - 1), cin.available(), "Channels.newInputStream(ch).available()");
            assertEquals(msg.length - 1, cin.readNBytes(msg.length - 1).length);
        }
        long redirected = Sockmap.global().stats().bytesRedirected() - before.bytesRedirected();
        assertTrue(redirected >= 2L * msg.length, "redirected " + redirected + " B");
    }

    @Test
    void aJvmPingPongIsRedirected() throws Exception {
        Sockmap s = Sockmap.global();
        SockmapStats before = s.stats();
        try (SockmapServerChannel server = s.openServerChannel()) {
            server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0));
            try (SockmapChannel client = s.openChannel()) {
                client.connect(server.getLocalAddress());
                try (SockmapChannel side = (SockmapChannel) server.accept()) {
                    assertTrue(client.isAccelerated() && side.isAccelerated(), "both ends accelerated");
                    ByteBuffer out = ByteBuffer.allocate(SIZE);
                    ByteBuffer back = ByteBuffer.allocate(SIZE);
                    for (int i = 0; i < ROUND_TRIPS; i++) {
                        out.clear();
                        while (out.hasRemaining()) {
                            out.put((byte) i);
                        }
                        out.flip();
                        client.write(out);
                        exchange(side, back);
                        back.flip();
                        side.write(back);
                        back.clear();
                        exchange(client, back);
                        assertArrayEquals(out.array(), back.array(), "round trip " + i);
                    }
                }
            }
        }
        report("JVM", s.stats().messagesRedirected() - before.messagesRedirected());
    }

    private static void exchange(SockmapChannel from, ByteBuffer into) throws Exception {
        into.clear();
        while (into.hasRemaining()) {
            if (from.read(into) < 0) {
                throw new AssertionError("closed early");
            }
        }
    }

    @Test
    void aCPingPongIsRedirected(@TempDir Path work) throws Exception {
        Path exe = ChildJvm.compilePeer(work.resolve("peer"));

        Sockmap s = Sockmap.global();
        SockmapStats before = s.stats();
        Process server = new ProcessBuilder(exe.toString(), "pp-server", "127.0.0.1", "0").redirectErrorStream(true)
                .start();
        try {
            BufferedReader sout = new BufferedReader(new InputStreamReader(server.getInputStream(), StandardCharsets.UTF_8));
            String line = sout.readLine();
            assertTrue(line != null && line.startsWith("port="), "server said " + line);
            int port = Integer.parseInt(line.substring(5));
            try (OptIn in = s.optIn(port)) {
                Process client = new ProcessBuilder(exe.toString(), "pp-client", "127.0.0.1", Integer.toString(port),
                        Integer.toString(ROUND_TRIPS), Integer.toString(SIZE)).redirectErrorStream(true).start();
                String out = new String(client.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
                assertTrue(client.waitFor(Await.scaled(120), TimeUnit.SECONDS), "client still running: " + out);
                assertEquals(0, client.exitValue(), out);
                assertTrue(out.contains("ok=1"), out);
            }
            assertTrue(server.waitFor(Await.scaled(60), TimeUnit.SECONDS), "server still running");
        } finally {
            server.destroyForcibly().waitFor();
        }
        report("C", s.stats().messagesRedirected() - before.messagesRedirected());
    }

    /**
     * Blocking C readers on registered sockets (docs/kernel.md, "A blocking read that returns
     * EAGAIN"), as the matrix reports them for each kernel: how many reads failed with EAGAIN where
     * the kernel's receive path was woken with nothing queued (a reset of the reader's socket, its
     * write half shut by a relay's other thread), and in request-reply connections, where none
     * should. The programs retry such reads, so every byte and every end is still checked.
     */
    @Test
    void blockingReadersGetEveryByteAndTheirEnd(@TempDir Path work) throws Exception {
        Path exe = ChildJvm.compileBed("blocking.c", work.resolve("blocking"));
        Sockmap s = Sockmap.global();
        StringBuilder said = new StringBuilder("kernel-smoke: blocking reads failing with EAGAIN:");
        for (String[] run : new String[][] {{"request-reply", "keep", "false"}, {"a reset", "reset", "false"},
                {"a relayed half-close", "keep", "true"}}) {
            SockmapStats before = s.stats();
            BlockingPeers.Result r = BlockingPeers.run(exe, "127.0.0.1", BLOCKING_CONNECTIONS, 4, SIZE, run[1],
                    Boolean.parseBoolean(run[2]), ChildJvm::start, s::optIn);
            assertEquals(BLOCKING_CONNECTIONS, r.client().conns(), r.toString());
            assertEquals(0, r.client().errors() + r.server().errors() + (r.relay() == null ? 0 : r.relay().errors()),
                    run[0] + ": every byte and every end: " + r);
            assertTrue(s.stats().bytesRedirected() > before.bytesRedirected(), run[0] + ": redirected");
            said.append(' ').append(run[0]).append(' ').append(r.eagain()).append(" in ").append(BLOCKING_CONNECTIONS)
                    .append(run[0].equals("a relayed half-close") ? "" : ",");
        }
        System.out.println(said);
    }

    private static void report(String who, long msgs) {
        System.out.println("kernel-smoke: " + who + " ping-pong " + msgs + " of " + 2 * ROUND_TRIPS + " messages redirected");
        assertTrue(msgs >= 2L * ROUND_TRIPS, who + ": redirected " + msgs + " messages of " + 2 * ROUND_TRIPS);
    }
}
