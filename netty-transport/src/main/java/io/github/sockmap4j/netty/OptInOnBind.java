package io.github.sockmap4j.netty;

import io.github.sockmap4j.OptIn;
import io.github.sockmap4j.Sockmap;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import java.net.Inet4Address;
import java.net.InetSocketAddress;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Sits in a server channel's pipeline: when the channel becomes active (bound and listening)
 * it opts the bound port in to {@link Sockmap#global()}; when it closes, it opts it out.
 * Connections accepted before the opt-in lands (a race of microseconds at bind) stay on TCP.
 */
@ChannelHandler.Sharable
final class OptInOnBind extends ChannelInboundHandlerAdapter {
    private static final Logger LOG = LoggerFactory.getLogger(OptInOnBind.class);
    static final OptInOnBind INSTANCE = new OptInOnBind(0);

    /** The in-flight bound of the port's connections in bytes, 0 for each receiver's default. */
    private final int bound;

    OptInOnBind(int bound) {
        this.bound = bound;
    }

    @Override
    public void channelActive(ChannelHandlerContext ctx) throws Exception {
        if (ctx.channel().localAddress() instanceof InetSocketAddress bound) {
            try {
                Sockmap sockmap = Sockmap.global();
                OptIn optIn = bound.getAddress().isAnyLocalAddress()
                        ? sockmap.optIn(bound.getPort(), null, 0, this.bound)
                        : sockmap.optIn(bound.getPort(), bound.getAddress(),
                                bound.getAddress() instanceof Inet4Address ? 32 : 128, this.bound);
                ctx.channel().attr(SockmapNetty.OPT_IN).set(optIn);
                ctx.channel().closeFuture().addListener(f -> optIn.close());
            } catch (java.io.IOException | RuntimeException e) {
                LOG.warn("Could not opt {} in to the sockmap fast path; it serves over plain TCP: {}", bound,
                        e.getMessage());
            }
        }
        ctx.fireChannelActive();
    }

    /**
     * An accepted child, on its way to ServerBootstrap's acceptor: it publishes its reads and
     * holds its writes for its receiver's credit.
     */
    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) throws Exception {
        if (msg instanceof io.netty.channel.epoll.EpollSocketChannel child) {
            SockmapNetty.addHandlers(child, true);
        }
        ctx.fireChannelRead(msg);
    }
}
