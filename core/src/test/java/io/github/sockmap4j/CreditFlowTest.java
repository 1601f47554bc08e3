package io.github.sockmap4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.internal.flow.CreditEngine;
import io.github.sockmap4j.linux.bpf.ServiceMap;
import io.github.sockmap4j.linux.ffi.Libbpf;
import io.github.sockmap4j.testbed.Await;
import io.github.sockmap4j.testbed.ChildJvm;
import io.github.sockmap4j.testbed.KernelQueues;
import io.github.sockmap4j.testsupport.TestKernel;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
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
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Credit between sockmap4j endpoints (docs/in-flight-bound.md): a SockmapChannel writer sees its
 * reader's published reads and holds its bytes back instead of leaving the fast path. A slow
 * reader therefore gets every byte by the redirect, the kernel's bound is never hit, and what
 * the reader has not read stays within its bound plus one write.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 300, unit = TimeUnit.SECONDS)
@Tag("kernel")
class CreditFlowTest {
    static final long TOTAL = 1L << 30;
    static final int WRITE = 64 << 10;

    TestKernel kernel;
    Sockmap sockmap;

    @BeforeAll
    void start() throws IOException {
        kernel = TestKernel.start("credit");
        sockmap = kernel.sockmap;
    }

    @AfterAll
    void stop() throws IOException {
        if (kernel != null) {
            kernel.close();
        }
    }

    /** How the reader falls behind. */
    enum Reader {
        /** Reads as fast as it can, pausing 1 ms after every 8 MiB. */
        PAUSING,
        /** Checks every long five times over (the writer writes each once): about five times slower. */
        FIVE_TIMES_SLOWER
    }

    @ParameterizedTest(name = "{0} writer, {1} reader")
    @CsvSource({"blocking, PAUSING", "blocking, FIVE_TIMES_SLOWER", "non-blocking, PAUSING",
        "non-blocking, FIVE_TIMES_SLOWER"})
    void aSlowReaderGetsEveryByteByTheRedirect(String mode, Reader kind) throws Exception {
        slowReader(mode, kind, null);
    }

    /**
     * A writer that dialed a Service VIP (translated at connect: getpeername reports the VIP, the
     * kernel keys the socket by the endpoint) finds its reader's credit as one that dialed the
     * endpoint does. Before the endpoint was kept for user space, it found none: its writes went
     * unheld, hit the kernel's bound and left the redirect for TCP.
     */
    @Test
    void aWriterThatDialedAServiceVipHoldsAtItsReadersCredit() throws Exception {
        slowReader("blocking", Reader.PAUSING, InetAddress.getByName("127.0.0.77"));
    }

