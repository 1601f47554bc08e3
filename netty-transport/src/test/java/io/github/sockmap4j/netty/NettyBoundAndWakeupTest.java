package io.github.sockmap4j.netty;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.testbed.Await;
import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapStats;
import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.channel.socket.SocketChannel;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/**
 * Netty's edge-triggered epoll over the redirect (docs/kernel.md, "Wake-ups and FIONREAD") and
 * the in-flight bound seen from Netty (docs/in-flight-bound.md), on loops that sleep when idle;
 * {@link NettyPollingLoopsTest} runs the same on loops that poll before they sleep.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@Tag("kernel")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class NettyBoundAndWakeupTest {
    EventLoopGroup group;

    /** The loops the tests run on. */
    IoHandlerFactory loops() {
        return SockmapNetty.ioHandlerFactory();
    }

    @BeforeAll
    void start() {
        group = new MultiThreadIoEventLoopGroup(2, loops());
    }

    @AfterAll
    void stop() {
        SockmapNetty.shutdown(java.time.Duration.ofSeconds(10), group);
    }

    Channel server(ChannelInitializer<SocketChannel> child, boolean autoRead) throws Exception {
        Channel s = new ServerBootstrap().group(group).channelFactory(SockmapNetty.serverChannelFactory())
                .childOption(ChannelOption.AUTO_READ, autoRead).childHandler(child)
                .bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0)).sync().channel();
        Await.until("the bound port is opted in", () -> SockmapNetty.isOptedIn(s));
        return s;
    }

    @Test
    void manyConnectionsManySmallMessagesNeverStall() throws Exception {
        int connections = 50;
        int messages = 2000;
        int size = 100;
        long expected = (long) messages * size;
        List<CompletableFuture<Void>> done = new ArrayList<>();
        List<AtomicLong> got = new ArrayList<>();
        Channel server = server(new ChannelInitializer<>() {
            @Override
            protected void initChannel(SocketChannel ch) {
                AtomicLong counter = new AtomicLong();
                CompletableFuture<Void> f = new CompletableFuture<>();
                synchronized (got) {
                    got.add(counter);
                    done.add(f);
                }
                ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                    @Override
                    public void channelRead(ChannelHandlerContext ctx, Object msg) {
                        ByteBuf b = (ByteBuf) msg;
                        // Each byte says where in the stream it belongs: one lost, doubled or
                        // out of order fails the connection.
                        String wrong = notTheStream(b, counter.get());
                        if (wrong != null) {
                            f.completeExceptionally(new AssertionError(wrong));
                        }
                        if (counter.addAndGet(b.readableBytes()) == expected) {
                            f.complete(null);
                        }
                        b.release();
                    }
                });
            }
        }, true);
        SockmapStats before = Sockmap.global().stats();
        List<Channel> clients = new ArrayList<>();
        try {
            for (int c = 0; c < connections; c++) {
                clients.add(new Bootstrap().group(group).channelFactory(SockmapNetty.socketChannelFactory())
                        .handler(new ChannelInboundHandlerAdapter()).connect(server.localAddress()).sync().channel());
            }
            for (int m = 0; m < messages; m++) {
                byte[] msg = new byte[size];
                for (int i = 0; i < size; i++) {
                    msg[i] = streamByte((long) m * size + i);
                }
                for (Channel ch : clients) {
                    ch.writeAndFlush(Unpooled.wrappedBuffer(msg));
                }
            }
            // Every byte arrives: an edge lost on the redirect would leave a connection waiting.
            Await.until("every connection received everything", Duration.ofSeconds(60),
                    () -> done.size() == connections);
            CompletableFuture.allOf(done.toArray(CompletableFuture[]::new)).get(60, TimeUnit.SECONDS);
            SockmapStats after = Sockmap.global().stats();
            assertTrue(after.messagesRedirected() - before.messagesRedirected() > messages,
                    () -> "the fast path carried them: " + before + " -> " + after);
        } finally {
            for (Channel ch : clients) {
                ch.close().sync();
            }
            server.close().sync();
        }
    }

    /**
     * A receiver that stops reading: the writer's credit runs out at the receiver's bound, its
     * writes wait (in the pipeline, then, once the receiver has read nothing for 200 ms, behind
     * the kernel's bound and TCP's window), the channel turns unwritable, and it becomes writable
     * again once the receiver reads.
     */
    @Test
    void aReceiverWithAutoReadOffHoldsTheWriterBackAndMakesItUnwritable() throws Exception {
        CompletableFuture<Channel> accepted = new CompletableFuture<>();
        Channel server = server(new ChannelInitializer<>() {
            @Override
            protected void initChannel(SocketChannel ch) {
                accepted.complete(ch);
            }
        }, false);
        AtomicLong written = new AtomicLong();
        CountDownLatch unwritable = new CountDownLatch(1);
        Channel client = new Bootstrap().group(group).channelFactory(SockmapNetty.socketChannelFactory())
                .option(ChannelOption.WRITE_BUFFER_WATER_MARK, new WriteBufferWaterMark(128 << 10, 256 << 10))
                .handler(new ChannelInboundHandlerAdapter() {
                    @Override
                    public void channelWritabilityChanged(ChannelHandlerContext ctx) {
                        if (!ctx.channel().isWritable()) {
                            unwritable.countDown();
                        }
                    }
                }).connect(server.localAddress()).sync().channel();
        try {
            Channel child = accepted.get(10, TimeUnit.SECONDS);
            SockmapStats before = Sockmap.global().stats();
            byte[] chunk = new byte[16 << 10];
            // Write whenever Netty says writable, until nothing more completes for 500 ms: the
            // reader reads nothing, so only backpressure can stop the writer.
            long lastChange = System.nanoTime();
            long lastWritten = -1;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (System.nanoTime() < deadline) {
                if (client.isWritable()) {
                    client.writeAndFlush(Unpooled.wrappedBuffer(chunk))
                            .addListener(f -> written.addAndGet(chunk.length));
                } else {
                    Await.holdsWithin(Duration.ofMillis(50), client::isWritable);
                }
                long now = written.get();
                if (now != lastWritten) {
                    lastWritten = now;
                    lastChange = System.nanoTime();
                } else if (System.nanoTime() - lastChange > TimeUnit.MILLISECONDS.toNanos(500)) {
                    break;
                }
            }
            long atStop = written.get();
            assertTrue(System.nanoTime() < deadline, "the writer was never held back: " + atStop + " B written");
            assertTrue(unwritable.await(1, TimeUnit.SECONDS), "the writer never turned unwritable");
            assertFalse(client.isWritable());
            // Credit held it first; a receiver that reads nothing at all for 200 ms is not waited
            // for, so from then on the kernel's bound holds it, with TCP's window.
            SockmapStats held = Sockmap.global().stats();
            assertTrue(SockmapNetty.isHoldingForCredit(client) || held.boundHits() > before.boundHits(),
                    "credit or the kernel's bound, not the redirect, stopped it");
            // Reading drains it; the writer becomes writable again.
            child.config().setAutoRead(true);
            Await.until("the writer is writable again once the reader read", Duration.ofSeconds(20),
                    client::isWritable);
            System.out.printf("netty auto-read off: the writer was held back after %d B%n", atStop);
        } finally {
            client.close().sync();
            // The accepted end too: left to the group's shutdown, it was once still open (ESTAB, its
            // receive queue full) after the class ended, the one leak the per-class check has named.
            if (accepted.isDone()) {
                accepted.get().close().sync();
            }
            server.close().sync();
        }
    }

    @Test
    void aPortsBoundIsSetOnTheServerChannelFactory() throws Exception {
        CompletableFuture<Channel> accepted = new CompletableFuture<>();
        Channel server = new ServerBootstrap().group(group).channelFactory(SockmapNetty.serverChannelFactory(48 << 10))
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        accepted.complete(ch);
                    }
                }).bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0)).sync().channel();
        try {
            Await.until("the bound port is opted in", () -> SockmapNetty.isOptedIn(server));
            Channel client = new Bootstrap().group(group).channelFactory(SockmapNetty.socketChannelFactory())
                    .handler(new ChannelInboundHandlerAdapter()).connect(server.localAddress()).sync().channel();
            try {
                Channel child = accepted.get(10, TimeUnit.SECONDS);
                // Both ends publish their reads under the port's bound (from channelActive, on
                // their event loops).
                assertEquals(48 << 10, awaitBound(child));
                assertEquals(48 << 10, awaitBound(client));
                assertThrows(IllegalArgumentException.class, () -> SockmapNetty.serverChannelFactory(-1));
            } finally {
                client.close().sync();
            }
        } finally {
            server.close().sync();
        }
    }

    /**
     * A server that writes past its client's bound before its own channel is active (a handler
     * that writes as it is added, as HTTP/2's does) holds for that client while the client's loop
     * is busy for three stall times writing requests and reads nothing: a receiver that still
     * sends is running, and the server's own reads, published once its channel is active, say so.
     * Before, the server looked for its own read slot once, at its first hold, found none yet,
     * took the busy client for a stalled one after 200 ms and sent the rest by TCP (a bound hit:
     * how {@code GrpcOnEventLoopsTest} failed about one clean-clone CI run in six).
     */
    @Test
    void aServerThatWritesFirstHoldsForAClientBusySending() throws Exception {
        int bound = 48 << 10;
        long total = 4L * bound;
        CompletableFuture<Channel> accepted = new CompletableFuture<>();
        Channel server = new ServerBootstrap().group(group).channelFactory(SockmapNetty.serverChannelFactory(bound))
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        accepted.complete(ch);
                        byte[] all = new byte[(int) total];
                        for (int i = 0; i < all.length; i++) {
                            all[i] = streamByte(i);
                        }
                        ch.writeAndFlush(Unpooled.wrappedBuffer(all)); // before channelActive
                    }
                }).bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0)).sync().channel();
        AtomicLong got = new AtomicLong();
        AtomicLong sentBack = new AtomicLong();
        CompletableFuture<Void> whole = new CompletableFuture<>();
        try {
            Await.until("the bound port is opted in", () -> SockmapNetty.isOptedIn(server));
            SockmapStats before = Sockmap.global().stats();
            Channel client = new Bootstrap().group(group).channelFactory(SockmapNetty.socketChannelFactory())
                    .handler(new ChannelInboundHandlerAdapter() {
                        @Override
                        public void channelActive(ChannelHandlerContext ctx) {
                            // The server's end publishing its reads first (its own loop): whether this
                            // client's first writes find a reader there is otherwise a race between the
                            // two loops' start, with this loop about to be busy and so unable to look
                            // again; not what this test is about.
                            try {
                                awaitBound(accepted.get(10, TimeUnit.SECONDS));
                            } catch (Exception e) {
                                whole.completeExceptionally(e);
                            }
                            // The loop busy writing for three times the 200 ms stall time, reading nothing.
                            byte[] request = new byte[4096];
                            long from = System.nanoTime();
                            while (System.nanoTime() - from < TimeUnit.MILLISECONDS.toNanos(600)) {
                                ctx.writeAndFlush(Unpooled.wrappedBuffer(request));
                                sentBack.addAndGet(request.length);
                                java.util.concurrent.locks.LockSupport.parkNanos(1_000_000);
                            }
                            ctx.fireChannelActive();
                        }

                        @Override
                        public void channelRead(ChannelHandlerContext ctx, Object msg) {
                            ByteBuf b = (ByteBuf) msg;
                            String wrong = notTheStream(b, got.get());
                            if (wrong != null) {
                                whole.completeExceptionally(new AssertionError(wrong));
                            }
                            if (got.addAndGet(b.readableBytes()) == total) {
                                whole.complete(null);
                            }
                            b.release();
                        }
                    }).connect(server.localAddress()).sync().channel();
            try {
                whole.get(30, TimeUnit.SECONDS);
                SockmapStats after = Sockmap.global().stats();
                System.out.printf("netty, a server writing %d B first to a client busy sending %d B: %d B by TCP, "
                        + "%d bound hits%n", total, sentBack.get(), after.bytesPassed() - before.bytesPassed(),
                        after.boundHits() - before.boundHits());
                assertEquals(0, after.boundHits() - before.boundHits(), "the kernel's bound was never hit");
                assertEquals(0, after.bytesPassed() - before.bytesPassed(), "no byte went by TCP");
            } finally {
                client.close().sync();
            }
        } finally {
            if (accepted.isDone()) {
                accepted.get().close().sync();
            }
            server.close().sync();
        }
    }

    /** The byte at {@code offset} of every test stream: a period (251) that no write size divides. */
    static byte streamByte(long offset) {
        return (byte) (offset % 251);
    }

    /**
     * Where the readable bytes of {@code b}, at {@code offset} of a test stream, differ from it:
     * null when they do not. One bulk copy out of the buffer: a check a byte at a time, under the
     * module's paranoid leak detection (a stack trace recorded at every access of a buffer), took
     * a reader hundreds of milliseconds per 48 KiB read, long enough for its writer to take it
     * for a stalled receiver and stop holding (a bound hit that the code under test did not cause).
     */
    static String notTheStream(ByteBuf b, long offset) {
        byte[] got = new byte[b.readableBytes()];
        b.getBytes(b.readerIndex(), got);
        for (int i = 0; i < got.length; i++) {
            if (got[i] != streamByte(offset + i)) {
                return "byte " + (offset + i) + " of a stream is " + got[i] + ", not " + streamByte(offset + i);
            }
        }
        return null;
    }

    static int awaitBound(Channel ch) throws Exception {
        PublishReads p = ch.pipeline().get(PublishReads.class);
        Await.holdsWithin(Duration.ofSeconds(5), () -> p.bound() >= 0);
        return p.bound();
    }
}
