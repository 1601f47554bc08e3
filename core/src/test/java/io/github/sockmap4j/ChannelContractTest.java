package io.github.sockmap4j;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.testbed.Await;
import io.github.sockmap4j.testbed.Bpftool;
import io.github.sockmap4j.testsupport.TestKernel;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.ConnectException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.StandardProtocolFamily;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedByInterruptException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/**
 * One channel suite, run over the fast path and with the fast path forced off (as Netty runs
 * one socket suite over every transport): the bytes must be the same either way; only the
 * acceleration assertions differ.
 */
@SuppressWarnings("try")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 60, unit = TimeUnit.SECONDS)
@Tag("kernel")
abstract class ChannelContractTest {
    static final InetAddress V4 = InetAddress.getLoopbackAddress() instanceof java.net.Inet4Address
            ? InetAddress.getLoopbackAddress() : addr("127.0.0.1");
    static final InetAddress V6 = addr("::1");

    TestKernel kernel;
    Sockmap sockmap;

    /** Whether this run expects the redirect. */
    abstract boolean fastPath();

    SockmapConfig tweak(SockmapConfig c) {
        return c;
    }

    static InetAddress addr(String s) {
        try {
            return InetAddress.getByName(s);
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    @BeforeAll
    void startKernel() throws IOException {
        kernel = TestKernel.start(getClass().getSimpleName(), this::tweak);
        sockmap = kernel.sockmap;
        assertEquals(fastPath(), sockmap.isActive(), () -> "fast path state: " + sockmap);
    }

    @AfterAll
    void stopKernel() throws IOException {
        if (kernel != null) {
            kernel.close();
        }
    }

    static byte[] random(int n, long seed) {
        byte[] b = new byte[n];
        new Random(seed).nextBytes(b);
        return b;
    }

    static void readFully(SocketChannel ch, ByteBuffer dst) throws IOException {
        while (dst.hasRemaining()) {
            if (ch.read(dst) < 0) {
                throw new IOException("early end of stream, " + dst.remaining() + " bytes missing");
            }
        }
    }

    static void writeFully(SocketChannel ch, ByteBuffer src) throws IOException {
        while (src.hasRemaining()) {
            ch.write(src);
        }
    }

    /** The server side of one echoed connection. */
    record Echo(CompletableFuture<SockmapChannel> accepted, CompletableFuture<Void> done) {
        SockmapChannel channel() throws Exception {
            return accepted.get(30, TimeUnit.SECONDS);
        }
    }

    /** Accepts one connection on a SockmapServerChannel and echoes until end of stream. */
    Echo echoOnce(SockmapServerChannel server) {
        CompletableFuture<SockmapChannel> accepted = new CompletableFuture<>();
        CompletableFuture<Void> done = CompletableFuture.runAsync(() -> {
            try {
                SockmapChannel ch = (SockmapChannel) server.accept();
                accepted.complete(ch);
                try (ch) {
                    ByteBuffer buf = ByteBuffer.allocateDirect(64 * 1024);
                    while (ch.read(buf) >= 0) {
                        buf.flip();
                        writeFully(ch, buf);
                        buf.clear();
                    }
                    ch.shutdownOutput();
                }
            } catch (IOException e) {
                accepted.completeExceptionally(e);
                throw new java.io.UncheckedIOException(e);
            }
        }, TestThreads.POOL);
        return new Echo(accepted, done);
    }

    void assertAcceleration(SockmapChannel ch) {
        assertEquals(fastPath(), ch.isAccelerated(), () -> "isAccelerated of " + ch + ": " + ch.flowState());
    }

    /**
     * Sends {@code size} bytes, reads them back, checks the server side's acceleration while
     * the connection is established, then half-closes and waits for the echo to end.
     */
    private void roundTrip(SocketChannel client, Echo echo, int size) throws Exception {
        byte[] data = random(size, size);
        writeFully(client, ByteBuffer.wrap(data));
        ByteBuffer back = ByteBuffer.allocate(size);
        readFully(client, back);
        assertArrayEquals(data, back.array());
        assertAcceleration(echo.channel());
        client.shutdownOutput();
        assertEquals(-1, client.read(ByteBuffer.allocate(1)));
        echo.done().get(30, TimeUnit.SECONDS);
    }

    @Test
    void aWildcardPortTakesBothFamiliesAsTheJdksDoes() throws Exception {
        try (SockmapServerChannel server = kernel.sockmap.openServerChannel()) {
            server.bind(new java.net.InetSocketAddress(0)); // the IPv4 wildcard, as users write it
            int port = ((java.net.InetSocketAddress) server.getLocalAddress()).getPort();
            for (String host : new String[] {"127.0.0.1", "::1"}) {
                try (java.nio.channels.SocketChannel c = java.nio.channels.SocketChannel.open(
                        new java.net.InetSocketAddress(java.net.InetAddress.getByName(host), port));
                     java.nio.channels.SocketChannel accepted = server.accept()) {
                    assertTrue(c.isConnected() && accepted.isConnected(), host);
                }
            }
        }
    }

    @Test
    void sockmapChannelsEchoAndAreAccelerated() throws Exception {
        SockmapStats before = sockmap.stats();
        try (SockmapServerChannel server = sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(V4, 0));
            assertEquals(fastPath(), server.isOptedIn());
            Echo echo = echoOnce(server);
            try (SockmapChannel client = sockmap.openChannel()) {
                client.connect(server.getLocalAddress());
                assertAcceleration(client);
                roundTrip(client, echo, 4096);
            }
        }
        SockmapStats after = sockmap.stats();
        if (fastPath()) {
            assertTrue(after.socketsRegistered() >= before.socketsRegistered() + 2, () -> before + " -> " + after);
            assertTrue(after.bytesRedirected() >= before.bytesRedirected() + 2 * 4096, () -> before + " -> " + after);
        } else {
            assertEquals(before, after);
        }
    }

    @Test
    void gatheringWriteSendsEveryBufferInOrderInOneMessage() throws Exception {
        java.util.Random r = new java.util.Random(42);
        ByteBuffer[] bufs = new ByteBuffer[302];
        java.io.ByteArrayOutputStream expected = new java.io.ByteArrayOutputStream();
        for (int i = 0; i < bufs.length; i++) {
            byte[] b = random(i % 7 == 0 ? 0 : 1 + r.nextInt(900), i);
            bufs[i] = ByteBuffer.allocateDirect(b.length + 3).position(3);
            bufs[i].put(b).position(3);
            if (i > 0 && i < bufs.length - 1) { // the first and the last lie outside offset/length
                expected.write(b);
            }
        }
        try (SockmapServerChannel server = sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(V4, 0));
            try (SockmapChannel client = sockmap.openChannel()) {
                client.connect(server.getLocalAddress());
                try (SocketChannel side = server.accept()) {
                    SockmapStats before = sockmap.stats();
                    long n = client.write(bufs, 1, bufs.length - 2);
                    SockmapStats after = sockmap.stats();
                    assertEquals(expected.size(), n, "a blocking gathering write writes everything");
                    for (int i = 1; i < bufs.length - 1; i++) {
                        assertFalse(bufs[i].hasRemaining(), "buffer " + i + " consumed");
                    }
                    assertEquals(3, bufs[0].position());
                    assertEquals(3, bufs[bufs.length - 1].position());
                    ByteBuffer got = ByteBuffer.allocate(expected.size());
                    readFully(side, got);
                    assertArrayEquals(expected.toByteArray(), got.array());
                    if (fastPath()) {
                        long messages = after.messagesRedirected() - before.messagesRedirected();
                        long most = expected.size() / io.github.sockmap4j.internal.flow.SocketWriter.GATHER_BYTES + 2; // a sendmsg per 64 KiB gathered
                        assertTrue(messages >= 1 && messages <= most, () -> (bufs.length - 2) + " buffers of "
                                + expected.size() + " B redirected as " + messages + " messages, more than " + most);
                    }
                    // Heap and direct mixed: written buffer by buffer, the same bytes.
                    ByteBuffer[] mixed = {ByteBuffer.wrap(random(100, 1)), ByteBuffer.allocateDirect(50)};
                    assertEquals(150, client.write(mixed));
                    ByteBuffer rest = ByteBuffer.allocate(150);
                    readFully(side, rest);
                    assertArrayEquals(random(100, 1), java.util.Arrays.copyOf(rest.array(), 100));
                }
            }
        }
    }

