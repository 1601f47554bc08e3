package io.github.sockmap4j.netty;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.github.sockmap4j.testbed.Await;
import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.socket.SocketChannel;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Polling loops and a polling executor with the JVM's gate ({@link CpuRoom}), on plain loopback
 * TCP (the gate does not depend on the redirect): while more threads spin than there are CPUs,
 * the gate shuts, the loops and the executor sleep without polling and every reply still comes
 * whole and in order; once the spinning stops, the gate opens again and polls find work.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class PollingBacksOffTest {
    @Test
    void busyCpusStopThePollsAndEveryReplyStillComes() throws Exception {
        assumeTrue(Runtime.getRuntime().availableProcessors() >= 2 && Epoll.isAvailable(),
                "polling needs two CPUs and epoll (PollingOnOneCpuTest covers one)");
        CpuRoom room = CpuRoom.shared();
        assumeTrue(room.source() != null, "no CPU pressure reads here: the gate stays open (CpuRoom)");
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(2, SockmapNetty.ioHandlerFactory(Duration.ofNanos(200_000)));
        PollingExecutor executor = new PollingExecutor("backs-off", Duration.ofNanos(50_000));
        BlockingQueue<ByteBuf> replies = new LinkedBlockingQueue<>();
        AtomicBoolean stop = new AtomicBoolean();
        List<Thread> busy = new ArrayList<>();
        Channel server = null;
        Channel client = null;
        try {
            server = new ServerBootstrap().group(group).channel(EpollServerSocketChannel.class)
                    .childHandler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel ch) {
                            ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                                @Override
                                public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                    // The reply goes by the executor, as a gRPC handler's would.
                                    executor.execute(() -> ctx.writeAndFlush(msg));
                                }
                            });
                        }
                    }).bind(new InetSocketAddress("127.0.0.1", 0)).sync().channel();
            client = new Bootstrap().group(group).channel(EpollSocketChannel.class)
                    .handler(new SimpleChannelInboundHandler<ByteBuf>() {
                        @Override
                        protected void channelRead0(ChannelHandlerContext ctx, ByteBuf msg) {
                            replies.add(msg.retain());
                        }
                    }).connect(server.localAddress()).sync().channel();
            long offset = pingPong(client, replies, 0, 200); // the windows open

            for (int i = 0; i < 2 * Runtime.getRuntime().availableProcessors() + 1; i++) {
                Thread t = new Thread(() -> {
                    while (!stop.get()) {
                        Thread.onSpinWait();
                    }
                }, "spin-" + i);
                t.setDaemon(true);
                t.start();
                busy.add(t);
            }
            Await.until("the gate shuts while threads spin (" + room.source() + ")", Duration.ofSeconds(20),
                    () -> !room.hasRoom());
            SockmapNetty.PollCounts loopsBefore = SockmapNetty.pollCounts();
            long execSkipsBefore = executor.skippedForBusyCpus();
            offset = pingPong(client, replies, offset, 300);
            handOver(executor, 500);
            SockmapNetty.PollCounts loops = SockmapNetty.pollCounts();
            assertTrue(loops.skippedForBusyCpus() > loopsBefore.skippedForBusyCpus(),
                    "the loops left polls out while the CPUs were busy: " + loopsBefore + " -> " + loops);
            assertTrue(executor.skippedForBusyCpus() > execSkipsBefore,
                    "the executor left polls out: " + execSkipsBefore + " -> " + executor.skippedForBusyCpus());

            stop.set(true);
            for (Thread t : busy) {
                t.join();
            }
            Await.until("the gate opens once the spinning stops", Duration.ofSeconds(20), room::hasRoom);
            long hitsBefore = executor.pollHits();
            pingPong(client, replies, offset, 200);
            // Tasks handed over while the gate is open: the executor's threads poll and find some. The
            // host's own load may shut the gate again for a while (a build beside the test): then the
            // next batch, once it is open.
            boolean found = Await.holdsWithin(Duration.ofSeconds(30), () -> {
                if (room.hasRoom()) {
                    handOver(executor, 500);
                }
                return executor.pollHits() > hitsBefore;
            });
            System.out.printf("while busy: the loops left out %d polls, the executor %d; then %d tasks found polling%n",
                    loops.skippedForBusyCpus() - loopsBefore.skippedForBusyCpus(),
                    executor.skippedForBusyCpus() - execSkipsBefore, executor.pollHits() - hitsBefore);
            assertTrue(found, "with room again, the executor's threads poll and find tasks");
        } finally {
            stop.set(true);
            for (Thread t : busy) {
                t.join();
            }
            if (client != null) {
                client.close().sync();
            }
            if (server != null) {
                server.close().sync();
            }
            SockmapNetty.shutdown(Duration.ofSeconds(10), group);
            ByteBuf left;
            while ((left = replies.poll()) != null) {
                left.release();
            }
        }
    }

    /** {@code n} tasks, each handed over once the last ran: an executor thread's window opens. */
    private static void handOver(PollingExecutor e, int n) throws InterruptedException {
        for (int i = 0; i < n; i++) {
            java.util.concurrent.CountDownLatch ran = new java.util.concurrent.CountDownLatch(1);
            e.execute(ran::countDown);
            assertTrue(ran.await(10, TimeUnit.SECONDS), "task " + i + " ran within 10 s");
        }
    }

    /** {@code n} requests of 64 bytes, each reply checked byte by byte against its request; the new offset. */
    private static long pingPong(Channel client, BlockingQueue<ByteBuf> replies, long offset, int n) throws Exception {
        for (int i = 0; i < n; i++) {
            byte[] msg = new byte[64];
            for (int b = 0; b < msg.length; b++) {
                msg[b] = (byte) ((offset + b) * 31);
            }
            client.writeAndFlush(Unpooled.wrappedBuffer(msg));
            int got = 0;
            while (got < msg.length) {
                ByteBuf r = replies.poll(10, TimeUnit.SECONDS);
                assertTrue(r != null, "reply " + i + " came within 10 s");
                try {
                    for (int b = r.readerIndex(); b < r.writerIndex(); b++, got++) {
                        assertEquals((byte) ((offset + got) * 31), r.getByte(b), "byte " + (offset + got));
                    }
                } finally {
                    r.release();
                }
            }
            assertEquals(msg.length, got, "reply " + i + " is as long as its request");
            offset += msg.length;
        }
        return offset;
    }
}
