package io.github.sockmap4j.netty;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapStats;
import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.socket.SocketChannel;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** A Netty echo over the transport: the port is opted in and both ends are redirected. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
@Tag("kernel")
class NettyFastPathTest {
    static EventLoopGroup group;

    @BeforeAll
    static void start() {
        group = new MultiThreadIoEventLoopGroup(2, SockmapNetty.ioHandlerFactory());
    }

    @AfterAll
    static void stop() {
        SockmapNetty.shutdown(java.time.Duration.ofSeconds(10), group);
    }

    @Test
    void echoIsRedirectedBothWays() throws Exception {
        assertTrue(SockmapNetty.isEpollAvailable(), "Netty epoll is needed for the fast path here");
        CompletableFuture<Channel> child = new CompletableFuture<>();
        Channel server = new ServerBootstrap().group(group).channelFactory(SockmapNetty.serverChannelFactory())
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        child.complete(ch);
                        ch.pipeline().addLast(new SimpleChannelInboundHandler<ByteBuf>() {
                            @Override
                            protected void channelRead0(ChannelHandlerContext ctx, ByteBuf msg) {
                                ctx.writeAndFlush(msg.retain());
                            }
                        });
                    }
                }).bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0)).sync().channel();
        try {
            // The opt-in is part of the bind: a client connecting once bind().sync() returns is redirected.
            assertTrue(SockmapNetty.isOptedIn(server), "the bound port is opted in when the bind completes");
            // Under the first in-flight bound (SO_RCVBUF): a larger burst than the reader takes at
            // once would go partly by TCP, by design (docs/in-flight-bound.md).
            byte[] data = new byte[96 << 10];
            new Random(1).nextBytes(data);
            ByteBuf received = Unpooled.buffer(data.length);
            CompletableFuture<Void> done = new CompletableFuture<>();
            SockmapStats before = Sockmap.global().stats();
            Channel client = new Bootstrap().group(group).channelFactory(SockmapNetty.socketChannelFactory())
                    .handler(new SimpleChannelInboundHandler<ByteBuf>() {
                        @Override
                        protected void channelRead0(ChannelHandlerContext ctx, ByteBuf msg) {
                            received.writeBytes(msg);
                            if (received.readableBytes() == data.length) {
                                done.complete(null);
                            }
                        }
                    }).connect(server.localAddress()).sync().channel();
            try {
                assertTrue(SockmapNetty.isAccelerated(client), "client end");
                assertTrue(SockmapNetty.isAccelerated(child.get(10, TimeUnit.SECONDS)), "server end");
                client.writeAndFlush(Unpooled.wrappedBuffer(data)).sync();
                done.get(30, TimeUnit.SECONDS);
                byte[] got = new byte[data.length];
                received.readBytes(got);
                assertArrayEquals(data, got);
                SockmapStats after = Sockmap.global().stats();
                assertTrue(after.bytesRedirected() >= before.bytesRedirected() + 2L * data.length,
                        () -> before + " -> " + after);
            } finally {
                client.close().sync();
                received.release();
            }
        } finally {
            server.close().sync();
        }
        assertFalse(SockmapNetty.isOptedIn(server), "closing the server opts its port out");
    }

    @Test
    void eachEndOfANettyConnectionIsAJfrEventWithoutAStack() throws Exception {
        java.nio.file.Path file = java.nio.file.Files.createTempFile("sockmap4j-netty", ".jfr");
        try (jdk.jfr.Recording r = new jdk.jfr.Recording()) {
            r.enable("io.github.sockmap4j.Connection");
            r.start();
            Channel server = new ServerBootstrap().group(group).channelFactory(SockmapNetty.serverChannelFactory())
                    .childHandler(new SimpleChannelInboundHandler<ByteBuf>() {
                        @Override
                        protected void channelRead0(ChannelHandlerContext ctx, ByteBuf msg) {
                            ctx.writeAndFlush(msg.retain());
                        }
                    }).bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0)).sync().channel();
            try {
                CompletableFuture<Void> echoed = new CompletableFuture<>();
                Channel client = new Bootstrap().group(group).channelFactory(SockmapNetty.socketChannelFactory())
                        .handler(new SimpleChannelInboundHandler<ByteBuf>() {
                            @Override
                            protected void channelRead0(ChannelHandlerContext ctx, ByteBuf msg) {
                                echoed.complete(null);
                            }
                        }).connect(server.localAddress()).sync().channel();
                // Both ends were active before the echo came back: their events are in.
                client.writeAndFlush(Unpooled.wrappedBuffer(new byte[] {42})).sync();
                echoed.get(30, TimeUnit.SECONDS);
                client.close().sync();
            } finally {
                server.close().sync();
            }
            r.stop();
            r.dump(file);
            java.util.List<jdk.jfr.consumer.RecordedEvent> conns = jdk.jfr.consumer.RecordingFile.readAllEvents(file)
                    .stream().filter(e -> e.getEventType().getName().equals("io.github.sockmap4j.Connection")).toList();
            org.junit.jupiter.api.Assertions.assertEquals(2, conns.size(), "one event per end: " + conns);
            assertTrue(conns.stream().allMatch(e -> e.getBoolean("accelerated")), conns.toString());
            assertTrue(conns.stream().allMatch(e -> e.getStackTrace() == null), "no stack trace: " + conns);
        } finally {
            java.nio.file.Files.deleteIfExists(file);
        }
    }
}
