package io.github.sockmap4j.netty;

import io.github.sockmap4j.OptIn;
import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapUnavailableException;
import io.netty.channel.ChannelDuplexHandler;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelPromise;
import java.net.Inet4Address;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Sits in a server channel's pipeline and opts its port in to its transport's {@link Sockmap} as part of
 * the bind: the bind's future completes only once the rule is in place, so a client that connects
 * as soon as {@code bind().sync()} returns is redirected. The opt-in goes when the channel closes.
 * Where the fast path is off, the bind succeeds on plain TCP with a WARN, unless
 * {@code sockmap4j.require=true}: then the bind fails with a {@link SockmapUnavailableException}
 * and the channel is closed.
 */
@ChannelHandler.Sharable
final class OptInOnBind extends ChannelDuplexHandler {
    private static final Logger LOG = LoggerFactory.getLogger(OptInOnBind.class);
    private final SockmapNetty transport;
    /** The in-flight bound of the port's connections in bytes, 0 for each receiver's default. */
    private final int bound;

    OptInOnBind(SockmapNetty transport, int bound) {
        this.transport = transport;
        this.bound = bound;
    }

    @Override
    public void bind(ChannelHandlerContext ctx, SocketAddress localAddress, ChannelPromise promise) {
        ChannelPromise listening = ctx.newPromise();
        listening.addListener(f -> {
            if (!f.isSuccess()) {
                promise.tryFailure(f.cause());
                return;
            }
            try {
                optIn(ctx);
                promise.trySuccess();
            } catch (SockmapUnavailableException e) {
                ctx.channel().close();
                promise.tryFailure(e);
            }
        });
        ctx.bind(localAddress, listening);
    }

    private void optIn(ChannelHandlerContext ctx) {
        if (!(ctx.channel().localAddress() instanceof InetSocketAddress where)) {
            return;
        }
        Sockmap sockmap = transport.sockmap(); // the global one throws when required and off
        try {
            OptIn optIn = where.getAddress().isAnyLocalAddress()
                    ? sockmap.optIn(where.getPort(), null, 0, bound)
                    : sockmap.optIn(where.getPort(), where.getAddress(),
                            where.getAddress() instanceof Inet4Address ? 32 : 128, bound);
            ctx.channel().attr(SockmapNetty.OPT_IN).set(optIn);
            ctx.channel().closeFuture().addListener(f -> optIn.close());
        } catch (java.io.IOException | RuntimeException e) {
            if (sockmap.config().required()) {
                throw new SockmapUnavailableException("sockmap4j.require=true but port " + where.getPort()
                        + " could not be opted in: " + e.getMessage(), e);
            }
            LOG.warn("Could not opt {} in to the sockmap fast path; it serves over plain TCP: {}", where,
                    e.getMessage());
        }
    }

    /**
     * An accepted child, on its way to ServerBootstrap's acceptor: it publishes its reads and
     * holds its writes for its receiver's credit.
     */
    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) throws Exception {
        if (msg instanceof io.netty.channel.epoll.EpollSocketChannel child) {
            SockmapNetty.addHandlers(child, transport.sockmap(), true);
        }
        ctx.fireChannelRead(msg);
    }
}
