package io.github.sockmap4j.arrow;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.testbed.Await;
import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapStats;
import io.github.sockmap4j.arrow.netty.ArrowBatchDecoder;
import io.github.sockmap4j.arrow.netty.ArrowBatchEncoder;
import io.github.sockmap4j.netty.SockmapNetty;
import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.epoll.EpollIoHandler;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.VectorLoader;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.VectorUnloader;
import org.apache.arrow.vector.ipc.message.ArrowRecordBatch;
import org.apache.arrow.vector.types.pojo.Schema;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** VectorSchemaRoot batches through a Netty pipeline on the sockmap transport, ArrowBuf to ByteBuf and back. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@Tag("kernel")
class NettyArrowTest {
    static final int ROWS = 1000;
    static final int DIM = 768;
    static final int BATCHES = 12;

    /** Loads every batch into a root of the sender's schema and checks it against the expected batch. */
    static final class Check extends ChannelInboundHandlerAdapter {
        final BufferAllocator allocator;
        final VectorSchemaRoot want;
        final CompletableFuture<Integer> done = new CompletableFuture<>();
        final AtomicInteger equal = new AtomicInteger();
        VectorSchemaRoot got;
        int n;

        Check(BufferAllocator allocator, VectorSchemaRoot want) {
            this.allocator = allocator;
            this.want = want;
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            if (msg instanceof Schema schema) {
                got = VectorSchemaRoot.create(schema, allocator);
            } else if (msg instanceof ArrowRecordBatch batch) {
                try (batch) {
                    new VectorLoader(got).load(batch);
                }
                equal.addAndGet(want.equals(got) ? 1 : 0);
                if (++n == BATCHES) {
                    got.close();
                    done.complete(equal.get());
                }
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            done.completeExceptionally(cause);
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            if (got != null && n < BATCHES) {
                got.close();
            }
            done.completeExceptionally(new IllegalStateException("closed after " + n + " batches"));
        }
    }

    @Test
    void batchesCrossAPipelineIntactThroughTheRedirect() throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(2, EpollIoHandler.newFactory());
        try (BufferAllocator a = new RootAllocator();
             BufferAllocator sendA = a.newChildAllocator("send", 0, Long.MAX_VALUE);
             BufferAllocator recvA = a.newChildAllocator("receive", 0, Long.MAX_VALUE);
             VectorSchemaRoot root = ArrowBridgeTest.embeddings(sendA, ROWS, DIM, 5)) {
            Check check = new Check(recvA, root);
            Channel server = new ServerBootstrap().group(group)
                    // The default bound (the receive buffer, autotuned): back-to-back 3 MB batches
                    // would pass it, so the writer holds for credit and stays on the redirect
                    // (docs/in-flight-bound.md).
                    .channelFactory(SockmapNetty.serverChannelFactory())
                    .childHandler(new ChannelInitializer<>() {
                        @Override
                        protected void initChannel(Channel ch) {
                            ch.pipeline().addLast(new ArrowBatchDecoder(recvA, 64 << 20), check);
                        }
                    }).bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0)).sync().channel();
            // The opt-in lands on the event loop just after bind (loading the programs on first use).
            Await.until("the server's port is opted in", () -> SockmapNetty.isOptedIn(server));
            Channel client = new Bootstrap().group(group).channelFactory(SockmapNetty.socketChannelFactory())
                    .handler(new ArrowBatchEncoder()).connect(server.localAddress()).sync().channel();
            assertTrue(SockmapNetty.isOptedIn(server), "the server's port is opted in");
            SockmapStats before = Sockmap.global().stats();
            long body = 0;
            client.write(root.getSchema());
            for (int i = 0; i < BATCHES; i++) {
                ArrowRecordBatch batch = new VectorUnloader(root).getRecordBatch();
                body += batch.computeBodyLength();
                client.writeAndFlush(batch);
            }
            assertEquals(BATCHES, check.done.get(60, TimeUnit.SECONDS), "batches equal to what was sent");
            client.close().sync();
            server.close().sync();
            SockmapStats after = Sockmap.global().stats();
            long redirected = after.bytesRedirected() - before.bytesRedirected();
            long passed = after.bytesPassed() - before.bytesPassed();
            System.out.printf("netty arrow: %d B redirected, %d B by TCP (%.4f%% redirected), %d bound hits%n",
                    redirected, passed, 100.0 * redirected / (redirected + passed),
                    after.boundHits() - before.boundHits());
            assertTrue(redirected >= body,
                    "redirected " + redirected + " B, passed " + passed + " B, bodies " + body + " B");
            assertTrue(redirected * 1000 >= (redirected + passed) * 999L, "at least 99.9% redirected: "
                    + redirected + " B redirected, " + passed + " B by TCP");
        } finally {
            SockmapNetty.shutdown(java.time.Duration.ofSeconds(10), group);
        }
    }

    @Test
    void bytesThatAreNotAnArrowStreamAreAClearErrorAndLeakNothing() {
        try (BufferAllocator a = new RootAllocator()) {
            io.netty.channel.embedded.EmbeddedChannel ch =
                    new io.netty.channel.embedded.EmbeddedChannel(new ArrowBatchDecoder(a, 1 << 20));
            io.netty.buffer.ByteBuf junk = io.netty.buffer.Unpooled.copiedBuffer(
                    "GET / HTTP/1.1\r\nHost: x\r\n\r\n", java.nio.charset.StandardCharsets.US_ASCII);
            io.netty.handler.codec.DecoderException e = org.junit.jupiter.api.Assertions.assertThrows(
                    io.netty.handler.codec.DecoderException.class, () -> ch.writeInbound(junk));
            assertTrue(e.getMessage().contains("not an Arrow IPC stream"), e.getMessage());
            ch.finishAndReleaseAll();
        }
    }
}
