package io.github.sockmap4j;

import io.github.sockmap4j.testbed.ChildJvm;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.testbed.Await;
import io.github.sockmap4j.testbed.KernelQueues;
import io.github.sockmap4j.testsupport.TestKernel;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/**
 * docs/kernel.md "No back-pressure per socket": a fast writer against a slow reader, with the
 * kernel's bound alone (the safety net for writers that do not cooperate). What the kernel holds for the
 * receiving socket (its skmem r, read through sock_diag) must stay under the bound, every byte
 * must arrive in order, and the writer must be held back as TCP holds it back.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 300, unit = TimeUnit.SECONDS)
@Tag("kernel")
class InFlightBoundTest {
    TestKernel kernel;
    Sockmap sockmap;

    @BeforeAll
    void start() throws IOException {
        // The kernel's bound alone: these writers do not hold back for credit (CreditFlowTest).
        kernel = TestKernel.start("bound", c -> c.toBuilder().credit(false).build());
        sockmap = kernel.sockmap;
    }

    @AfterAll
    void stop() throws IOException {
        if (kernel != null) {
            kernel.close();
        }
    }

    /** Sequence-numbered longs, so that order and loss show. */
    static void fill(ByteBuffer b, long firstLong) {
        b.clear();
        long v = firstLong;
        while (b.remaining() >= 8) {
            b.putLong(v++);
        }
        b.flip();
    }

    @Test
    void slowJavaReaderKeepsTheQueueUnderTheBound() throws Exception {
        long total = 1L << 30;
        int chunk = 64 << 10;
        try (SockmapServerChannel server = sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0));
            int port = ((InetSocketAddress) server.getLocalAddress()).getPort();
            try (SockmapChannel writer = sockmap.openChannel()) {
                writer.connect(server.getLocalAddress());
                try (SockmapChannel reader = (SockmapChannel) server.accept()) {
                    int bound = reader.inFlightBound();
                    assertTrue(bound > 0, "the reader publishes a bound");
                    long pressure = KernelQueues.tcpMemPressurePages();
                    AtomicBoolean done = new AtomicBoolean();
                    AtomicLong maxQueued = new AtomicLong();
                    AtomicLong maxTcpPages = new AtomicLong();
                    AtomicLong maxBound = new AtomicLong(bound);
                    AtomicLong maxExcess = new AtomicLong(Long.MIN_VALUE);
                    CompletableFuture<Void> sampler = CompletableFuture.runAsync(() -> {
                        try {
                            while (!done.get()) {
                                long[] q = KernelQueues.receiveMemoryAndBuffer(port);
                                long b = reader.inFlightBound();
                                maxQueued.accumulateAndGet(q[0], Math::max);
                                maxBound.accumulateAndGet(b, Math::max);
                                maxExcess.accumulateAndGet(q[0] - (b + q[1]), Math::max);
                                maxTcpPages.accumulateAndGet(KernelQueues.tcpMemPages(), Math::max);
                                Thread.sleep(5);
                            }
                        } catch (IOException | InterruptedException e) {
                            throw new IllegalStateException(e);
                        }
                    }, TestThreads.POOL);
                    SockmapStats before = sockmap.stats();
                    CompletableFuture<Void> write = CompletableFuture.runAsync(() -> {
                        ByteBuffer b = ByteBuffer.allocateDirect(chunk);
                        try {
                            for (long sent = 0; sent < total; sent += chunk) {
                                fill(b, sent / 8);
                                ChannelContractTest.writeFully(writer, b);
                            }
                        } catch (IOException e) {
                            throw new java.io.UncheckedIOException(e);
                        }
                    }, TestThreads.POOL);
                    // The reader takes 16 KiB at a time and pauses 1 ms after every 512 KiB.
                    ByteBuffer in = ByteBuffer.allocateDirect(16 << 10);
                    long expected = 0;
                    long got = 0;
                    long badAt = -1;
                    long nextPause = 512 << 10;
                    while (got < total) {
                        int n = reader.read(in);
                        assertTrue(n > 0, "early end of stream at " + got);
                        in.flip();
                        got += n;
                        while (in.remaining() >= 8) {
                            if (in.getLong() != expected && badAt < 0) {
                                badAt = expected * 8;
                            }
                            expected++;
                        }
                        in.compact(); // a read may end inside a long
                        if (got >= nextPause) {
                            nextPause += 512 << 10;
                            Thread.sleep(1);
                        }
                    }
                    write.get(60, TimeUnit.SECONDS);
                    done.set(true);
                    sampler.get(30, TimeUnit.SECONDS);
                    SockmapStats after = sockmap.stats();
                    System.out.printf("slow reader: bound %d B growing to %d B, largest receive memory seen %d B, "
                                    + "redirected %d B, by TCP %d B, %d bound hits, %d resumes, host TCP memory "
                                    + "peak %d pages (pressure at %d)%n",
                            bound, maxBound.get(), maxQueued.get(), after.bytesRedirected() - before.bytesRedirected(),
                            after.bytesPassed() - before.bytesPassed(), after.boundHits() - before.boundHits(),
                            after.resumes() - before.resumes(), maxTcpPages.get(), pressure);
                    assertEquals(-1, badAt, "bytes out of order or lost");
                    assertTrue(after.bytesRedirected() > before.bytesRedirected(), "the fast path was used");
                    assertTrue(after.boundHits() > before.boundHits(), "the reader was slow enough to hit the bound");
                    assertTrue(maxExcess.get() <= 0, "receive memory went " + maxExcess.get()
                            + " B over the bound plus TCP's receive buffer");
                    assertTrue(maxTcpPages.get() < pressure / 10, "host TCP memory near pressure: " + maxTcpPages.get());
                }
            }
        }
    }

    /**
     * The bound is on redirected bytes left unread; TCP bounds its own part with the receive
     * buffer. So a receiver never holds more than the bound plus what TCP alone would hold,
     * where without the bound it held gigabytes (docs/kernel.md).
     */
    static void assertWithinBound(long receiveMemory, long bound, long tcpBuffer) {
        assertTrue(receiveMemory <= bound + tcpBuffer, "receive memory " + receiveMemory + " over the bound " + bound
                + " plus TCP's receive buffer " + tcpBuffer);
    }

    /** Writes sequence-numbered 64 KiB chunks until {@code total}, counting what went out. */
    static CompletableFuture<Void> writeAsync(SockmapChannel writer, long total, AtomicLong written) {
        return CompletableFuture.runAsync(() -> {
            ByteBuffer b = ByteBuffer.allocateDirect(64 << 10);
            try {
                for (long sent = 0; sent < total; sent += b.capacity()) {
                    fill(b, sent / 8);
                    ChannelContractTest.writeFully(writer, b);
                    written.addAndGet(b.capacity());
                }
            } catch (IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        }, TestThreads.POOL);
    }

    /** Waits until {@code written} stops moving for 300 ms; false if it never stops within 20 s. */
    static boolean stalls(AtomicLong written) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        long last = -1;
        long since = System.nanoTime();
        while (System.nanoTime() < deadline) {
            long now = written.get();
            if (now != last) {
                last = now;
                since = System.nanoTime();
            } else if (System.nanoTime() - since > TimeUnit.MILLISECONDS.toNanos(300)) {
                return true;
            }
            Thread.sleep(20);
        }
        return false;
    }

    /** Reads {@code total} bytes and checks the sequence numbers. */
    static void readAndCheck(SockmapChannel reader, long total) throws IOException {
        ByteBuffer in = ByteBuffer.allocateDirect(256 << 10);
        long expected = 0;
        long got = 0;
        while (got < total) {
            int n = reader.read(in);
            assertTrue(n > 0, "early end of stream at " + got);
            got += n;
            in.flip();
            while (in.remaining() >= 8) {
                long v = in.getLong();
                if (v != expected) {
                    throw new AssertionError("at byte " + expected * 8 + ": expected " + expected + ", got " + v);
                }
                expected++;
            }
            in.compact();
        }
    }

    record Pair(SockmapChannel writer, SockmapChannel reader, int port) implements AutoCloseable {
        @Override
        public void close() throws IOException {
            writer.close();
            reader.close();
        }
    }

    Pair connect(SockmapServerChannel server) throws IOException {
        SockmapChannel w = sockmap.openChannel();
        w.connect(server.getLocalAddress());
        SockmapChannel r = (SockmapChannel) server.accept();
        return new Pair(w, r, ((InetSocketAddress) server.getLocalAddress()).getPort());
    }

    @Test
    void aReaderThatNeverReadsHoldsTheWriterBackAsTcpWould() throws Exception {
        long total = 64L << 20;
        try (SockmapServerChannel server = sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0));
            try (Pair p = connect(server)) {
                int bound = p.reader().inFlightBound();
                AtomicLong written = new AtomicLong();
                CompletableFuture<Void> write = writeAsync(p.writer(), total, written);
                assertTrue(stalls(written), "the writer never stopped: " + written.get() + " B written");
                assertTrue(!write.isDone(), "the writer finished against a reader that reads nothing");
                long[] q = KernelQueues.receiveMemoryAndBuffer(p.port());
                System.out.printf("never-reading reader: bound %d B, writer stopped after %d B, receive memory %d B "
                        + "(TCP receive buffer %d B)%n", bound, written.get(), q[0], q[1]);
                assertWithinBound(q[0], bound, q[1]);
                readAndCheck(p.reader(), total);
                write.get(30, TimeUnit.SECONDS);
            }
        }
    }

    /** Host TCP memory with {@code n} stalled writers over plain java.nio TCP, as a baseline. */
    static long plainTcpPagesWithStalledWriters(int n, long total) throws Exception {
        List<java.nio.channels.SocketChannel> open = new ArrayList<>();
        AtomicLong written = new AtomicLong();
        List<CompletableFuture<Void>> writes = new ArrayList<>();
        try (java.nio.channels.ServerSocketChannel server = java.nio.channels.ServerSocketChannel.open()) {
            server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0), n + 8);
            for (int i = 0; i < n; i++) {
                java.nio.channels.SocketChannel w = java.nio.channels.SocketChannel.open(server.getLocalAddress());
                open.add(w);
                open.add(server.accept());
                writes.add(CompletableFuture.runAsync(() -> {
                    ByteBuffer b = ByteBuffer.allocateDirect(64 << 10);
                    try {
                        for (long sent = 0; sent < total; sent += b.capacity()) {
                            b.clear();
                            ChannelContractTest.writeFully(w, b);
                            written.addAndGet(b.capacity());
                        }
                    } catch (IOException e) {
                        // closed below
                    }
                }, TestThreads.POOL));
            }
            assertTrue(stalls(written), "plain TCP writers never stopped");
            return KernelQueues.tcpMemPages();
        } finally {
            for (java.nio.channels.SocketChannel ch : open) {
                ch.close();
            }
            CompletableFuture.allOf(writes.toArray(CompletableFuture[]::new)).handle((v, t) -> null)
                    .get(30, TimeUnit.SECONDS);
        }
    }

    @Test
    void hundredConnectionsAreEachBounded() throws Exception {
        int n = 100;
        long total = 16L << 20;
        long pressure = KernelQueues.tcpMemPressurePages();
        long plainPages = plainTcpPagesWithStalledWriters(n, total);
        List<Pair> pairs = new ArrayList<>();
        AtomicLong written = new AtomicLong();
        List<CompletableFuture<Void>> writes = new ArrayList<>();
        try (SockmapServerChannel server = sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0), n + 8);
            try {
                for (int i = 0; i < n; i++) {
                    pairs.add(connect(server));
                    writes.add(writeAsync(pairs.get(i).writer(), total, written));
                }
                assertTrue(stalls(written), "the writers never stopped");
                long tcpPages = KernelQueues.tcpMemPages();
                int bound = pairs.get(0).reader().inFlightBound();
                // All readers share the server's port: ss lists each; the largest must be in bound.
                long[] largest = KernelQueues.largestReceiveMemory(pairs.get(0).port());
                System.out.printf("100 never-reading readers: bound %d B each, writers stopped after %d B in all, "
                        + "largest receive memory %d B (TCP receive buffer %d B), host TCP memory %d pages, "
                        + "plain TCP the same way %d pages (pressure at %d)%n", bound, written.get(), largest[0],
                        largest[1], tcpPages, plainPages, pressure);
                assertWithinBound(largest[0], bound, largest[1]);
                // Per connection: the bound, and the receive window TCP had advertised when the
                // sender switched to it (at most another bound's worth here).
                long boundPages = 2L * n * bound / 4096;
                assertTrue(tcpPages <= plainPages + boundPages, "host TCP memory " + tcpPages
                        + " pages, more than plain TCP's " + plainPages + " plus twice the bounds' " + boundPages);
                assertTrue(tcpPages < pressure / 2, "host TCP memory near pressure: " + tcpPages);
                for (Pair p : pairs) {
                    readAndCheck(p.reader(), total);
                }
                CompletableFuture.allOf(writes.toArray(CompletableFuture[]::new)).get(60, TimeUnit.SECONDS);
            } finally {
                for (Pair p : pairs) {
                    p.close();
                }
            }
        }
    }

    @Test
    void theBoundChangesWhileConnectionsAreOpen() throws Exception {
        long total = 32L << 20;
        try (SockmapServerChannel server = sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(0)); // a port-wide rule, which the bound below changes
            int port = ((InetSocketAddress) server.getLocalAddress()).getPort();
            try (OptIn rule = sockmap.optIn(port, (java.net.InetAddress) null, 0, 64 << 10); Pair p = connect(server)) {
                assertEquals(64 << 10, p.reader().inFlightBound(), "the port's bound applies");
                AtomicLong written = new AtomicLong();
                CompletableFuture<Void> write = writeAsync(p.writer(), total, written);
                assertTrue(stalls(written));
                long[] q = KernelQueues.receiveMemoryAndBuffer(port);
                assertWithinBound(q[0], 64 << 10, q[1]);
                rule.setBound(1 << 20);
                assertEquals(1 << 20, p.reader().inFlightBound(), "the open connection took the new bound");
                readAndCheck(p.reader(), total);
                write.get(30, TimeUnit.SECONDS);
                rule.setBound(0);
                assertTrue(p.reader().inFlightBound() > 0, "back to the automatic bound");
            }
        }
    }

    /**
     * src/test/c/slow_reader.c connecting to 127.0.0.1:{@code port} to read {@code total} bytes: a
     * reader that publishes nothing, pausing 1 ms per 512 KiB. Prints connected= once connected.
     */
    static ChildJvm startSlowReader(int port, long total) throws IOException, InterruptedException {
        return ChildJvm.start(java.util.List.of(slowReader().toString(), Integer.toString(port),
                Long.toString(total)));
    }

    /** src/test/c/slow_reader.c, compiled: a reader that publishes nothing, pausing 1 ms per 512 KiB. */
    static java.nio.file.Path slowReader() throws IOException, InterruptedException {
        return ChildJvm.compileC("src/test/c/slow_reader.c", java.nio.file.Path.of("target", "slow_reader"));
    }

    /** The largest bound the verdict holds for any watched receiver now (the test's one connection). */
    private long largestWatchedBound() {
        long b = 0;
        for (var w : sockmap.fastPath().kernel().inFlight().watched()) {
            b = Math.max(b, w.bound());
        }
        return b;
    }

    @Test
    void slowReaderThatIsNotJavaIsBoundedThroughTheWatcher() throws Exception {
        long total = 1L << 30;
        long firstBound = KernelQueues.tcpRmemDefault();
        try (SockmapServerChannel server = sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0));
            int port = ((InetSocketAddress) server.getLocalAddress()).getPort();
            try (ChildJvm reader = startSlowReader(port, total);
                 SockmapChannel writer = (SockmapChannel) server.accept()) {
                reader.expect("connected=", 30);
                AtomicBoolean done = new AtomicBoolean();
                AtomicLong maxQueued = new AtomicLong();
                AtomicLong maxExcess = new AtomicLong(Long.MIN_VALUE);
                AtomicLong largestBound = new AtomicLong(firstBound);
                CompletableFuture<Void> sampler = CompletableFuture.runAsync(() -> {
                    try {
                        while (!done.get()) {
                            // The bound of a receiver that has read all it was sent grows (as TCP's
                            // autotuning grows a receive buffer): the largest in force before and after
                            // the look at the queue is the one the queue is held to.
                            largestBound.accumulateAndGet(largestWatchedBound(), Math::max);
                            long[] q = KernelQueues.peerReceiveMemory(port);
                            largestBound.accumulateAndGet(largestWatchedBound(), Math::max);
                            maxQueued.accumulateAndGet(q[0], Math::max);
                            maxExcess.accumulateAndGet(q[0] - (largestBound.get() + q[1]), Math::max);
                            Thread.sleep(5);
                        }
                    } catch (IOException | InterruptedException e) {
                        throw new IllegalStateException(e);
                    }
                }, TestThreads.POOL);
                SockmapStats before = sockmap.stats();
                ByteBuffer b = ByteBuffer.allocateDirect(64 << 10);
                for (long sent = 0; sent < total; sent += b.capacity()) {
                    fill(b, sent / 8);
                    ChannelContractTest.writeFully(writer, b);
                }
                assertEquals("1", reader.expect("ok=", 120), "the C reader saw the sequence break");
                done.set(true);
                sampler.get(30, TimeUnit.SECONDS);
                SockmapStats after = sockmap.stats();
                System.out.printf("slow C reader: first bound %d B, largest bound %d B, largest receive memory seen %d B, "
                                + "redirected %d B, bound hits %d, resumes %d%n", firstBound, largestBound.get(), maxQueued.get(),
                        after.bytesRedirected() - before.bytesRedirected(), after.boundHits() - before.boundHits(),
                        after.resumes() - before.resumes());
                assertTrue(after.bytesRedirected() > before.bytesRedirected(), "the fast path was used");
                assertTrue(maxExcess.get() <= 0, "receive memory went " + maxExcess.get()
                        + " B over the bound in force (largest " + largestBound.get() + " B) plus TCP's receive buffer");
                assertEquals(0, reader.waitFor(30));
            }
        }
    }

    @Test
    void aSenderComesBackToTheRedirectOnceAJdkReaderHasReadEverything() throws Exception {
        // A JDK SocketChannel publishes nothing: the watcher estimates what it read.
        try (SockmapServerChannel server = sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0));
            try (java.nio.channels.SocketChannel jdk = java.nio.channels.SocketChannel.open(server.getLocalAddress());
                 SockmapChannel sender = (SockmapChannel) server.accept()) {
                SockmapStats before = sockmap.stats();
                int size = 4 << 20; // far past the first bound of a receiver that publishes nothing
                CompletableFuture<Void> w = CompletableFuture.runAsync(() -> ChannelContractTest.write(sender,
                        new byte[size]), TestThreads.POOL);
                ChannelContractTest.read(jdk, ByteBuffer.allocate(size));
                w.get(30, TimeUnit.SECONDS);
                assertTrue(sockmap.stats().boundHits() > before.boundHits(), "the bound held the sender back");
                assertTrue(!sender.isAccelerated(), "on TCP past the bound");
                // Everything is read; within a few of the watcher's polls the next send resumes.
                // Each probe is a send (the verdict decides on sends) and its read.
                Await.until("the sender comes back to the redirect", () -> {
                    ChannelContractTest.writeFully(sender, ByteBuffer.wrap(new byte[] {7}));
                    ChannelContractTest.readFully(jdk, ByteBuffer.allocate(1));
                    return sender.isAccelerated();
                });
                assertTrue(sockmap.stats().resumes() > before.resumes());
            }
        }
    }

    /**
     * A JDK reader that keeps up, where the verdict counts its reads exactly at each send (the
     * kernel lets it read the receiver's socket: its watch entry is marked EXACT): the watcher
     * never polls it, since no sender waits on it. Where the kernel does not, the entry is not
     * marked, and the watcher's estimate is what moves its read count.
     */
    @Test
    void aReaderTheVerdictCountsExactlyIsNotPolled() throws Exception {
        try (SockmapServerChannel server = sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0));
            try (java.nio.channels.SocketChannel jdk = java.nio.channels.SocketChannel.open(server.getLocalAddress());
                 SockmapChannel sender = (SockmapChannel) server.accept()) {
                var watcher = sockmap.fastPath().watcher();
                long polls = watcher.polls();
                ByteBuffer reply = ByteBuffer.allocate(64);
                for (int i = 0; i < 2_000; i++) {
                    ChannelContractTest.writeFully(sender, ByteBuffer.wrap(new byte[64]));
                    reply.clear();
                    ChannelContractTest.readFully(jdk, reply);
                }
                boolean exact = false;
                int entries = 0;
                for (var w : sockmap.fastPath().kernel().inFlight().watched()) {
                    entries++;
                    exact |= (w.flags() & io.github.sockmap4j.linux.bpf.WatchLayout.EXACT) != 0;
                    assertTrue(w.sent() >= 2_000L * 64, "the verdict counted what was sent: " + w.sent());
                }
                assertEquals(1, entries, "one receiver that publishes nothing: the JDK socket");
                assertTrue(sender.isAccelerated(), "on the redirect");
                System.out.printf("a JDK reader that keeps up: watch entry %s, %d polls%n", exact ? "EXACT" : "estimated",
                        watcher.polls() - polls);
                if (verdictCountsReads()) {
                    assertTrue(exact, "the kernel has what the exact count takes, but the entry is not EXACT");
                }
                if (exact) {
                    assertEquals(polls, watcher.polls(), "the watcher polled a receiver the verdict counts exactly");
                }
            }
        }
    }

    /**
     * Whether the verdict can count a receiver's reads on this kernel: its BTF has the psock's
     * {@code msg_tot_len} and the kernel takes the object with the drain check (6.3 and later).
     */
    private static boolean verdictCountsReads() throws IOException {
        String[] v = System.getProperty("os.version").split("[.-]");
        boolean drain = Integer.parseInt(v[0]) > 6 || Integer.parseInt(v[0]) == 6 && Integer.parseInt(v[1]) >= 3;
        java.nio.file.Path btf = java.nio.file.Path.of("/sys/kernel/btf/vmlinux");
        return drain && java.nio.file.Files.isReadable(btf) && new String(java.nio.file.Files.readAllBytes(btf),
                java.nio.charset.StandardCharsets.ISO_8859_1).contains("\0msg_tot_len\0");
    }
}
