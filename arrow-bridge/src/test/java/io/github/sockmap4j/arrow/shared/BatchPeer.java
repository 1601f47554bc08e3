package io.github.sockmap4j.arrow.shared;

import io.github.sockmap4j.arrow.Embeddings;
import io.github.sockmap4j.colocated.Handover;
import io.github.sockmap4j.colocated.SharedRegion;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.net.InetAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HexFormat;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.VectorSchemaRoot;

/**
 * The other process of {@link BatchAcrossProcessesTest}: one end of a connection to the test
 * (TCP on loopback, the lifeline, which carries the nonce), the other end of a region handed over
 * with {@link Handover}. {@code receiver PORT NAME SOCKET}: listens at SOCKET, maps the region the
 * test offers, receives one batch and holds it. {@code sender PORT NAME SOCKET}: makes a region
 * named NAME, offers it at SOCKET, lends one batch. Either then waits for the test to kill it.
 */
public final class BatchPeer {
    static final long RINGS = 64 * 1024;
    static final long HEAP = 8L << 20;
    static final int ROWS = 500;
    static final int DIM = 64;

    private BatchPeer() {
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        int port = Integer.parseInt(args[1]);
        String name = args[2];
        Path socket = Path.of(args[3]);
        try (Socket lifeline = new Socket(InetAddress.getLoopbackAddress(), port)) {
            BufferedReader in = new BufferedReader(new InputStreamReader(lifeline.getInputStream(), StandardCharsets.US_ASCII));
            PrintWriter out = new PrintWriter(lifeline.getOutputStream(), true, StandardCharsets.US_ASCII);
            byte[] nonce = HexFormat.of().parseHex(in.readLine());
            if (mode.equals("receiver")) {
                try (Handover.Listener listener = Handover.Listener.listen(socket)) {
                    var expected = listener.expect(nonce, RINGS, HEAP, uid -> true);
                    out.println("ready");
                    listener.acceptOne(Duration.ofSeconds(10));
                    BatchReceiver receiver = new BatchReceiver(expected.get().region());
                    VectorSchemaRoot held = receiver.receive(new RootAllocator(), Duration.ofSeconds(10));
                    out.println("holding " + held.getRowCount());
                }
            } else {
                in.readLine(); // ready
                SharedRegion region = SharedRegion.create(name, RINGS, HEAP);
                Handover.offer(socket, nonce, region, Duration.ofSeconds(10));
                BatchSender sender = new BatchSender(region, Duration.ofSeconds(10));
                VectorSchemaRoot root = Embeddings.random(sender.allocator(), ROWS, DIM, 3, true);
                sender.send(root);
                out.println("lent " + root.getRowCount());
            }
            in.readLine(); // until killed
        }
    }
}
