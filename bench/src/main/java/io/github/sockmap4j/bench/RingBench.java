package io.github.sockmap4j.bench;

import io.github.sockmap4j.colocated.MessageRing;
import io.github.sockmap4j.colocated.SharedRegion;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.HdrHistogram.Histogram;

/**
 * Round trips of one message between two threads of one JVM, each the only user of its end, as a
 * co-located call's two ends would move it: over TCP loopback (blocking java.nio, TCP_NODELAY),
 * and over the co-located rings of one shared region (each side sleeping on the futex when it has
 * nothing to read, as the transport's default would; and polling 20 us first, {@code -Dspin.us}). CPU of both ends a round trip (the
 * process's, which is the two threads'), p50 and p99, medians of rounds taken in turns; ratios
 * against TCP. No root: the rings need none, and the loopback here is the plain path.
 *
 * <p>Usage: {@code RingBench [ROUNDS] [ROUND TRIPS] [SIZES]} (default 5 20000 1024,65536).
 */
public final class RingBench {
    private static final long CAPACITY = 1 << 20;
    private static final long SLEEP_NANOS = TimeUnit.SECONDS.toNanos(1);
    /** rings-spin: how long a side with nothing to read polls before it sleeps. */
    private static final long SPIN_NANOS = TimeUnit.MICROSECONDS.toNanos(Long.getLong("spin.us", 20));

    private RingBench() {
    }

    interface Pinger extends AutoCloseable {
        /** One round trip of {@code size} bytes. */
        void roundTrip(int size) throws Exception;

        @Override
        void close() throws IOException;
    }

    public static void main(String[] args) throws Exception {
        BenchRun run = BenchRun.of("RingBench [ROUNDS] [ROUND TRIPS] [SIZES]", args);
        int rounds = run.intArg(0, 5);
        int iterations = run.intArg(1, 20_000);
        int[] sizes = run.intsArg(2, 1024, 65536);
        BenchRun.header("round trips between two threads: TCP loopback vs the co-located rings (futex when idle; rings-spin: polling " + SPIN_NANOS / 1000 + " us first)");
        BenchRun.Rounds<String> figures = new BenchRun.Rounds<>();
        List<String> kinds = List.of("tcp", "rings", "rings-spin");
        for (int r = 0; r < rounds; r++) {
            for (int size : sizes) {
                for (int k = 0; k < kinds.size(); k++) {
                    String kind = kinds.get((k + r) % kinds.size());
                    try (Pinger p = kind.equals("tcp") ? tcp(size) : rings(size, kind.equals("rings-spin") ? SPIN_NANOS : 0)) {
                        measure(p, size, iterations / 10, null);
                        Histogram h = new Histogram(3);
                        long cpu0 = processCpuNanos();
                        measure(p, size, iterations, h);
                        long cpu = processCpuNanos() - cpu0;
                        String key = kind + " " + size;
                        figures.put(key, "cpu", cpu / 1000.0 / iterations);
                        figures.put(key, "p50", h.getValueAtPercentile(50) / 1000.0);
                        figures.put(key, "p99", h.getValueAtPercentile(99) / 1000.0);
                    }
                }
            }
        }
        BenchRun.Table t = new BenchRun.Table(2, "path", "size", "CPU us/rt", "(rounds)", "p50 us", "p99 us", "CPU/TCP",
                "p50/TCP");
        for (int size : sizes) {
            for (String kind : kinds) {
                String key = kind + " " + size;
                t.row(kind, size, BenchRun.fmt(figures.median(key, "cpu")), figures.range(key, "cpu"),
                        BenchRun.fmt(figures.median(key, "p50")),
                        BenchRun.fmt(figures.median(key, "p99")),
                        BenchRun.ratio(figures.median(key, "cpu"), figures.median("tcp " + size, "cpu")),
                        BenchRun.ratio(figures.median(key, "p50"), figures.median("tcp " + size, "p50")));
            }
        }
        t.print();
        System.out.println("(medians of " + rounds + " rounds of " + iterations + " round trips, the paths in turns)");
    }

