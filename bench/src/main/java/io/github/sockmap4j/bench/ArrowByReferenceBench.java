package io.github.sockmap4j.bench;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapChannel;
import io.github.sockmap4j.SockmapServerChannel;
import io.github.sockmap4j.arrow.ArrowBridge;
import io.github.sockmap4j.arrow.Embeddings;
import io.github.sockmap4j.arrow.shared.BatchReceiver;
import io.github.sockmap4j.arrow.shared.BatchSender;
import io.github.sockmap4j.colocated.SharedRegion;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.complex.FixedSizeListVector;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;

/**
 * One 64 MiB Arrow batch (10,922 rows of an int32 id and 1,536 float32) from one thread to
 * another of one JVM, the kinds in alternating turns: the Arrow bridge on a fast-path connection
 * (SockmapChannel, the in-flight bound lifted: the socket at its fastest) and on java.nio TCP
 * loopback; the batch's 64 MiB of floats alone through a fast-path connection into a buffer the
 * receiver already has (the floor of any transfer that copies through a socket: no Arrow, no
 * memory new to the receiver); and the batch lent by reference through a shared region ({@link
 * BatchSender} / {@link BatchReceiver}). Each round times the batch from the send's start to the
 * receiver holding it ("handed over"), and to the receiver having summed every float ("read
 * whole", one loop for all). Prints medians, ratios to the bridge, and what receiving cost the
 * receiver in memory: its mapping's resident pages (by reference) and its allocator's buffers.
 *
 * <p>Usage: {@code ArrowByReferenceBench [rounds]} (default 7).
 */
public final class ArrowByReferenceBench {
    private ArrowByReferenceBench() {
    }

    static final int DIM = 1536;
    static final int ROWS = 10_922;
    private static final long RINGS = 64 * 1024;
    private static final long HEAP = 256L << 20;
    private static final int WARM_BATCHES = 5000;

    /** When the receiver held the batch, and when it had read it whole (System.nanoTime). */
    private record Received(long held, long read, double sum) {
    }

    static double sum(VectorSchemaRoot root) {
        FixedSizeListVector emb = (FixedSizeListVector) root.getVector("embedding");
        return sum(emb.getDataVector().getDataBuffer(), (long) root.getRowCount() * DIM);
    }

    static double sum(ArrowBuf data, long n) {
        double s = 0;
        for (long i = 0; i < n; i++) {
            s += data.getFloat(i * 4);
        }
        return s;
    }

    /** Resident bytes of the mapping that holds {@code address} (/proc/self/smaps). */
    static long residentOfMapping(long address) throws IOException {
        List<String> lines = Files.readAllLines(Path.of("/proc/self/smaps"));
        boolean in = false;
        for (String l : lines) {
            int dash = l.indexOf('-');
            if (dash > 0 && l.matches("^[0-9a-f]+-[0-9a-f]+ .*")) {
                long start = Long.parseUnsignedLong(l.substring(0, dash), 16);
                long end = Long.parseUnsignedLong(l.substring(dash + 1, l.indexOf(' ')), 16);
                in = address >= start && address < end;
            } else if (in && l.startsWith("Rss:")) {
                return Long.parseLong(l.replaceAll("[^0-9]", "")) * 1024;
            }
        }
        throw new IOException("no mapping holds 0x" + Long.toHexString(address));
    }

    /** One Arrow stream over a connected pair of channels, its reader opened on the receiving thread. */
    @SuppressWarnings("try") // the channels are closed with the lane, after the stream
    private static final class Lane implements AutoCloseable {
        final String name;
        final ArrowStreamWriter writer;
        final ArrowStreamReader reader;
        private final AutoCloseable[] ends;

        Lane(String name, VectorSchemaRoot root, java.nio.channels.WritableByteChannel w,
             java.nio.channels.ReadableByteChannel r, BufferAllocator allocator, ExecutorService receiving,
             AutoCloseable... ends) throws Exception {
            this.name = name;
            this.ends = ends;
            this.writer = ArrowBridge.writer(root, w);
            writer.start();
            this.reader = receiving.submit(() -> {
                ArrowStreamReader opened = ArrowBridge.reader(r, allocator);
                opened.getVectorSchemaRoot();
                return opened;
            }).get(30, TimeUnit.SECONDS);
        }

