package io.github.sockmap4j.arrow.shared;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.arrow.Embeddings;
import io.github.sockmap4j.colocated.Handover;
import io.github.sockmap4j.colocated.SharedRegion;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * A batch lent between two processes, the region handed over with {@link Handover} (a nonce sent
 * over a TCP connection on loopback, the lifeline), and the other process killed with SIGKILL
 * while the batch is out: this process learns it from the lifeline, closes its end, and keeps no
 * descriptor or mapping of the region, with a batch it holds readable until it closes it.
 */
class BatchAcrossProcessesTest {
    private final String name = "sm4j-test-peer-" + UUID.randomUUID();
    private final Path socket = Path.of("@" + name);
    private final List<Process> peers = new ArrayList<>();

    @AfterEach
    void killPeers() throws InterruptedException {
        for (Process p : peers) {
            p.destroyForcibly();
            p.waitFor(10, TimeUnit.SECONDS);
        }
    }

    private Process peer(String mode, int port) throws IOException {
        Process p = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED", "--add-opens=java.base/java.nio=ALL-UNNAMED",
                "--sun-misc-unsafe-memory-access=allow", "-cp", System.getProperty("java.class.path"),
                BatchPeer.class.getName(), mode, Integer.toString(port), name, socket.toString())
                .redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
        peers.add(p);
        return p;
    }

    private List<String> regionsOpen() throws IOException {
        return Mapped.regions(name);
    }

    private static byte[] nonce() {
        byte[] n = new byte[32];
        new SecureRandom().nextBytes(n);
        return n;
    }

    /** Reads the lifeline until it ends: what this process does when its connection's other end is gone. */
    private static CompletableFuture<Void> endOf(BufferedReader in) {
        return CompletableFuture.runAsync(() -> {
            try {
                while (in.readLine() != null) {
                    // nothing more is said
                }
            } catch (IOException ended) {
                // reset: ended too
            }
        });
    }

    @Test
    void aReceiverKilledWhileItHoldsABatchLeavesTheSenderNothingOnceItCloses() throws Exception {
        try (ServerSocket server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            Process receiver = peer("receiver", server.getLocalPort());
            try (Socket lifeline = server.accept()) {
                BufferedReader in = new BufferedReader(new InputStreamReader(lifeline.getInputStream(), StandardCharsets.US_ASCII));
                PrintWriter out = new PrintWriter(lifeline.getOutputStream(), true, StandardCharsets.US_ASCII);
                byte[] nonce = nonce();
                out.println(HexFormat.of().formatHex(nonce));
                assertEquals("ready", in.readLine());
                SharedRegion region = SharedRegion.create(name, BatchPeer.RINGS, BatchPeer.HEAP);
                Handover.offer(socket, nonce, region, Duration.ofSeconds(10));
                BatchSender sender = new BatchSender(region, Duration.ofSeconds(1));
                try (VectorSchemaRoot root = Embeddings.random(sender.allocator(), BatchPeer.ROWS, BatchPeer.DIM, 3, true)) {
                    sender.send(root);
                    assertEquals("holding " + BatchPeer.ROWS, in.readLine());
                }
                assertEquals(1, sender.lent());
                CompletableFuture<Void> ended = endOf(in);
                receiver.destroyForcibly();
                ended.get(10, TimeUnit.SECONDS);
                assertEquals(1, sender.lent(), "a killed receiver gave nothing back");
                sender.close();
                assertEquals(List.of(), regionsOpen(), "the sender kept a descriptor or mapping");
                assertTrue(receiver.waitFor(10, TimeUnit.SECONDS));
            }
        }
    }

    @Test
    void aSenderKilledWhileABatchIsOutLeavesItReadableUntilClosedThenNothing() throws Exception {
        try (ServerSocket server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
             BufferAllocator allocator = new RootAllocator();
             Handover.Listener listener = Handover.Listener.listen(socket)) {
            Process sender = peer("sender", server.getLocalPort());
            try (Socket lifeline = server.accept()) {
                BufferedReader in = new BufferedReader(new InputStreamReader(lifeline.getInputStream(), StandardCharsets.US_ASCII));
                PrintWriter out = new PrintWriter(lifeline.getOutputStream(), true, StandardCharsets.US_ASCII);
                byte[] nonce = nonce();
                var expected = listener.expect(nonce, BatchPeer.RINGS, BatchPeer.HEAP, uid -> uid == Handover.ownUid());
                out.println(HexFormat.of().formatHex(nonce));
                out.println("ready");
                assertTrue(listener.acceptOne(Duration.ofSeconds(10)), "the peer's region was taken");
                Handover.Received got = expected.get(10, TimeUnit.SECONDS);
                assertEquals(sender.pid(), got.pid(), "the region came from the peer");
                BatchReceiver receiver = new BatchReceiver(got.region());
                VectorSchemaRoot held = receiver.receive(allocator, Duration.ofSeconds(10));
                assertNotNull(held);
                assertEquals("lent " + BatchPeer.ROWS, in.readLine());
                String before = held.contentToTSVString();
                CompletableFuture<Void> ended = endOf(in);
                sender.destroyForcibly();
                ended.get(10, TimeUnit.SECONDS);
                assertTrue(sender.waitFor(10, TimeUnit.SECONDS));
                receiver.close();
                try (VectorSchemaRoot expectedRoot = Embeddings.random(allocator, BatchPeer.ROWS, BatchPeer.DIM, 3, true)) {
                    assertEquals(expectedRoot.contentToTSVString(), before);
                }
                assertEquals(before, held.contentToTSVString(), "the batch stays readable in this process's mapping");
                assertTrue(regionsOpen().size() > 0, "mapped while the batch is open");
                held.close();
                assertEquals(List.of(), regionsOpen(), "the receiver kept a descriptor or mapping");
            }
        }
    }
}
