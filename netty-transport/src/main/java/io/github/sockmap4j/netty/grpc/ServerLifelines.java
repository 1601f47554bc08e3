package io.github.sockmap4j.netty.grpc;

import io.github.sockmap4j.colocated.grpc.ReadLoop;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFactory;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.socket.ServerSocketChannel;
import java.net.SocketAddress;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A server's accepted TCP connections, each found by its peer's address: where the co-located
 * connection agreed on one is read, on the event loop that serves it ({@link ReadLoop.Finder}).
 * Each server channel made here notes the connections it accepts, as they pass to Netty's
 * acceptor, until they close.
 */
final class ServerLifelines implements ChannelFactory<ServerSocketChannel>, ReadLoop.Finder {
    private final ChannelFactory<ServerSocketChannel> servers;
    private final Map<SocketAddress, Channel> accepted = new ConcurrentHashMap<>();
    private final ChannelHandler noting = new Noting();

    ServerLifelines(ChannelFactory<ServerSocketChannel> servers) {
        this.servers = servers;
    }

    @Override
    public ServerSocketChannel newChannel() {
        ServerSocketChannel ch = servers.newChannel();
        ch.pipeline().addLast(noting);
        return ch;
    }

    /** The event loop of the accepted connection from {@code remote}, where it is an epoll loop; else null. */
    @Override
    public ReadLoop readLoopFor(SocketAddress remote) {
        Channel ch = remote == null ? null : accepted.get(remote);
        return ch == null || !ch.isActive() ? null : EpollReadLoop.of(ch.eventLoop());
    }

    @ChannelHandler.Sharable
    private final class Noting extends ChannelInboundHandlerAdapter {
        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            if (msg instanceof Channel child && child.remoteAddress() != null) {
                SocketAddress remote = child.remoteAddress();
                accepted.put(remote, child);
                child.closeFuture().addListener(f -> accepted.remove(remote, child));
            }
            ctx.fireChannelRead(msg);
        }
    }

    @Override
    public String toString() {
        return servers + " with co-located lifelines";
    }
}
