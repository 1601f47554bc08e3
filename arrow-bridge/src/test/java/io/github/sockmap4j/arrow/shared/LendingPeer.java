package io.github.sockmap4j.arrow.shared;

import io.github.sockmap4j.arrow.ArrowBridge;
import io.github.sockmap4j.arrow.Embeddings;
import io.github.sockmap4j.testbed.ChildJvm;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;

/**
 * One end of {@link LendingAcrossPodsTest}'s connections, in a process of its own, printing what
 * its agreement gave it ({@code LENT} or {@code FALLBACK REASON words}) and then how many rows
 * came or went, lent or streamed ({@code ROWS n}). {@code receiver-at HOST} listens and prints
 * {@code PORT p} first; {@code sender HOST PORT} connects.
 */
public final class LendingPeer {
    static final int ROWS = 100;

    private LendingPeer() {
    }

    public static void main(String[] args) throws Exception {
        Duration timeout = Duration.ofSeconds(10);
        try (BufferAllocator allocator = new RootAllocator()) {
            if (args[0].equals("receiver-at")) {
                try (ServerSocketChannel server = ServerSocketChannel.open()
                        .bind(new InetSocketAddress(InetAddress.getByName(args[1]), 0))) {
                    System.out.println("PORT " + ((InetSocketAddress) server.getLocalAddress()).getPort());
                    try (SocketChannel c = server.accept()) {
                        Lending.Agreed<BatchReceiver> a = Lending.accept(c, 64L << 20, timeout);
                        System.out.println(a.lent() ? "LENT" : "FALLBACK " + a.reason() + " " + a.why());
                        if (a.lent()) {
                            try (BatchReceiver r = a.end(); VectorSchemaRoot got = r.receive(allocator, timeout)) {
                                System.out.println("ROWS " + got.getRowCount());
                            }
                        } else {
                            try (ArrowStreamReader r = ArrowBridge.reader(c, allocator)) {
                                System.out.println("ROWS " + (r.loadNextBatch() ? r.getVectorSchemaRoot().getRowCount() : -1));
                            }
                        }
                    }
                }
            } else {
                try (SocketChannel c = SocketChannel.open(new InetSocketAddress(args[1], Integer.parseInt(args[2])))) {
                    Lending.Agreed<BatchSender> a = Lending.offer(c, 8L << 20, timeout);
                    System.out.println(a.lent() ? "LENT" : "FALLBACK " + a.reason() + " " + a.why());
                    if (a.lent()) {
                        try (BatchSender s = a.end(); VectorSchemaRoot root = Embeddings.random(s.allocator(), ROWS, 8, 1, true)) {
                            s.send(root);
                            System.out.println("ROWS " + root.getRowCount());
                            c.read(java.nio.ByteBuffer.allocate(1)); // until the receiver is done
                        }
                    } else {
                        try (VectorSchemaRoot root = Embeddings.random(allocator, ROWS, 8, 1, true);
                             ArrowStreamWriter w = ArrowBridge.writer(root, c)) {
                            w.start();
                            w.writeBatch();
                            w.end();
                            System.out.println("ROWS " + root.getRowCount());
                        }
                    }
                }
            }
        } catch (Exception e) {
            System.out.println("FAILED " + ChildJvm.causes(e));
            System.exit(1);
        }
    }
}
