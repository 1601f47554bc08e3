package io.github.sockmap4j.netty;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.testsupport.RedirectedShare;
import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.epoll.EpollChannelOption;
import io.netty.channel.socket.SocketChannel;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * What frameworks do to the channels they are given, done here with plain Netty: a client
 * socket with quick ACKs off (Vert.x's default), and a pipeline cleared after the connect but
 * for its TLS handler (Vert.x's HTTP client). A first write larger than the in-flight bound
 * stays on the redirect all the same.
 */
@Tag("kernel")
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class FrameworkHabitsTest {
    static final int SIZE = 256 << 10;
    static EventLoopGroup group;

    @BeforeAll
    static void start() {
        group = new MultiThreadIoEventLoopGroup(2, SockmapNetty.ioHandlerFactory());
    }

    @AfterAll
    static void stop() {
        SockmapNetty.shutdown(Duration.ofSeconds(10), group);
    }

    /** A server that counts what it reads; the future completes at {@code SIZE} bytes. */
    private static Channel sink(CompletableFuture<Void> all) throws Exception {
        AtomicLong got = new AtomicLong();
        return new ServerBootstrap().group(group).channelFactory(SockmapNetty.serverChannelFactory())
                .childHandler(new SimpleChannelInboundHandler<ByteBuf>() {
                    @Override
                    protected void channelRead0(ChannelHandlerContext ctx, ByteBuf msg) {
                        if (got.addAndGet(msg.readableBytes()) >= SIZE) {
                            all.complete(null);
                        }
                    }
                }).bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0)).sync().channel();
    }

    @Test
    void quickAcksOffTheFirstLargeWriteStaysOnTheRedirect() throws Exception {
        CompletableFuture<Void> all = new CompletableFuture<>();
        Channel server = sink(all);
        try {
            RedirectedShare share = RedirectedShare.start(Sockmap.global());
            Channel client = new Bootstrap().group(group).channelFactory(SockmapNetty.socketChannelFactory())
                    .option(EpollChannelOption.TCP_QUICKACK, false)
                    .handler(new ChannelInboundHandlerAdapter()).connect(server.localAddress()).sync().channel();
            try {
                client.writeAndFlush(Unpooled.wrappedBuffer(new byte[SIZE])).sync();
                all.get(30, TimeUnit.SECONDS);
                share.assertRedirected(0.99, SIZE, "quick ACKs off");
                share.assertNoBoundHits("quick ACKs off");
            } finally {
                client.close().sync();
            }
        } finally {
            server.close().sync();
        }
    }

    @Test
    void aClearedPipelineGetsTheTransportsHandlersBack() throws Exception {
        CompletableFuture<Void> all = new CompletableFuture<>();
        Channel server = sink(all);
        try {
            Channel client = new Bootstrap().group(group).channelFactory(SockmapNetty.socketChannelFactory())
                    .handler(new ChannelInboundHandlerAdapter()).connect(server.localAddress()).sync().channel();
            try {
                // As Vert.x's HTTP client does once connected: every handler but TLS goes.
                client.eventLoop().submit(() -> {
                    List<ChannelHandler> all2 = new ArrayList<>();
                    client.pipeline().forEach(e -> {
                        if (!(e.getValue() instanceof io.netty.handler.ssl.SslHandler)) {
                            all2.add(e.getValue());
                        }
                    });
                    all2.forEach(client.pipeline()::remove);
                    client.pipeline().addLast("codec", new ChannelInboundHandlerAdapter());
                }).sync();
                List<String> names = client.pipeline().names();
                assertEquals(List.of(HoldForCredit.NAME, PublishReads.NAME, "codec"), names.subList(0, 3), names::toString);
                assertTrue(SockmapNetty.isTransportChannel(client));
                RedirectedShare share = RedirectedShare.start(Sockmap.global());
                client.writeAndFlush(Unpooled.wrappedBuffer(new byte[SIZE])).sync();
                all.get(30, TimeUnit.SECONDS);
                share.assertRedirected(0.99, SIZE, "cleared pipeline");
                share.assertNoBoundHits("cleared pipeline");
            } finally {
                client.close().sync();
            }
        } finally {
            server.close().sync();
        }
    }

    @Test
    void aClosedChannelsHandlersStayGone() throws Exception {
        CompletableFuture<Void> all = new CompletableFuture<>();
        Channel server = sink(all);
        try {
            Channel client = new Bootstrap().group(group).channelFactory(SockmapNetty.socketChannelFactory())
                    .handler(new ChannelInboundHandlerAdapter()).connect(server.localAddress()).sync().channel();
            client.close().sync();
            // The teardown runs once the loop has processed the deregistration, which Netty 4.2's
            // IoHandler completes on a later turn of the loop than close()'s future: wait for it.
            java.util.function.Supplier<List<String>> names = () -> {
                try {
                    return client.eventLoop().submit(() -> client.pipeline().names()).get();
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            };
            io.github.sockmap4j.testbed.Await.until("the closed channel's pipeline is torn down",
                    () -> names.get().stream().noneMatch(n -> n.startsWith("sockmap4j-")));
            client.eventLoop().submit(() -> { }).sync(); // and nothing put them back meanwhile
            assertTrue(names.get().stream().noneMatch(n -> n.startsWith("sockmap4j-")), () -> names.get().toString());
        } finally {
            server.close().sync();
        }
    }
}
