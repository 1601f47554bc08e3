package io.github.sockmap4j.bench;

import io.github.sockmap4j.arrow.ArrowBridge;
import io.github.sockmap4j.arrow.Embeddings;
import io.github.sockmap4j.arrow.shared.BatchReceiver;
import io.github.sockmap4j.arrow.shared.BatchSender;
import io.github.sockmap4j.arrow.shared.Lending;
import io.github.sockmap4j.testbed.ChildJvm;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;

/**
 * One 64 MiB Arrow batch (as {@link ArrowByReferenceBench}'s) from this process to a receiving
 * process of its own, a fresh one for each kind: over the Arrow bridge on a TCP connection on
 * loopback, and lent by reference once the two ends agreed on that connection ({@link Lending}).
 * Each round times the batch from the send's start to the receiver holding it (the receiver's
 * clock: both read CLOCK_MONOTONIC), and reads the receiving process's resident memory, anonymous
 * and shared ({@code RssAnon}, {@code RssShmem}), before its first batch and after each: what
 * receiving cost that process. The first two batches of each turn are not counted (cold code).
 *
 * <p>Usage: {@code ArrowAcrossProcessesBench [rounds]} (default 5).
 */
public final class ArrowAcrossProcessesBench {
    private static final long HEAP = 256L << 20;
    private static final int ROWS = ArrowByReferenceBench.ROWS;
    private static final int DIM = ArrowByReferenceBench.DIM;
    private static final Duration TIMEOUT = Duration.ofSeconds(30);

    private ArrowAcrossProcessesBench() {
    }

    /** Discarded first batches: the receiving process's first receives run cold code. */
    private static final int WARM = 2;

    /** This process's resident KiB, anonymous and shared memory ("RssAnon/RssShmem"). */
    static String residentKiB() throws IOException {
        long anon = -1;
        long shmem = -1;
        for (String l : Files.readAllLines(Path.of("/proc/self/status"))) {
            if (l.startsWith("RssAnon:")) {
                anon = Long.parseLong(l.replaceAll("[^0-9]", ""));
            } else if (l.startsWith("RssShmem:")) {
                shmem = Long.parseLong(l.replaceAll("[^0-9]", ""));
            }
        }
        if (anon < 0 || shmem < 0) {
            throw new IOException("no RssAnon or RssShmem in /proc/self/status");
        }
        return anon + "/" + shmem;
    }

    /** The receiving process: {@code receiver lend|bridge PORT ROUNDS}. Prints RSS0, then per round HELD t RSS kib. */
    static void receive(String kind, int port, int rounds) throws Exception {
        try (SocketChannel c = SocketChannel.open(new InetSocketAddress(InetAddress.getLoopbackAddress(), port));
             BufferAllocator allocator = new RootAllocator()) {
            System.out.println("RSS0 " + residentKiB());
            if (kind.equals("lend")) {
                Lending.Agreed<BatchReceiver> a = Lending.accept(c, HEAP, TIMEOUT);
                if (!a.lent()) {
                    throw new IllegalStateException("nothing lent: " + a.reason() + " " + a.why());
                }
                try (BatchReceiver r = a.end()) {
                    for (int i = 0; i < rounds; i++) {
                        try (VectorSchemaRoot got = r.receive(allocator, TIMEOUT)) {
                            long held = System.nanoTime();
                            double s = ArrowByReferenceBench.sum(got);
                            System.out.println("HELD " + held + " RSS " + residentKiB() + " SUM " + s);
                        }
                    }
                    done(c);
                }
            } else {
                try (ArrowStreamReader r = ArrowBridge.reader(c, allocator)) {
                    for (int i = 0; i < rounds; i++) {
                        if (!r.loadNextBatch()) {
                            throw new IllegalStateException("the stream ended");
                        }
                        long held = System.nanoTime();
                        double s = ArrowByReferenceBench.sum(r.getVectorSchemaRoot());
                        System.out.println("HELD " + held + " RSS " + residentKiB() + " SUM " + s);
                    }
                    if (r.loadNextBatch()) {
                        throw new IllegalStateException("more batches than rounds");
                    }
                    done(c);
                }
            }
        }
    }

    /** Tells the sender every batch was read (it may close: the connection is its lifeline here). */
    private static void done(SocketChannel c) throws IOException {
        c.write(ByteBuffer.wrap(new byte[] {1}));
    }