    @Test
    void defaultDualStackSocketChannelIsRedirected() throws Exception {
        SockmapStats before = sockmap.stats();
        try (SockmapServerChannel server = sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(0)); // wildcard, dual-stack
            int port = ((InetSocketAddress) server.getLocalAddress()).getPort();
            Echo echo = echoOnce(server);
            try (SocketChannel client = SocketChannel.open(new InetSocketAddress(V4, port))) {
                roundTrip(client, echo, 10_000);
            }
        }
        if (fastPath()) {
            SockmapStats after = sockmap.stats();
            assertTrue(after.bytesRedirected() >= before.bytesRedirected() + 20_000, () -> before + " -> " + after);
        }
    }

    @Test
    void ipv4OnlySocketChannelIsRedirected() throws Exception {
        try (SockmapServerChannel server = sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(0));
            int port = ((InetSocketAddress) server.getLocalAddress()).getPort();
            Echo echo = echoOnce(server);
            try (SocketChannel client = SocketChannel.open(StandardProtocolFamily.INET)) {
                client.connect(new InetSocketAddress(V4, port));
                roundTrip(client, echo, 777);
            }
        }
    }

    @Test
    void ipv6LoopbackIsRedirected() throws Exception {
        try (SockmapServerChannel server = sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(V6, 0));
            Echo echo = echoOnce(server);
            try (SockmapChannel client = sockmap.openChannel()) {
                client.connect(server.getLocalAddress());
                assertAcceleration(client);
                roundTrip(client, echo, 3000);
            }
        }
    }

    @Test
    void plainJavaNetSocketIsRedirected() throws Exception {
        try (SockmapServerChannel server = sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(0));
            int port = ((InetSocketAddress) server.getLocalAddress()).getPort();
            Echo echo = echoOnce(server);
            byte[] data = random(5000, 5);
            try (Socket s = new Socket(V4, port)) {
                OutputStream out = s.getOutputStream();
                out.write(data);
                out.flush();
                InputStream in = s.getInputStream();
                byte[] back = in.readNBytes(data.length);
                assertArrayEquals(data, back);
                assertAcceleration(echo.channel());
                s.shutdownOutput();
                assertEquals(-1, in.read());
                echo.done().get(30, TimeUnit.SECONDS);
            }
        }
    }

    @Test
    void portNotOptedInGoesByPlainTcp() throws Exception {
        SockmapStats before = sockmap.stats();
        try (ServerSocketChannel server = ServerSocketChannel.open()) {
            server.bind(new InetSocketAddress(V4, 0));
            try (SockmapChannel client = sockmap.openChannel()) {
                client.connect(server.getLocalAddress());
                try (SocketChannel side = server.accept()) {
                    assertFalse(client.isAccelerated());
                    byte[] data = random(2048, 9);
                    writeFully(client, ByteBuffer.wrap(data));
                    ByteBuffer got = ByteBuffer.allocate(data.length);
                    readFully(side, got);
                    assertArrayEquals(data, got.array());
                }
            }
        }
        SockmapStats after = sockmap.stats();
        assertEquals(before.socketsRegistered(), after.socketsRegistered());
        assertEquals(before.bytesRedirected(), after.bytesRedirected());
    }

    @Test
    void nonBlockingWithSelector() throws Exception {
        try (SockmapServerChannel server = sockmap.openServerChannel();
             Selector selector = Sockmap.openSelector()) {
            server.bind(new InetSocketAddress(V4, 0));
            server.configureBlocking(false);
            server.register(selector, SelectionKey.OP_ACCEPT);
            SockmapChannel client = sockmap.openChannel();
            SockmapChannel accepted = null;
            try {
            client.configureBlocking(false);
            boolean connected = client.connect(server.getLocalAddress());
            client.register(selector, connected ? SelectionKey.OP_WRITE : SelectionKey.OP_CONNECT);
            byte[] data = random(200_000, 11);
            ByteBuffer out = ByteBuffer.wrap(data);
            ByteBuffer in = ByteBuffer.allocateDirect(data.length);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (in.hasRemaining() && System.nanoTime() < deadline) {
                selector.select(1000);
                for (var it = selector.selectedKeys().iterator(); it.hasNext(); ) {
                    SelectionKey k = it.next();
                    it.remove();
                    if (k.isAcceptable()) {
                        accepted = (SockmapChannel) server.accept();
                        accepted.configureBlocking(false);
                        accepted.register(selector, SelectionKey.OP_READ);
                    } else if (k.isConnectable()) {
                        assertTrue(client.finishConnect());
                        k.interestOps(SelectionKey.OP_WRITE);
                    } else if (k.isWritable()) {
                        client.write(out);
                        if (!out.hasRemaining()) {
                            k.interestOps(0);
                        }
                    } else if (k.isReadable()) {
                        assertTrue(((SockmapChannel) k.channel()).read(in) >= 0);
                    }
                }
            }
            assertFalse(in.hasRemaining(), "not all bytes arrived");
            in.flip();
            byte[] got = new byte[data.length];
            in.get(got);
            assertArrayEquals(data, got);
            pingBothWays(client, accepted); // non-blocking: writeFully and readFully spin
            assertAcceleration(client);
            } finally {
                client.close();
                if (accepted != null) {
                    accepted.close();
                }
                selector.selectNow(); // deregisters the cancelled keys and closes the fds
            }
        }
    }

    @Test
    void aSpinningNonBlockingReaderGetsEveryByteAndTheEnd() throws Exception {
        // The reader spins on read() as busy-polling services do: after empty reads it asks poll(2)
        // first (SockmapChannel's spin rule); nothing may be missed or come out of order, and the
        // end of the stream still shows. The writer sends each piece only after the reader found
        // nothing three times since the last one, so that every piece arrives at a spinning reader.
        byte[] data = random(256 << 10, 23);
        java.util.concurrent.atomic.AtomicLong empty = new java.util.concurrent.atomic.AtomicLong();
        try (SockmapServerChannel server = sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(V4, 0));
            try (SockmapChannel client = sockmap.openChannel()) {
                client.connect(server.getLocalAddress());
                CompletableFuture<Void> writer;
                try (SocketChannel side = server.accept()) {
                    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                    writer = CompletableFuture.runAsync(() -> {
                        Random sizes = new Random(5);
                        int at = 0;
                        try {
                            while (at < data.length) {
                                long seen = empty.get();
                                while (empty.get() < seen + 3 && System.nanoTime() < deadline) {
                                    Thread.onSpinWait();
                                }
                                int n = Math.min(data.length - at, 1 + sizes.nextInt(8192));
                                writeFully(side, ByteBuffer.wrap(data, at, n));
                                at += n;
                            }
                            side.shutdownOutput();
                        } catch (IOException e) {
                            throw new java.io.UncheckedIOException(e);
                        }
                    }, TestThreads.POOL);
                    client.configureBlocking(false);
                    ByteBuffer in = ByteBuffer.allocate(data.length + 1);
                    int n;
                    while ((n = client.read(in)) >= 0 && System.nanoTime() < deadline) {
                        if (n == 0) {
                            empty.incrementAndGet();
                            Thread.onSpinWait();
                        }
                    }
                    writer.get(30, TimeUnit.SECONDS);
                    assertEquals(-1, n, "the end of the stream shows");
                    assertEquals(data.length, in.position(), "every byte");
                    assertArrayEquals(data, java.util.Arrays.copyOf(in.array(), data.length));
                    assertAcceleration(client);
                }
            }
        }
    }

    @Test
    void halfCloseKeepsTheOtherDirection() throws Exception {
        try (SockmapServerChannel server = sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(V4, 0));
            try (SockmapChannel client = sockmap.openChannel()) {
                client.connect(server.getLocalAddress());
                try (SockmapChannel side = (SockmapChannel) server.accept()) {
                    writeFully(client, ByteBuffer.wrap(new byte[] {1, 2, 3}));
                    client.shutdownOutput();
                    ByteBuffer got = ByteBuffer.allocate(3);
                    readFully(side, got);
                    assertEquals(-1, side.read(ByteBuffer.allocate(1)), "FIN after the data");
                    byte[] reply = random(100_000, 3);
                    writeFully(side, ByteBuffer.wrap(reply));
                    side.shutdownOutput();
                    ByteBuffer back = ByteBuffer.allocate(reply.length);
                    readFully(client, back);
                    assertArrayEquals(reply, back.array());
                    assertEquals(-1, client.read(ByteBuffer.allocate(1)));
                    assertThrows(java.nio.channels.ClosedChannelException.class,
                            () -> client.write(ByteBuffer.wrap(new byte[1])));
                }
            }
        }
    }

    @Test
    void peerClosingWithDataQueuedLosesNothing() throws Exception {
        try (SockmapServerChannel server = sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(V4, 0));
            byte[] data = random(512 << 10, 21);
            try (SockmapChannel client = sockmap.openChannel()) {
                client.connect(server.getLocalAddress());
                try (SockmapChannel side = (SockmapChannel) server.accept()) {
                    CompletableFuture<Void> writer = CompletableFuture.runAsync(() -> {
                        try {
                            writeFully(client, ByteBuffer.wrap(data));
                            client.close();
                        } catch (IOException e) {
                            throw new java.io.UncheckedIOException(e);
                        }
                    }, TestThreads.POOL);
                    writer.get(30, TimeUnit.SECONDS);
                    ByteBuffer got = ByteBuffer.allocate(data.length);
                    readFully(side, got);
                    assertArrayEquals(data, got.array());
                    assertEquals(-1, side.read(ByteBuffer.allocate(1)));
                }
            }
        }
    }

    @Test
    void entriesLeaveTheMapWhenSocketsClose() throws Exception {
        long base = sockmap.stats().socketsInMap();
        try (SockmapServerChannel server = sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(V4, 0));
            SockmapChannel client = sockmap.openChannel();
            client.connect(server.getLocalAddress());
            SockmapChannel side = (SockmapChannel) server.accept();
            assertEquals(base + (fastPath() ? 2 : 0), sockmap.stats().socketsInMap());
            client.close();
            side.close();
        }
        assertEquals(base, sockmap.stats().socketsInMap());
        if (fastPath()) {
            assertEquals(0, Bpftool.awaitMapEntries(kernel.pinDir.resolve("rx"), 0), "read slots left");
            assertEquals(0, Bpftool.awaitMapEntries(kernel.pinDir.resolve("watch"), 0), "watch entries left");
        }
    }

    @Test
    void memorySegmentsNativeAndHeap() throws Exception {
        try (SockmapServerChannel server = sockmap.openServerChannel(); Arena arena = Arena.ofConfined()) {
            server.bind(new InetSocketAddress(V4, 0));
            try (SockmapChannel client = sockmap.openChannel()) {
                client.connect(server.getLocalAddress());
                try (SockmapChannel side = (SockmapChannel) server.accept()) {
                    MemorySegment src = arena.allocate(100_000);
                    for (long i = 0; i < src.byteSize(); i++) {
                        src.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 31));
                    }
                    assertEquals(src.byteSize(), client.write(src));
                    byte[] heap = new byte[(int) src.byteSize()];
                    MemorySegment dst = MemorySegment.ofArray(heap);
                    long got = 0;
                    while (got < heap.length) {
                        long n = side.read(dst.asSlice(got));
                        assertTrue(n > 0);
                        got += n;
                    }
                    assertEquals(-1, src.mismatch(dst));
                    // and back: heap source, native destination
                    assertEquals(heap.length, side.write(MemorySegment.ofArray(heap)));
                    MemorySegment back = arena.allocate(heap.length);
                    got = 0;
                    while (got < heap.length) {
                        got += client.read(back.asSlice(got));
                    }
                    assertEquals(-1, back.mismatch(src));
                }
            }
        }
    }

    @Test
    void largeTransfersBothWaysAtOnce() throws Exception {
        int size = 8 << 20;
        try (SockmapServerChannel server = sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(V4, 0));
            try (SockmapChannel client = sockmap.openChannel()) {
                client.connect(server.getLocalAddress());
                try (SockmapChannel side = (SockmapChannel) server.accept()) {
                    byte[] a = random(size, 1);
                    byte[] b = random(size, 2);
                    CompletableFuture<Void> w1 = CompletableFuture.runAsync(() -> write(client, a), TestThreads.POOL);
                    CompletableFuture<Void> w2 = CompletableFuture.runAsync(() -> write(side, b), TestThreads.POOL);
                    ByteBuffer gotA = ByteBuffer.allocateDirect(size);
                    ByteBuffer gotB = ByteBuffer.allocateDirect(size);
                    CompletableFuture<Void> r1 = CompletableFuture.runAsync(() -> read(side, gotA), TestThreads.POOL);
                    read(client, gotB);
                    CompletableFuture.allOf(w1, w2, r1).get(60, TimeUnit.SECONDS);
                    assertEquals(ByteBuffer.wrap(a), gotA.flip());
                    assertEquals(ByteBuffer.wrap(b), gotB.flip());
                    // Past the in-flight bound a sender goes by TCP; once its reader has read
                    // everything, its next send takes the redirect again.
                    pingBothWays(client, side);
                    assertAcceleration(client);
                    assertAcceleration(side);
                }
            }
        }
    }

    /** One byte each way, read at once: a sender held on TCP by the bound resumes on it. */
    static void pingBothWays(SocketChannel a, SocketChannel b) throws IOException {
        writeFully(a, ByteBuffer.wrap(new byte[] {1}));
        readFully(b, ByteBuffer.allocate(1));
        writeFully(b, ByteBuffer.wrap(new byte[] {2}));
        readFully(a, ByteBuffer.allocate(1));
    }

    static void write(SocketChannel ch, byte[] data) {
        try {
            writeFully(ch, ByteBuffer.wrap(data));
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    static void read(SocketChannel ch, ByteBuffer into) {
        try {
            readFully(ch, into);
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    @Test
    void refusedConnectionSaysSo() throws Exception {
        int port;
        try (ServerSocketChannel s = ServerSocketChannel.open()) {
            s.bind(new InetSocketAddress(V4, 0));
            port = ((InetSocketAddress) s.getLocalAddress()).getPort();
        }
        try (SockmapChannel client = sockmap.openChannel()) {
            ConnectException e = assertThrows(ConnectException.class,
                    () -> client.connect(new InetSocketAddress(V4, port)));
            assertTrue(e.getMessage().contains("refused"), e.getMessage());
        }
    }

    @Test
    void closeWakesABlockedReader() throws Exception {
        try (SockmapServerChannel server = sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(V4, 0));
            try (SockmapChannel client = sockmap.openChannel()) {
                client.connect(server.getLocalAddress());
                try (SockmapChannel side = (SockmapChannel) server.accept()) {
                    CountDownLatch reading = new CountDownLatch(1);
                    Thread[] readerThread = new Thread[1];
                    CompletableFuture<Throwable> reader = CompletableFuture.supplyAsync(() -> {
                        readerThread[0] = Thread.currentThread();
                        reading.countDown();
                        try {
                            side.read(ByteBuffer.allocate(10));
                            return null;
                        } catch (Throwable t) {
                            return t;
                        }
                    }, TestThreads.POOL);
                    assertTrue(reading.await(10, TimeUnit.SECONDS));
                    Await.until("the reader blocks in recv(2) or poll(2)", () -> inRecv(readerThread[0]));
                    side.close();
                    Throwable t = reader.get(10, TimeUnit.SECONDS);
                    // AsynchronousCloseException when the reader was in recv(2) (the usual case);
                    // a reader that had not reached it yet sees the channel closed.
                    assertTrue(t instanceof java.nio.channels.ClosedChannelException, String.valueOf(t));
                }
            }
        }
    }

    @Test
    void interruptClosesABlockedReader() throws Exception {
        try (SockmapServerChannel server = sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(V4, 0));
            try (SockmapChannel client = sockmap.openChannel()) {
                client.connect(server.getLocalAddress());
                try (SockmapChannel side = (SockmapChannel) server.accept()) {
                    Throwable[] seen = new Throwable[1];
                    Thread t = new Thread(() -> {
                        try {
                            side.read(ByteBuffer.allocate(10));
                        } catch (Throwable e) {
                            seen[0] = e;
                        }
                    });
                    t.start();
                    Await.until("the reader blocks in recv(2) or poll(2)", () -> inRecv(t));
                    t.interrupt();
                    t.join(10_000);
                    assertFalse(t.isAlive());
                    assertTrue(seen[0] instanceof ClosedByInterruptException, String.valueOf(seen[0]));
                    assertFalse(side.isOpen());
                }
            }
        }
    }

    /**
     * Whether {@code t} is inside the receive call or the poll(2) a blocking read of heap memory
     * waits in (no event says it got there).
     */
    static boolean inRecv(Thread t) {
        return Await.isIn(t, "io.github.sockmap4j.linux.ffi.LibC", "tryPoll")
                || Await.isIn(t, "io.github.sockmap4j.linux.ffi.LibC", "tryRecv");
    }

    @Test
    void unconnectedChannelReportsNoAddresses() throws Exception {
        try (SockmapChannel ch = sockmap.openChannel()) {
            assertNull(ch.getRemoteAddress());
            assertFalse(ch.isConnected());
            assertFalse(ch.isAccelerated());
            assertThrows(java.nio.channels.NotYetConnectedException.class, () -> ch.read(ByteBuffer.allocate(1)));
            assertThrows(UnsupportedOperationException.class, ch::socket);
        }
    }
}
