package io.github.sockmap4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/**
 * KERNEL-NOTES hazard 6: a fast writer against a slow reader. What the kernel holds for the
 * receiving socket (its skmem r, read through sock_diag) must stay under the bound, every byte
 * must arrive in order, and the writer must be held back as TCP holds it back.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class InFlightBoundTest {
    TestKernel kernel;
    Sockmap sockmap;

    @BeforeAll
    void start() throws IOException {
        kernel = TestKernel.start("bound");
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
                    CompletableFuture<Void> sampler = CompletableFuture.runAsync(() -> {
                        try {
                            while (!done.get()) {
                                maxQueued.accumulateAndGet(KernelQueues.receiveMemory(port), Math::max);
                                maxBound.accumulateAndGet(reader.inFlightBound(), Math::max);
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
                    assertTrue(maxQueued.get() <= maxBound.get(),
                            "receive memory " + maxQueued.get() + " over the bound " + maxBound.get());
                    assertTrue(maxTcpPages.get() < pressure / 10, "host TCP memory near pressure: " + maxTcpPages.get());
                }
            }
        }
    }
}
