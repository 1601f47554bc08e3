package io.github.sockmap4j.netty;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.Sockmap;
import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoop;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.socket.SocketChannel;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@link SockmapNetty#shutdown} closes every channel of event loops that are busy when it
 * lands: the case in which Netty's {@code shutdownGracefully(0, ...)} lets a loop end with its
 * channels open (docs/use-it.md, "Shutting down event loops"). Each round: a group of three
 * loops, connections over the transport (both ends registered in the SOCKHASH), every loop kept
 * running tasks, then the shutdown; afterwards no channel may be open and none registered.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@Tag("kernel")
class EventLoopShutdownTest {
    private static final int ROUNDS = 10;
    private static final int CONNECTIONS = 12;

    /** On loops that sleep when idle, and on loops that poll before they sleep. */
    @ParameterizedTest(name = "polling {0}")
    @ValueSource(booleans = {false, true})
    void everyChannelOfBusyLoopsIsClosed(boolean polling) throws Exception {
        long registeredBefore = Sockmap.global().stats().socketsInMap();
        for (int round = 0; round < ROUNDS; round++) {
            List<Channel> channels = Collections.synchronizedList(new ArrayList<>());
            EventLoopGroup group = new MultiThreadIoEventLoopGroup(3, polling
                    ? SockmapNetty.ioHandlerFactory(Duration.ofNanos(200_000)) : SockmapNetty.ioHandlerFactory());
            try {
                open(group, channels);
                keepBusy(group);
                assertTrue(SockmapNetty.shutdown(Duration.ofSeconds(10), group), "the group ended within 10 s");
                List<Channel> open;
                synchronized (channels) {
                    open = channels.stream().filter(Channel::isOpen).toList();
                }
                assertEquals(List.of(), open, "round " + round + ": channels left open by the shutdown");
                assertEquals(2 * CONNECTIONS + 1, channels.size(), "every channel of the round was seen");
            } finally {
                closeLeftovers(group, channels);
            }
        }
        assertEquals(registeredBefore, Sockmap.global().stats().socketsInMap(), "sockets left in the SOCKHASH");
    }

    /**
     * What a failed round left: the channels' sockets closed directly, since their event loops
     * have ended and take no close any more.
     */
    private static void closeLeftovers(EventLoopGroup group, List<Channel> channels) {
        group.shutdownGracefully(0, 1, TimeUnit.SECONDS).awaitUninterruptibly(10_000);
        synchronized (channels) {
            for (Channel ch : channels) {
                try {
                    if (ch instanceof EpollSocketChannel s && s.fd().isOpen()) {
                        s.fd().close();
                    } else if (ch instanceof EpollServerSocketChannel s && s.fd().isOpen()) {
                        s.fd().close();
                    }
                } catch (java.io.IOException e) {
                    // closed meanwhile
                }
            }
        }
    }

    /** A server and {@link #CONNECTIONS} connected clients on {@code group}, all recorded in {@code channels}. */
    private static void open(EventLoopGroup group, List<Channel> channels) throws InterruptedException {
        CountDownLatch accepted = new CountDownLatch(CONNECTIONS);
        Channel server = new ServerBootstrap().group(group).channelFactory(SockmapNetty.serverChannelFactory())
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        channels.add(ch);
                        accepted.countDown();
                    }
                }).bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).sync().channel();
        channels.add(server);
        Bootstrap clients = new Bootstrap().group(group).channelFactory(SockmapNetty.socketChannelFactory())
                .handler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        // nothing: the test looks at the channels, not at what they read
                    }
                });
        for (int i = 0; i < CONNECTIONS; i++) {
            channels.add(clients.connect(server.localAddress()).sync().channel());
        }
        assertTrue(accepted.await(10, TimeUnit.SECONDS), "every connection accepted");
        for (Channel ch : channels) {
            // The loop notices nothing of these writes' echo; they only make each loop do I/O too.
            if (ch instanceof SocketChannel) {
                ch.writeAndFlush(ch.alloc().buffer(1).writeByte(1));
            }
        }
    }

    /**
     * Each loop runs a task that submits itself again until the loop is shutting down: the
     * loop is in its task phase nearly all the time, as a loop with traffic or timers often is.
     */
    private static void keepBusy(EventLoopGroup group) throws InterruptedException {
        CountDownLatch running = new CountDownLatch(3);
        for (io.netty.util.concurrent.EventExecutor e : group) {
            EventLoop loop = (EventLoop) e;
            loop.execute(new Runnable() {
                private boolean first = true;

                @Override
                public void run() {
                    if (first) {
                        first = false;
                        running.countDown();
                    }
                    if (!loop.isShuttingDown()) {
                        loop.execute(this);
                    }
                }
            });
        }
        assertTrue(running.await(10, TimeUnit.SECONDS), "every loop running");
    }
}