    /** The transfer of {@link #aSlowReaderGetsEveryByteByTheRedirect}, dialing {@code vip} (a Service to the server) when not null. */
    void slowReader(String mode, Reader kind, InetAddress vip) throws Exception {
        boolean blocking = mode.equals("blocking");
        try (SockmapServerChannel server = sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0));
            int port = ((InetSocketAddress) server.getLocalAddress()).getPort();
            InetSocketAddress service = vip == null ? null : new InetSocketAddress(vip, port);
            if (service != null) {
                try (ServiceMap services = ServiceMap.open(Libbpf.load(), kernel.pinDir)) {
                    services.put(new ServiceMap.Service(service, List.of((InetSocketAddress) server.getLocalAddress()),
                            List.of(), false));
                }
            }
            try (SockmapChannel writer = sockmap.openChannel()) {
                long translated = sockmap.stats().servicesTranslated();
                writer.connect(service != null ? service : server.getLocalAddress());
                if (service != null) {
                    assertEquals(translated + 1, sockmap.stats().servicesTranslated(), "the connect was translated");
                    assertEquals(service, writer.getRemoteAddress(), "the writer's peer is the Service it dialed");
                }
                try (SockmapChannel reader = (SockmapChannel) server.accept()) {
                    assertTrue(writer.isAccelerated(), "the writer is on the redirect");
                    AtomicBoolean done = new AtomicBoolean();
                    AtomicLong maxExcess = new AtomicLong(Long.MIN_VALUE);
                    AtomicLong maxQueued = new AtomicLong();
                    AtomicLong maxBound = new AtomicLong();
                    CompletableFuture<Void> sampler = CompletableFuture.runAsync(() -> {
                        try {
                            while (!done.get()) {
                                long bound = reader.inFlightBound();
                                long queued = KernelQueues.receiveMemory(port);
                                long boundAfter = reader.inFlightBound();
                                maxQueued.accumulateAndGet(queued, Math::max);
                                maxBound.accumulateAndGet(boundAfter, Math::max);
                                // The bound only grows: between two reads of it, the larger one held.
                                maxExcess.accumulateAndGet(queued - (Math.max(bound, boundAfter) + WRITE), Math::max);
                                Await.holdsWithin(java.time.Duration.ofMillis(5), done::get);
                            }
                        } catch (IOException | InterruptedException e) {
                            throw new IllegalStateException(e);
                        }
                    }, TestThreads.POOL);
                    SockmapStats before = sockmap.stats();
                    FlowStats flowBefore = Sockmap.flowStats();
                    CompletableFuture<Void> write = CompletableFuture.runAsync(() -> {
                        try {
                            if (blocking) {
                                writeBlocking(writer);
                            } else {
                                writeNonBlocking(writer);
                            }
                        } catch (IOException e) {
                            throw new UncheckedIOException(e);
                        }
                    }, TestThreads.POOL);
                    long badAt = read(reader, kind);
                    write.get(60, TimeUnit.SECONDS);
                    done.set(true);
                    sampler.get(30, TimeUnit.SECONDS);
                    SockmapStats after = sockmap.stats();
                    FlowStats flowAfter = Sockmap.flowStats();
                    long redirected = after.bytesRedirected() - before.bytesRedirected();
                    long passed = after.bytesPassed() - before.bytesPassed();
                    System.out.printf("credit, %s writer, %s reader" + (service != null ? ", dialed " + service : "")
                                    + ": %d B redirected (%.4f%%), %d B by TCP, "
                                    + "%d bound hits, largest receive memory %d B against a bound of up to %d B, "
                                    + "%d credit waits for %.1f ms%n", mode, kind, redirected,
                            100.0 * redirected / TOTAL, passed, after.boundHits() - before.boundHits(),
                            maxQueued.get(), maxBound.get(), flowAfter.creditWaits() - flowBefore.creditWaits(),
                            (flowAfter.creditWaitNanos() - flowBefore.creditWaitNanos()) / 1e6);
                    assertEquals(-1, badAt, "bytes out of order or lost");
                    assertTrue(redirected >= TOTAL * 999 / 1000, "at least 99.9% redirected: " + redirected);
                    assertEquals(0, after.boundHits() - before.boundHits(), "the kernel's bound was never hit");
                    assertTrue(maxExcess.get() <= 0, "receive memory went " + maxExcess.get()
                            + " B over the bound plus one write");
                    assertTrue(flowAfter.creditWaits() > flowBefore.creditWaits(),
                            "the " + mode + " writer waited for credit");
                }
            } finally {
                if (service != null) {
                    try (ServiceMap services = ServiceMap.open(Libbpf.load(), kernel.pinDir)) {
                        services.remove(service);
                    }
                }
            }
        }
    }

    /** Reads {@code total} sequence-numbered bytes ({@link InFlightBoundTest#fill}), failing at the first wrong long. */
    static void readInOrder(SockmapChannel ch, long total) throws IOException {
        ByteBuffer in = ByteBuffer.allocateDirect(WRITE);
        long expected = 0;
        for (long got = 0; got < total; ) {
            int n = ch.read(in);
            assertTrue(n >= 0, "early end of stream at " + got);
            got += n;
            in.flip();
            while (in.remaining() >= 8) {
                assertEquals(expected++, in.getLong(), "the long at " + (expected - 1) * 8);
            }
            in.compact();
        }
    }

    static void writeBlocking(SockmapChannel writer) throws IOException {
        ByteBuffer b = ByteBuffer.allocateDirect(WRITE);
        for (long sent = 0; sent < TOTAL; sent += WRITE) {
            InFlightBoundTest.fill(b, sent / 8);
            ChannelContractTest.writeFully(writer, b);
        }
    }

    static void writeNonBlocking(SockmapChannel writer) throws IOException {
        writer.configureBlocking(false);
        try (Selector selector = Sockmap.openSelector()) {
            SelectionKey key = writer.register(selector, SelectionKey.OP_WRITE);
            ByteBuffer b = ByteBuffer.allocateDirect(WRITE);
            for (long sent = 0; sent < TOTAL; sent += WRITE) {
                InFlightBoundTest.fill(b, sent / 8);
                while (b.hasRemaining()) {
                    if (writer.write(b) == 0) {
                        selector.select(10_000);
                        selector.selectedKeys().clear();
                    }
                }
            }
            key.cancel();
        }
    }

    /** Reads TOTAL sequence-numbered bytes; the offset of the first wrong one, or -1. */
    static long read(SockmapChannel reader, Reader kind) throws IOException, InterruptedException {
        ByteBuffer in = ByteBuffer.allocateDirect(WRITE);
        long expected = 0;
        long got = 0;
        long badAt = -1;
        long nextPause = 8 << 20;
        long sink = 0;
        while (got < TOTAL) {
            int n = reader.read(in);
            if (n < 0) {
                throw new IOException("early end of stream at " + got);
            }
            in.flip();
            got += n;
            int start = in.position();
            int whole = in.remaining() & ~7;
            if (kind == Reader.FIVE_TIMES_SLOWER) {
                for (int pass = 0; pass < 4; pass++) {
                    for (int i = 0; i < whole; i += 8) {
                        sink += in.getLong(start + i);
                    }
                }
            }
            while (in.remaining() >= 8) {
                if (in.getLong() != expected && badAt < 0) {
                    badAt = expected * 8;
                }
                expected++;
            }
            in.compact(); // a read may end inside a long
            if (kind == Reader.PAUSING && got >= nextPause) {
                nextPause += 8 << 20;
                Thread.sleep(1); // the workload: a reader that pauses
            }
        }
        return sink == 42 ? -2 : badAt; // sink is used, so the extra passes are not optimised away
    }

    @Test
    void aWriterHoldsAtTheWatchersEstimateForAReaderThatPublishesNothing() throws Exception {
        long total = 256L << 20;
        long firstBound = KernelQueues.tcpRmemDefault();
        try (SockmapServerChannel server = sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0));
            int port = ((InetSocketAddress) server.getLocalAddress()).getPort();
            try (ChildJvm reader = InFlightBoundTest.startSlowReader(port, total);
                 SockmapChannel writer = (SockmapChannel) server.accept()) {
                reader.expect("connected=", 30);
                AtomicBoolean done = new AtomicBoolean();
                AtomicLong maxQueued = new AtomicLong();
                AtomicLong maxBound = new AtomicLong(firstBound);
                CompletableFuture<Void> sampler = CompletableFuture.runAsync(() -> {
                    try {
                        while (!done.get()) {
                            // The watcher grows the bound with the reader's rate; it only grows.
                            long queued = KernelQueues.peerReceiveMemory(port)[0];
                            for (var w : sockmap.fastPath().kernel().inFlight().watched()) {
                                maxBound.accumulateAndGet(Integer.toUnsignedLong(w.bound()), Math::max);
                            }
                            maxQueued.accumulateAndGet(queued, Math::max);
                            Await.holdsWithin(java.time.Duration.ofMillis(5), done::get);
                        }
                    } catch (IOException | InterruptedException e) {
                        throw new IllegalStateException(e);
                    }
                }, TestThreads.POOL);
                SockmapStats before = sockmap.stats();
                ByteBuffer b = ByteBuffer.allocateDirect(WRITE);
                for (long sent = 0; sent < total; sent += WRITE) {
                    InFlightBoundTest.fill(b, sent / 8);
                    ChannelContractTest.writeFully(writer, b);
                }
                assertEquals("1", reader.expect("ok=", 120), "the C reader saw the sequence break");
                done.set(true);
                sampler.get(30, TimeUnit.SECONDS);
                SockmapStats after = sockmap.stats();
                long redirected = after.bytesRedirected() - before.bytesRedirected();
                System.out.printf("credit, C reader publishing nothing: %d B redirected (%.3f%%), %d bound hits, "
                                + "largest receive memory %d B (bound %d B growing to %d B)%n", redirected,
                        100.0 * redirected / total, after.boundHits() - before.boundHits(), maxQueued.get(), firstBound,
                        maxBound.get());
                assertTrue(redirected >= total * 99 / 100, "at least 99% redirected: " + redirected);
                assertEquals(0, after.boundHits() - before.boundHits(), "held at the estimate, not thrown off");
                assertTrue(maxQueued.get() <= maxBound.get() + WRITE, "receive memory " + maxQueued.get()
                        + " B within the watcher's bound (up to " + maxBound.get() + " B) plus one write");
                assertEquals(0, reader.waitFor(30));
            }
        }
    }

    /**
     * A reader that reads nothing for three times the stall time but sends all the while (an event
     * loop busy writing its replies) is running, not waiting on its writer: the writer holds for
     * it, and every byte goes by the redirect, none past the kernel's bound.
     */
    @Test
    void aWriterHoldsForAReaderThatReadsNothingButStillSends() throws Exception {
        try (SockmapServerChannel server = sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0));
            try (SockmapChannel writer = sockmap.openChannel()) {
                writer.connect(server.getLocalAddress());
                try (SockmapChannel reader = (SockmapChannel) server.accept()) {
                    long total = 4L * reader.inFlightBound(); // the writer must hold for its reader
                    SockmapStats before = sockmap.stats();
                    FlowStats flowBefore = Sockmap.flowStats();
                    // The writer's socket reads what its reader sends, on a thread of its own.
                    CompletableFuture<Long> heard = CompletableFuture.supplyAsync(() -> {
                        ByteBuffer in = ByteBuffer.allocateDirect(WRITE);
                        long n = 0;
                        try {
                            for (int r; (r = writer.read(in.clear())) >= 0; ) {
                                n += r;
                            }
                        } catch (IOException e) {
                            throw new UncheckedIOException(e);
                        }
                        return n;
                    }, TestThreads.POOL);
                    Thread[] writing = new Thread[1];
                    CompletableFuture<Void> write = CompletableFuture.runAsync(() -> {
                        writing[0] = Thread.currentThread();
                        ByteBuffer b = ByteBuffer.allocateDirect(WRITE);
                        try {
                            for (long sent = 0; sent < total; sent += WRITE) {
                                InFlightBoundTest.fill(b, sent / 8);
                                ChannelContractTest.writeFully(writer, b);
                            }
                        } catch (IOException e) {
                            throw new UncheckedIOException(e);
                        }
                    }, TestThreads.POOL);
                    Await.until("the writer waits for credit", () -> writing[0] != null
                            && Await.isIn(writing[0], CreditEngine.class.getName(), "await"));
                    // The reader sends for three stall times of the writer's hold, reading nothing.
                    ByteBuffer out = ByteBuffer.allocateDirect(4096);
                    long sentBack = 0;
                    long from = System.nanoTime();
                    while (System.nanoTime() - from < 3 * CreditEngine.STALLED_RECEIVER_NANOS) {
                        ChannelContractTest.writeFully(reader, out.clear());
                        sentBack += out.capacity();
                    }
                    assertFalse(write.isDone(), "the writer held while its reader read nothing");
                    readInOrder(reader, total);
                    write.get(30, TimeUnit.SECONDS);
                    reader.shutdownOutput();
                    assertEquals(sentBack, heard.get(30, TimeUnit.SECONDS), "the writer read all its reader sent");
                    SockmapStats after = sockmap.stats();
                    System.out.printf("credit, a reader that sends %d B and reads nothing for %d ms: %d B by TCP, "
                                    + "%d bound hits, %d credit waits%n", sentBack,
                            3 * CreditEngine.STALLED_RECEIVER_NANOS / 1_000_000, after.bytesPassed() - before.bytesPassed(),
                            after.boundHits() - before.boundHits(),
                            Sockmap.flowStats().creditWaits() - flowBefore.creditWaits());
                    assertEquals(0, after.boundHits() - before.boundHits(), "the kernel's bound was never hit");
                    assertEquals(0, after.bytesPassed() - before.bytesPassed(), "no byte went by TCP");
                }
            }
        }
    }

    /**
     * Two ends that each write twice their peer's bound before they read (a protocol that relies on
     * TCP's buffers): neither reads nor sends once both hold, so each stops holding after the stall
     * time, the rest goes by TCP, and both finish with every byte in order.
     */
    @Test
    void twoEndsThatBothWriteBeforeTheyReadDoNotDeadlock() throws Exception {
        try (SockmapServerChannel server = sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0));
            try (SockmapChannel a = sockmap.openChannel()) {
                a.connect(server.getLocalAddress());
                try (SockmapChannel b = (SockmapChannel) server.accept()) {
                    long total = 2L * Math.max(a.inFlightBound(), b.inFlightBound());
                    SockmapStats before = sockmap.stats();
                    List<CompletableFuture<Void>> ends = List.of(a, b).stream().map(ch -> CompletableFuture.runAsync(() -> {
                        try {
                            ByteBuffer out = ByteBuffer.allocateDirect(WRITE);
                            for (long sent = 0; sent < total; sent += WRITE) {
                                InFlightBoundTest.fill(out, sent / 8);
                                ChannelContractTest.writeFully(ch, out);
                            }
                            readInOrder(ch, total);
                        } catch (IOException e) {
                            throw new UncheckedIOException(e);
                        }
                    }, TestThreads.POOL)).toList();
                    for (CompletableFuture<Void> end : ends) {
                        end.get(Await.scaled(30), TimeUnit.SECONDS);
                    }
                    SockmapStats after = sockmap.stats();
                    System.out.printf("credit, two ends writing %d B each before reading: %d B redirected, %d B by TCP, "
                            + "%d bound hits%n", total, after.bytesRedirected() - before.bytesRedirected(),
                            after.bytesPassed() - before.bytesPassed(), after.boundHits() - before.boundHits());
                    assertTrue(after.boundHits() > before.boundHits(), "the ends stopped holding for each other");
                }
            }
        }
    }

    @Test
    void aWriterWaitingForCreditGetsTheCloseOfItsReader() throws Exception {
        try (SockmapServerChannel server = sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0));
            SockmapChannel reader = sockmap.openChannel();
            try {
                reader.connect(server.getLocalAddress());
                try (SockmapChannel writer = (SockmapChannel) server.accept()) {
                    HeldWriter held = HeldWriter.start(writer);
                    held.awaitHeld();
                    long closedAt = System.nanoTime();
                    reader.close();
                    held.assertFailsWithin1s(closedAt, "its reader closed");
                }
            } finally {
                reader.close(); // closing again does nothing; this is for a test that failed early
            }
        }
    }

    @Test
    void aWriterWaitingForCreditGetsAnErrorWhenItsReaderIsKilled() throws Exception {
        try (SockmapServerChannel server = sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0));
            int port = ((InetSocketAddress) server.getLocalAddress()).getPort();
            try (ChildJvm child = ChildJvm.startInCgroup(kernel.cgroup, ChildJvm.javaCommand(
                    PeerMains.StallingReader.class, kernel.pinDir.toString(), kernel.cgroup.toString(),
                    Integer.toString(port), Integer.toString(1 << 20)));
                 SockmapChannel writer = (SockmapChannel) server.accept()) {
                HeldWriter held = HeldWriter.start(writer);
                assertEquals(Integer.toString(1 << 20), child.expect("read=", 60));
                held.awaitHeld();
                long killedAt = System.nanoTime();
                child.kill();
                held.assertFailsWithin1s(killedAt, "its reader was killed");
            }
        }
    }

    /** A writer writing until a write fails, on a pool thread. */
    record HeldWriter(Thread[] thread, CompletableFuture<Throwable> failure) {
        static HeldWriter start(SockmapChannel writer) {
            Thread[] t = new Thread[1];
            return new HeldWriter(t, CompletableFuture.supplyAsync(() -> {
                t[0] = Thread.currentThread();
                return writeUntilFailure(writer);
            }, TestThreads.POOL));
        }

        void awaitHeld() throws InterruptedException {
            Await.until("the writer waits for credit", () -> thread[0] != null
                    && Await.isIn(thread[0], io.github.sockmap4j.internal.flow.CreditEngine.class.getName(), "await"));
        }

        void assertFailsWithin1s(long since, String event) throws Exception {
            Throwable t = failure.get(Await.scaled(10), TimeUnit.SECONDS);
            long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - since);
            System.out.printf("credit: the writer got %s %d ms after %s%n", t, millis, event);
            assertInstanceOf(IOException.class, t);
            assertTrue(millis < 1000, "the writer got an error within 1 s after " + event + ": " + millis + " ms");
        }
    }

    /** Writes until a write fails; the failure (null if none within 30 s, scaled, which fails the test). */
    static Throwable writeUntilFailure(SockmapChannel writer) {
        ByteBuffer b = ByteBuffer.allocateDirect(WRITE);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(Await.scaled(30));
        try {
            while (System.nanoTime() < deadline) {
                b.clear();
                writer.write(b);
            }
            return null;
        } catch (IOException e) {
            return e;
        }
    }

    @Test
    void aNonBlockingWriterWithoutCreditWritesNothingAndIsNotSelected() throws Exception {
        try (SockmapServerChannel server = sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0));
            try (SockmapChannel writer = sockmap.openChannel()) {
                writer.connect(server.getLocalAddress());
                try (SockmapChannel reader = (SockmapChannel) server.accept();
                     Selector selector = Sockmap.openSelector()) {
                    long hitsBefore = sockmap.stats().boundHits();
                    writer.configureBlocking(false);
                    SelectionKey key = writer.register(selector, SelectionKey.OP_WRITE);
                    ByteBuffer b = ByteBuffer.allocateDirect(WRITE);
                    long written = 0;
                    int n;
                    while ((n = writer.write(b.clear())) > 0) {
                        written += n;
                    }
                    int bound = reader.inFlightBound();
                    assertTrue(written <= bound, "wrote " + written + " B past a bound of " + bound + " B");
                    assertTrue(written >= bound - WRITE, "credit let the bound's worth go: " + written + " of " + bound);
                    assertEquals(0, selector.selectNow(), "no OP_WRITE without credit, though the socket has room");
                    ByteBuffer in = ByteBuffer.allocateDirect((int) written);
                    while (in.hasRemaining()) {
                        reader.read(in);
                    }
                    assertEquals(1, selector.select(5_000), "OP_WRITE once the reader has read");
                    assertTrue(key.isWritable());
                    assertTrue(writer.write(b.clear()) > 0);
                    assertEquals(hitsBefore, sockmap.stats().boundHits(), "never over the kernel's bound");
                }
            }
        }
    }
}
