package io.github.sockmap4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.testsupport.TestKernel;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.Tag;
import net.jqwik.api.Tuple;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.lifecycle.BeforeContainer;
import net.jqwik.api.statistics.Statistics;

/**
 * Random message sizes (1 B to 8 MiB) and random write and read chunkings, both directions
 * at once over one accelerated connection: the bytes arrive identical.
 */
@Tag("kernel")
class TransferPropertyTest {
    private static TestKernel kernel;

    @BeforeContainer
    static void start() throws IOException {
        kernel = TestKernel.start("property");
    }

    @AfterContainer
    static void stop() throws IOException {
        kernel.close();
    }

    @Property(tries = 50)
    void bytesArriveIdenticalInBothDirections(
            @ForAll("sizes") int sizeUp,
            @ForAll("sizes") int sizeDown,
            @ForAll("chunks") int writeChunk,
            @ForAll("chunks") int readChunk,
            @ForAll long seed) throws Exception {
        Sockmap sockmap = kernel.sockmap;
        try (SockmapServerChannel server = sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0));
            try (SockmapChannel client = sockmap.openChannel()) {
                client.connect(server.getLocalAddress());
                try (SockmapChannel side = (SockmapChannel) server.accept()) {
                    assertEquals(sockmap.isActive(), client.isAccelerated());
                    assertEquals(sockmap.isActive(), side.isAccelerated());
                    Statistics.label("up size").collect(Integer.numberOfTrailingZeros(Integer.highestOneBit(sizeUp)));
                    byte[] up = new byte[sizeUp];
                    byte[] down = new byte[sizeDown];
                    Random r = new Random(seed);
                    r.nextBytes(up);
                    r.nextBytes(down);
                    // At most ~20,000 calls a direction keeps a try under a second or two.
                    int wc = Math.max(writeChunk, Math.max(sizeUp, sizeDown) / 20_000);
                    int rc = Math.max(readChunk, Math.max(sizeUp, sizeDown) / 20_000);
                    CompletableFuture<Void> w1 = CompletableFuture.runAsync(() -> writeChunked(client, up, wc), TestThreads.POOL);
                    CompletableFuture<Void> w2 = CompletableFuture.runAsync(() -> writeChunked(side, down, wc), TestThreads.POOL);
                    CompletableFuture<byte[]> r1 = CompletableFuture.supplyAsync(() -> readChunked(side, sizeUp, rc), TestThreads.POOL);
                    byte[] gotDown = readChunked(client, sizeDown, rc);
                    CompletableFuture.allOf(w1, w2).get(60, TimeUnit.SECONDS);
                    byte[] gotUp = r1.get(60, TimeUnit.SECONDS);
                    assertTrue(java.util.Arrays.equals(up, gotUp), "client -> server bytes differ");
                    assertTrue(java.util.Arrays.equals(down, gotDown), "server -> client bytes differ");
                }
            }
        }
    }

    /** 1 B to 8 MiB, spread evenly over the powers of two (jqwik's default favours small ints). */
    @Provide
    Arbitrary<Integer> sizes() {
        return Arbitraries.frequencyOf(
                Tuple.of(1, Arbitraries.just(1)),
                Tuple.of(1, Arbitraries.just(8 << 20)),
                Tuple.of(8, logUniform(23)));
    }

    @Provide
    Arbitrary<Integer> chunks() {
        return logUniform(18);
    }

    static Arbitrary<Integer> logUniform(int maxExponent) {
        return Arbitraries.randomValue(r -> {
            int e = r.nextInt(maxExponent + 1);
            return (1 << e) + r.nextInt(1 << e);
        });
    }

    static void writeChunked(SockmapChannel ch, byte[] data, int chunk) {
        try {
            for (int off = 0; off < data.length; off += chunk) {
                ByteBuffer b = ByteBuffer.wrap(data, off, Math.min(chunk, data.length - off));
                while (b.hasRemaining()) {
                    ch.write(b);
                }
            }
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    static byte[] readChunked(SockmapChannel ch, int size, int chunk) {
        try {
            byte[] out = new byte[size];
            int got = 0;
            ByteBuffer buf = ByteBuffer.allocateDirect(chunk);
            while (got < size) {
                buf.clear().limit(Math.min(chunk, size - got));
                int n = ch.read(buf);
                if (n < 0) {
                    throw new IOException("early end of stream at " + got + " of " + size);
                }
                buf.flip().get(out, got, n);
                got += n;
            }
            return out;
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }
}
