package io.github.sockmap4j.netty;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.testbed.Await;
import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapStats;
import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.DefaultFileRegion;
import io.netty.channel.FileRegion;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import java.io.File;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Files sent as {@link DefaultFileRegion}s (sendfile) and as a user's own {@link FileRegion}s by
 * the transport to a transport reader slower than the writer: the writer's regions go in parts
 * its receiver's credit covers, so the file stays on the redirect as a stream of buffers does,
 * byte for byte in order.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@Tag("kernel")
class NettyFileRegionCreditTest {
    static final int FILE_BYTES = 2 << 20; // 16 times the first in-flight bound (128 KiB)
    static EventLoopGroup group;
    static Path file;

    @BeforeAll
    static void start() throws Exception {
        group = new MultiThreadIoEventLoopGroup(2, SockmapNetty.ioHandlerFactory());
        file = Files.createTempFile("sm4j-region", ".bin");
        try (FileChannel out = FileChannel.open(file, StandardOpenOption.WRITE)) {
            ByteBuffer b = ByteBuffer.allocate(1 << 20);
            for (long at = 0; at < FILE_BYTES; at += b.capacity()) {
                b.clear();
                for (int i = 0; i < b.capacity(); i += 8) {
                    b.putLong((at + i) / 8);
                }
                b.flip();
                while (b.hasRemaining()) {
                    out.write(b);
                }
            }
        }
    }

    @AfterAll
    static void stop() throws Exception {
        SockmapNetty.shutdown(java.time.Duration.ofSeconds(10), group);
        Files.deleteIfExists(file);
    }

    /**
     * Checks the stream against the file's (sent twice), one 64-bit value at a time: a reader
     * several times slower than a writer that sends from the page cache (with the module's paranoid
     * leak detection every access of a buffer records a stack trace). Reading a byte at a time, a
     * 64 KiB buffer took it 90-250 ms, past the 200 ms after which a writer takes a receiver for
     * one that reads nothing (the writer then rightly sends by TCP).
     */
    static final class SlowChecker extends ChannelInboundHandlerAdapter {
        final CompletableFuture<Long> done = new CompletableFuture<>();
        final long expected;
        long got;
        long nextLong;
        final byte[] partial = new byte[8];
        int partialLen;

        SlowChecker(long expected) {
            this.expected = expected;
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf b = (ByteBuf) msg;
            try {
                while (b.isReadable()) {
                    long v;
                    if (partialLen == 0 && b.readableBytes() >= 8) {
                        v = b.readLong();
                    } else {
                        partial[partialLen++] = b.readByte();
                        if (partialLen < 8) {
                            continue;
                        }
                        v = ByteBuffer.wrap(partial).getLong();
                        partialLen = 0;
                    }
                    if (v != nextLong) {
                        done.completeExceptionally(new AssertionError("at byte " + got + ": " + v + ", expected "
                                + nextLong));
                    }
                    nextLong = (nextLong + 1) % (FILE_BYTES / 8); // the file is sent twice
                    got += 8;
                }
            } finally {
                b.release();
            }
            if (got == expected) {
                done.complete(got);
            }
        }
    }

    @Test
    void regionsLargerThanTheBoundStayOnTheRedirectForASlowReader() throws Exception {
        SlowChecker checker = new SlowChecker(3L * FILE_BYTES);
        CompletableFuture<Channel> accepted = new CompletableFuture<>();
        Channel server = new ServerBootstrap().group(group).channelFactory(SockmapNetty.serverChannelFactory())
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ch.pipeline().addLast(checker);
                        accepted.complete(ch);
                    }
                }).bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0)).sync().channel();
        Channel client = null;
        try {
            Await.until("the bound port is opted in", () -> SockmapNetty.isOptedIn(server));
            client = new Bootstrap().group(group).channelFactory(SockmapNetty.socketChannelFactory())
                    .handler(new ChannelInboundHandlerAdapter()).connect(server.localAddress()).sync().channel();
            // Once the reader publishes its reads (a write before that is held to the watcher's estimate).
            NettyBoundAndWakeupTest.awaitBound(accepted.get(10, TimeUnit.SECONDS));
            SockmapStats before = Sockmap.global().stats();
            long waitsBefore = Sockmap.flowStats().creditWaits();
            // The file three times: as one region, in regions of 1 MiB (File-based, opened lazily),
            // and as a user's own region (not a DefaultFileRegion: the code before sent it whole,
            // and past the bound by TCP).
            client.write(new DefaultFileRegion(FileChannel.open(file), 0, FILE_BYTES));
            File f = file.toFile();
            for (long at = 0; at < FILE_BYTES; at += 1 << 20) {
                client.write(new DefaultFileRegion(f, at, 1 << 20));
            }
            FileChannel own = FileChannel.open(file);
            client.write(new OwnRegion(own, FILE_BYTES));
            client.flush();
            long got;
            try {
                got = checker.done.get(90, TimeUnit.SECONDS);
            } catch (java.util.concurrent.TimeoutException e) {
                throw new AssertionError("the reader got " + checker.got + " B in 90 s; stats " + Sockmap.global().stats()
                        + ", holding " + SockmapNetty.isHoldingForCredit(client), e);
            }
            SockmapStats after = Sockmap.global().stats();
            long redirected = after.bytesRedirected() - before.bytesRedirected();
            long passed = after.bytesPassed() - before.bytesPassed();
            System.out.printf(Locale.ROOT, "file regions to a slow reader: %d B read in order, %d B redirected (%.2f%%), "
                    + "%d B by TCP, %d bound hits%n", got, redirected, 100.0 * redirected / (redirected + passed),
                    passed, after.boundHits() - before.boundHits());
            long waits = Sockmap.flowStats().creditWaits() - waitsBefore;
            System.out.printf(Locale.ROOT, "file regions: the writer waited for credit %d times%n", waits);
            assertEquals(3L * FILE_BYTES, got);
            assertTrue(waits > 0, "the reader was slower than the writer: it held for credit");
            assertTrue(redirected > 0 && redirected >= 0.99 * (redirected + passed),
                    "redirected " + redirected + " B, by TCP " + passed);
        } finally {
            if (client != null) {
                client.close().sync();
            }
            server.close().sync();
        }
    }

    /** A file region of a user's own making, as Netty's SocketFileRegionTest has one: transferTo from a channel. */
    static final class OwnRegion extends io.netty.util.AbstractReferenceCounted implements FileRegion {
        private final FileChannel file;
        private final long count;
        private long transferred;

        OwnRegion(FileChannel file, long count) {
            this.file = file;
            this.count = count;
        }

        @Override
        public long position() {
            return 0;
        }

        @Override
        @Deprecated
        public long transfered() {
            return transferred;
        }

        @Override
        public long transferred() {
            return transferred;
        }

        @Override
        public long count() {
            return count;
        }

        @Override
        public long transferTo(java.nio.channels.WritableByteChannel target, long position) throws java.io.IOException {
            long n = file.transferTo(position, count - position, target);
            transferred += n;
            return n;
        }

        @Override
        public OwnRegion retain() {
            super.retain();
            return this;
        }

        @Override
        public OwnRegion retain(int increment) {
            super.retain(increment);
            return this;
        }

        @Override
        public OwnRegion touch() {
            return this;
        }

        @Override
        public OwnRegion touch(Object hint) {
            return this;
        }

        @Override
        protected void deallocate() {
            try {
                file.close();
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        }
    }
}
