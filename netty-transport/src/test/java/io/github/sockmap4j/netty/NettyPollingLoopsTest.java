package io.github.sockmap4j.netty;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapStats;
import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.socket.SocketChannel;
import java.time.Duration;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * {@link NettyBoundAndWakeupTest}'s bytes, order, wake-ups and credit on event loops that poll
 * before they sleep ({@link SockmapNetty#ioHandlerFactory(Duration)}, here polling whatever the
 * CPUs' pressure), and a ping-pong whose replies the polls catch.
 */
class NettyPollingLoopsTest extends NettyBoundAndWakeupTest {
    static final Duration POLL = Duration.ofNanos(200_000);

    /** Loops that poll whatever the CPUs' pressure (PollingBacksOffTest tries the gate). */
    @Override
    IoHandlerFactory loops() {
        return PollBeforeBlock.factory(SockmapNetty.ioHandlerFactory(), POLL.toNanos(), CpuRoom.ALWAYS);
    }

    /**
     * Request after reply over one redirected connection, each reply checked against its request:
     * the loops poll between them, and the polls find the replies and the caller's writes.
     */
    @org.junit.jupiter.api.Test
    void pingPongRepliesComeInOrderAndThePollsCatchThem() throws Exception {
        // One CPU: no loop polls (PollingOnOneCpuTest); the rest of this test needs two.
        if (Runtime.getRuntime().availableProcessors() < 2) {
            assertFalse(PollBeforeBlock.polls(loops()));
            return;
        }
        assertTrue(PollBeforeBlock.polls(loops()));
        BlockingQueue<ByteBuf> replies = new LinkedBlockingQueue<>();
        Channel server = server(new ChannelInitializer<SocketChannel>() {
            @Override
            protected void initChannel(SocketChannel ch) {
                ch.pipeline().addLast(new SimpleChannelInboundHandler<ByteBuf>() {
                    @Override
                    protected void channelRead0(ChannelHandlerContext ctx, ByteBuf msg) {
                        ctx.writeAndFlush(msg.retain());
                    }
                });
            }
        }, true);
        Channel client = new Bootstrap().group(group).channelFactory(SockmapNetty.socketChannelFactory())
                .handler(new SimpleChannelInboundHandler<ByteBuf>() {
                    @Override
                    protected void channelRead0(ChannelHandlerContext ctx, ByteBuf msg) {
                        replies.add(msg.retain());
                    }
                }).connect(server.localAddress()).sync().channel();
        try {
            SockmapStats before = Sockmap.global().stats();
            SockmapNetty.PollCounts countsBefore = SockmapNetty.pollCounts();
            int size = 64;
            long offset = 0;
            for (int i = 0; i < 2000; i++) {
                byte[] msg = new byte[size];
                for (int b = 0; b < size; b++) {
                    msg[b] = streamByte(offset + b);
                }
                client.writeAndFlush(Unpooled.wrappedBuffer(msg));
                int got = 0;
                while (got < size) {
                    ByteBuf r = replies.poll(10, TimeUnit.SECONDS);
                    assertTrue(r != null, "reply " + i + " came within 10 s");
                    try {
                        for (int b = r.readerIndex(); b < r.writerIndex(); b++, got++) {
                            assertEquals(streamByte(offset + got), r.getByte(b), "byte " + (offset + got));
                        }
                    } finally {
                        r.release();
                    }
                }
                assertEquals(size, got, "reply " + i + " is as long as its request");
                offset += size;
            }
            SockmapStats after = Sockmap.global().stats();
            assertTrue(after.messagesRedirected() - before.messagesRedirected() >= 4000,
                    () -> "the fast path carried both ways: " + before + " -> " + after);
            SockmapNetty.PollCounts counts = SockmapNetty.pollCounts();
            long hits = counts.pollsThatFoundWork() - countsBefore.pollsThatFoundWork();
            assertTrue(hits > 0, "a poll found a reply or a write in 2000 round trips");
            System.out.printf("polling loops: %d polls found work, %d sleeps, in 2000 round trips%n", hits,
                    counts.sleeps() - countsBefore.sleeps());
        } finally {
            client.close().sync();
            server.close().sync();
        }
    }

    @org.junit.jupiter.api.Test
    void aPollLongerThanAMillisecondOrNegativeIsRefusedWithItsLimit() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> SockmapNetty.ioHandlerFactory(Duration.ofMillis(2)));
        assertTrue(e.getMessage().contains("PT0.001S"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> SockmapNetty.ioHandlerFactory(Duration.ofNanos(-1)));
        assertFalse(PollBeforeBlock.polls(SockmapNetty.ioHandlerFactory(Duration.ZERO)));
    }
}