    private static void measure(Pinger p, int size, int n, Histogram h) throws Exception {
        for (int i = 0; i < n; i++) {
            long t0 = System.nanoTime();
            p.roundTrip(size);
            if (h != null) {
                h.recordValue(System.nanoTime() - t0);
            }
        }
    }

    private static void joinQuietly(Thread t) {
        try {
            t.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static long processCpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
                .getProcessCpuTime();
    }

    private static Pinger tcp(int size) throws IOException {
        ServerSocketChannel server = ServerSocketChannel.open().bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
        SocketChannel client = SocketChannel.open(server.getLocalAddress());
        SocketChannel accepted = server.accept();
        server.close();
        for (SocketChannel c : List.of(client, accepted)) {
            c.setOption(StandardSocketOptions.TCP_NODELAY, true);
        }
        Thread echo = Thread.ofPlatform().daemon().name("tcp-echo").start(() -> {
            ByteBuffer b = ByteBuffer.allocateDirect(size);
            try {
                while (true) {
                    b.clear();
                    while (b.hasRemaining()) {
                        if (accepted.read(b) < 0) {
                            return;
                        }
                    }
                    b.flip();
                    while (b.hasRemaining()) {
                        accepted.write(b);
                    }
                }
            } catch (IOException closed) {
                // the pinger closed
            }
        });
        ByteBuffer out = ByteBuffer.allocateDirect(size);
        ByteBuffer in = ByteBuffer.allocateDirect(size);
        return new Pinger() {
            @Override
            public void roundTrip(int n) throws IOException {
                out.clear();
                while (out.hasRemaining()) {
                    client.write(out);
                }
                in.clear();
                while (in.hasRemaining()) {
                    if (client.read(in) < 0) {
                        throw new IOException("the echo closed");
                    }
                }
            }

            @Override
            public void close() throws IOException {
                client.close();
                joinQuietly(echo);
                accepted.close();
            }
        };
    }

    /** Waits for something to read: polling up to {@code spinNanos}, then asleep on the futex. */
    private static void await(MessageRing.Reader in, long spinNanos) {
        if (spinNanos > 0) {
            long until = System.nanoTime() + spinNanos;
            while (System.nanoTime() - until < 0) {
                if (in.hasMessages()) {
                    return;
                }
                Thread.onSpinWait();
            }
        }
        in.awaitMessages(SLEEP_NANOS);
    }

    private static Pinger rings(int size, long spinNanos) throws IOException {
        SharedRegion mine = SharedRegion.create("sm4j-bench", CAPACITY);
        SharedRegion theirs = SharedRegion.open(mine.descriptorForPeer(), CAPACITY);
        MessageRing.Writer out = mine.outbound().writer();
        MessageRing.Reader in = mine.inbound().reader();
        MessageRing.Writer echoOut = theirs.outbound().writer();
        MessageRing.Reader echoIn = theirs.inbound().reader();
        MemorySegment payload = Arena.ofAuto().allocate(size);
        boolean[] stop = {false};
        Thread echo = Thread.ofPlatform().daemon().name("ring-echo").start(() -> {
            try {
                MessageRing.Handler back = (kind, m) -> {
                    if (kind == 1) {
                        stop[0] = true;
                        return;
                    }
                    while (!echoOut.offer(0, m, 0, (int) m.byteSize())) {
                        echoOut.awaitSpace((int) m.byteSize(), SLEEP_NANOS);
                    }
                };
                while (!stop[0]) {
                    if (echoIn.poll(back, 16) == 0) {
                        await(echoIn, spinNanos);
                    }
                }
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        int[] got = {0};
        MessageRing.Handler count = (kind, m) -> got[0]++;
        return new Pinger() {
            @Override
            public void roundTrip(int n) throws Exception {
                while (!out.offer(0, payload, 0, n)) {
                    out.awaitSpace(n, SLEEP_NANOS);
                }
                got[0] = 0;
                while (in.poll(count, 1) == 0) {
                    await(in, spinNanos);
                }
            }

            @Override
            public void close() throws IOException {
                out.offer(1, payload, 0, 0);
                joinQuietly(echo);
                theirs.close();
                mine.close();
            }
        };
    }
}