    /** Sends {@code rounds} batches of one kind to a fresh receiving process: per round {held ms, RSS growth MiB}. */
    static double[][] run(String kind, int measured) throws Exception {
        int rounds = measured + WARM;
        double[][] out = new double[rounds][3];
        try (ServerSocketChannel server = ServerSocketChannel.open()
                .bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
             BufferAllocator own = new RootAllocator()) {
            List<String> cmd = new ArrayList<>(ChildJvm.javaCommand(ArrowAcrossProcessesBench.class, "receiver", kind,
                    Integer.toString(((InetSocketAddress) server.getLocalAddress()).getPort()), Integer.toString(rounds)));
            cmd.add(1, "--add-opens=java.base/java.nio=ALL-UNNAMED");
            cmd.add(1, "--sun-misc-unsafe-memory-access=allow");
            cmd.add(1, "-Xmx2g");
            try (ChildJvm child = ChildJvm.start(cmd); SocketChannel c = server.accept()) {
                String rss0 = child.expect("RSS0 ", 60);
                if (kind.equals("lend")) {
                    Lending.Agreed<BatchSender> a = Lending.offer(c, HEAP, TIMEOUT);
                    if (!a.lent()) {
                        throw new IllegalStateException("nothing lent: " + a.reason() + " " + a.why());
                    }
                    try (BatchSender s = a.end();
                         VectorSchemaRoot root = Embeddings.random(s.allocator(), ROWS, DIM, 1, false)) {
                        for (int i = 0; i < rounds; i++) {
                            long t0 = System.nanoTime();
                            s.send(root);
                            out[i] = figures(child, t0, rss0);
                        }
                        c.read(ByteBuffer.allocate(1));
                    }
                } else {
                    try (VectorSchemaRoot root = Embeddings.random(own, ROWS, DIM, 1, false);
                         ArrowStreamWriter w = ArrowBridge.writer(root, c)) {
                        w.start();
                        for (int i = 0; i < rounds; i++) {
                            long t0 = System.nanoTime();
                            w.writeBatch();
                            out[i] = figures(child, t0, rss0);
                        }
                        w.end();
                        c.read(ByteBuffer.allocate(1));
                    }
                }
                if (child.waitFor(30) != 0) {
                    throw new IllegalStateException("the receiver failed: " + child.output());
                }
            }
        }
        return java.util.Arrays.copyOfRange(out, WARM, rounds);
    }

    /** {ms from t0 until held, anonymous and shared resident MiB grown since before the first batch}. */
    private static double[] figures(ChildJvm child, long t0, String rss0) throws InterruptedException {
        String[] f = child.expect("HELD ", 60).split(" ");
        String[] now = f[2].split("/");
        String[] before = rss0.split("/");
        return new double[] {(Long.parseLong(f[0]) - t0) / 1e6,
                (Long.parseLong(now[0]) - Long.parseLong(before[0])) / 1024.0,
                (Long.parseLong(now[1]) - Long.parseLong(before[1])) / 1024.0};
    }

    public static void main(String[] args) throws Exception {
        if (args.length > 0 && args[0].equals("receiver")) {
            receive(args[1], Integer.parseInt(args[2]), Integer.parseInt(args[3]));
            return;
        }
        BenchRun run = BenchRun.of("ArrowAcrossProcessesBench [rounds]", args);
        int rounds = run.intArg(0, 5);
        BenchRun.header("One 64 MiB Arrow batch to another process: the Arrow bridge on TCP loopback vs lent by reference");
        BenchRun.Table t = new BenchRun.Table(1, "kind", "handed over ms (median)", "rounds",
                "receiver's RssAnon growth MiB (max)", "RssShmem growth MiB (max)");
        double bridge = 0;
        for (String kind : List.of("bridge", "lend", "bridge", "lend")) { // two turns each, in alternation
            double[][] r = run(kind, rounds);
            double[] held = new double[rounds];
            double anon = 0;
            double shmem = 0;
            StringBuilder each = new StringBuilder();
            for (int i = 0; i < rounds; i++) {
                held[i] = r[i][0];
                anon = Math.max(anon, r[i][1]);
                shmem = Math.max(shmem, r[i][2]);
                each.append(String.format(Locale.ROOT, "%.2f ", r[i][0]));
            }
            double m = Medians.of(held);
            if (kind.equals("bridge")) {
                bridge = m;
            }
            t.row(kind.equals("lend") ? "lent by reference" : "Arrow bridge, TCP", String.format(Locale.ROOT, "%.3f", m)
                    + (kind.equals("lend") ? String.format(Locale.ROOT, " (bridge / lent %.0f)", bridge / m) : ""),
                    each.toString().trim(), BenchRun.fmt(anon), BenchRun.fmt(shmem));
        }
        t.print();
        System.out.printf(Locale.ROOT, "the batch: %.1f MiB; the region's heap: %d MiB%n",
                (ROWS * (4.0 + 4.0 * DIM)) / 1048576.0, HEAP >> 20);
    }
}
