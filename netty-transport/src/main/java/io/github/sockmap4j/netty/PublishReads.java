package io.github.sockmap4j.netty;

import io.github.sockmap4j.spi.RawSockets;
import io.github.sockmap4j.spi.ReadCounter;
import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.epoll.EpollSocketChannel;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * First in an epoll socket channel's pipeline: publishes how many bytes the channel has read,
 * so that its peer's redirect stays under this receiver's in-flight bound instead of falling
 * back to TCP on a watcher's estimate (docs/in-flight-bound.md). One store per read.
 *
 * <p><b>Note:</b> not sharable: one per channel, used from its event loop.
 */
final class PublishReads extends ChannelInboundHandlerAdapter {
    static final String NAME = "sockmap4j-publish-reads";
    private static final Logger LOG = LoggerFactory.getLogger(PublishReads.class);
    private final RawSockets sockets;
    private final boolean serverSide;
    private ReadCounter counter;
    private boolean begun;

    PublishReads(RawSockets sockets, boolean serverSide) {
        this.sockets = sockets;
        this.serverSide = serverSide;
    }

    @Override
    public void channelActive(ChannelHandlerContext ctx) throws Exception {
        begin(ctx);
        ctx.fireChannelActive();
    }

    /** At the connect, or at the first read where this handler did not see the connect. */
    private void begin(ChannelHandlerContext ctx) {
        if (begun || !(ctx.channel() instanceof EpollSocketChannel ch)) {
            return;
        }
        begun = true;
        try {
            counter = sockets.readCounter(ch.fd().intValue(), serverSide);
        } catch (java.io.IOException | RuntimeException e) {
            LOG.debug("{} publishes no reads: {}", ch, e.toString());
        }
        sockets.recordConnection(ch.fd().intValue(), bound());
    }

    /** The bound this channel sets as a receiver, or -1 when it publishes nothing. */
    int bound() {
        ReadCounter c = counter;
        return c == null ? -1 : c.bound();
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) throws Exception {
        if (!begun) {
            begin(ctx);
        }
        ReadCounter c = counter;
        if (c != null && msg instanceof ByteBuf buf && buf.isReadable()) {
            c.onRead(buf.readableBytes());
        }
        ctx.fireChannelRead(msg);
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) throws Exception {
        release();
        ctx.fireChannelInactive();
    }

    /**
     * Taken out of the pipeline of an open channel (Vert.x's HTTP client clears the pipeline of a
     * new connection but for its TLS handler): puts a successor back, after {@link HoldForCredit}
     * or first, counting on from this one's count. A closed channel's handlers just go.
     */
    @Override
    public void handlerRemoved(ChannelHandlerContext ctx) {
        ReadCounter c = counter;
        if (ctx.channel().isActive() && ctx.pipeline().get(PublishReads.class) == null) {
            counter = null;
            PublishReads next = new PublishReads(sockets, serverSide);
            next.begun = begun;
            next.counter = c;
            if (ctx.pipeline().get(HoldForCredit.NAME) != null) {
                ctx.pipeline().addAfter(HoldForCredit.NAME, NAME, next);
            } else {
                ctx.pipeline().addFirst(NAME, next);
            }
            return;
        }
        release();
    }

    private void release() {
        ReadCounter c = counter;
        counter = null;
        if (c != null) {
            c.close();
        }
    }
}