        Received next(ExecutorService receiving, long[] t0) throws Exception {
            Future<Received> f = receiving.submit(() -> {
                if (!reader.loadNextBatch()) {
                    throw new IllegalStateException("the stream ended");
                }
                long held = System.nanoTime();
                double s = sum(reader.getVectorSchemaRoot());
                return new Received(held, System.nanoTime(), s);
            });
            t0[0] = System.nanoTime();
            writer.writeBatch();
            return f.get(60, TimeUnit.SECONDS);
        }

        @Override
        public void close() throws Exception {
            writer.end(); // before the reader closes its end
            reader.close();
            writer.close();
            for (AutoCloseable e : ends) {
                e.close();
            }
        }
    }

    @SuppressWarnings("try") // the lifted bound is held for the run, not used by name
    public static void main(String[] args) throws Exception {
        BenchRun run = BenchRun.of("ArrowByReferenceBench [rounds]", args);
        int rounds = run.intArg(0, 7);
        Sockmap sockmap = Sockmap.global();
        if (!sockmap.isActive()) {
            System.err.println("The fast path is off: " + sockmap.unavailabilityCause());
            return;
        }
        BenchRun.header("One 64 MiB Arrow batch between two threads: the Arrow bridge on the fast path and on TCP vs "
                + "lent by reference");
        ExecutorService receiving = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "arrow-receiver");
            t.setDaemon(true);
            return t;
        });
        SharedRegion mine = SharedRegion.create("sm4j-bench-batches", RINGS, HEAP);
        SharedRegion theirs = SharedRegion.open(mine.descriptorForPeer(), RINGS, HEAP);
        long receiverHeap = theirs.heap().address();
        BenchRun.Rounds<String> figures = new BenchRun.Rounds<>();
        List<String> kinds = List.of("bridge, fast path", "bridge, TCP", "floats, fast path, reused buffer",
                "by reference");
        long mapped = 0;
        long bridgeBuffers = 0;
        try (BatchSender sender = new BatchSender(mine, Duration.ofSeconds(30));
             BatchReceiver receiver = new BatchReceiver(theirs);
             BufferAllocator own = new RootAllocator();
             BufferAllocator readerAllocator = new RootAllocator();
             BufferAllocator byRefAllocator = new RootAllocator();
             VectorSchemaRoot inHeap = Embeddings.random(sender.allocator(), ROWS, DIM, 1, false);
             VectorSchemaRoot plain = Embeddings.random(own, ROWS, DIM, 1, false);
             SockmapServerChannel server = sockmap.openServerChannel();
             java.nio.channels.ServerSocketChannel tcpServer = java.nio.channels.ServerSocketChannel.open()) {
            server.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
            tcpServer.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
            InetSocketAddress bound = (InetSocketAddress) server.getLocalAddress();
            double expected = sum(plain);
            try (io.github.sockmap4j.OptIn lift = StreamBench.liftBound(sockmap, bound)) {
                SockmapChannel w = sockmap.openChannel();
                w.connect(bound);
                SockmapChannel r = (SockmapChannel) server.accept();
                if (!w.isAccelerated()) {
                    throw new IllegalStateException("the bridge's connection is not on the fast path");
                }
                java.nio.channels.SocketChannel tw = java.nio.channels.SocketChannel.open(tcpServer.getLocalAddress());
                java.nio.channels.SocketChannel tr = tcpServer.accept();
                SockmapChannel fw = sockmap.openChannel();
                fw.connect(bound);
                SockmapChannel fr = (SockmapChannel) server.accept();
                ArrowBuf floats = ((FixedSizeListVector) plain.getVector("embedding")).getDataVector().getDataBuffer();
                long floatBytes = (long) ROWS * DIM * 4;
                try (fw; fr; ArrowBuf into = readerAllocator.buffer(floatBytes);
                     Lane fast = new Lane(kinds.get(0), plain, w, r, readerAllocator, receiving, w, r);
                     Lane tcp = new Lane(kinds.get(1), plain, tw, tr, readerAllocator, receiving, tw, tr)) {
                    long[] t0 = new long[1];
                    // the receiving code of a lent batch runs once a round here, a service runs it all day:
                    // small batches first, so that what is timed is compiled code, as it would be there
                    try (VectorSchemaRoot small = Embeddings.random(sender.allocator(), 16, DIM, 2, false)) {
                        for (int i = 0; i < WARM_BATCHES; i++) {
                            Future<Double> f = receiving.submit(() -> {
                                try (VectorSchemaRoot root = receiver.receive(byRefAllocator, Duration.ofSeconds(30))) {
                                    return sum(root);
                                }
                            });
                            sender.send(small);
                            f.get(30, TimeUnit.SECONDS);
                        }
                    }
                    for (int round = -3; round < rounds; round++) {
                        for (int turn = 0; turn < kinds.size(); turn++) {
                            String kind = kinds.get(Math.floorMod(turn + round, kinds.size()));
                            Received got;
                            if (kind.equals("by reference")) {
                                Future<Received> f = receiving.submit(() -> {
                                    try (VectorSchemaRoot root = receiver.receive(byRefAllocator, Duration.ofSeconds(30))) {
                                        long held = System.nanoTime();
                                        double s = sum(root);
                                        return new Received(held, System.nanoTime(), s);
                                    }
                                });
                                t0[0] = System.nanoTime();
                                sender.send(inHeap);
                                got = f.get(60, TimeUnit.SECONDS);
                                mapped = Math.max(mapped, residentOfMapping(receiverHeap));
                            } else if (kind.startsWith("floats")) {
                                into.setZero(0, floatBytes); // touched: the floor of a copy into memory already there
                                Future<Received> f = receiving.submit(() -> {
                                    java.nio.ByteBuffer b = into.nioBuffer(0, (int) floatBytes);
                                    while (b.hasRemaining()) {
                                        if (fr.read(b) < 0) {
                                            throw new IllegalStateException("the connection ended");
                                        }
                                    }
                                    long held = System.nanoTime();
                                    double s = sum(into, (long) ROWS * DIM);
                                    return new Received(held, System.nanoTime(), s);
                                });
                                t0[0] = System.nanoTime();
                                java.nio.ByteBuffer b = floats.nioBuffer(0, (int) floatBytes);
                                while (b.hasRemaining()) {
                                    fw.write(b);
                                }
                                got = f.get(60, TimeUnit.SECONDS);
                            } else {
                                got = (kind.equals(fast.name) ? fast : tcp).next(receiving, t0);
                                bridgeBuffers = Math.max(bridgeBuffers, readerAllocator.getAllocatedMemory());
                            }
                            if (got.sum() != expected) {
                                throw new IllegalStateException("read " + got.sum() + ", sent " + expected);
                            }
                            if (round >= 0) {
                                figures.put(kind, "held", (got.held() - t0[0]) / 1e6);
                                figures.put(kind, "read", (got.read() - t0[0]) / 1e6);
                            }
                        }
                    }
                }
            }
            if (sender.lent() != 0) {
                throw new IllegalStateException(sender.lent() + " batches not given back");
            }
        } finally {
            receiving.shutdownNow();
        }
        double heldBridge = figures.median(kinds.get(0), "held");
        double readBridge = figures.median(kinds.get(0), "read");
        System.out.printf("medians of %d rounds, ms from the send's start; ratios to the bridge on the fast path:%n", rounds);
        BenchRun.Table t = new BenchRun.Table(1, "kind", "handed over", "read whole", "handed over / bridge",
                "read whole / bridge", "bridge / kind, handed over", "rounds (handed over)");
        for (String kind : kinds) {
            double held = figures.median(kind, "held");
            double read = figures.median(kind, "read");
            t.row(kind, String.format(java.util.Locale.ROOT, "%.3f", held), BenchRun.fmt(read),
                    BenchRun.ratio(held, heldBridge), BenchRun.ratio(read, readBridge),
                    String.format(java.util.Locale.ROOT, "%.1f", heldBridge / held), figures.range(kind, "held"));
        }
        t.print();
        System.out.printf("receiver's memory for the batch: by reference, its mapping of the region resident %.1f MiB "
                + "(region heap %d MiB, batch %.1f MiB); the bridge, its allocator's buffers %.1f MiB%n",
                mapped / 1048576.0, HEAP >> 20, (ROWS * (4.0 + 4.0 * DIM)) / 1048576.0, bridgeBuffers / 1048576.0);
    }
}
