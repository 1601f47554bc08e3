package io.github.sockmap4j.netty.grpc;

import io.github.sockmap4j.colocated.grpc.ChannelConnections;
import io.github.sockmap4j.colocated.grpc.ReadLoop;
import io.netty.channel.ChannelFactory;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.socket.SocketChannel;
import java.net.SocketAddress;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Consumer;
import java.util.function.Function;

/**
 * A channel builder's TCP connections, each found by its local address: the lifeline of the
 * co-located connection agreed on it, which ends when the TCP connection does (its peer closed,
 * reset, or killed: the kernel ends the TCP connection of a killed process); and which servers the
 * channel is connected to, so that one that balances over several keeps its calls where its
 * balancer puts them.
 */
final class TcpLifelines implements ChannelFactory<SocketChannel>, Function<SocketAddress, CompletionStage<?>>,
        ReadLoop.Finder, ChannelConnections {
    private final ChannelFactory<SocketChannel> channels;
    private final Set<SocketChannel> open = ConcurrentHashMap.newKeySet();
    private final List<Consumer<SocketAddress>> connected = new CopyOnWriteArrayList<>();

    TcpLifelines(ChannelFactory<SocketChannel> channels) {
        this.channels = channels;
    }

    @Override
    public SocketChannel newChannel() {
        SocketChannel ch = channels.newChannel();
        open.add(ch);
        ch.closeFuture().addListener(f -> open.remove(ch));
        // first in the pipeline until the connection is made, then gone: no cost on its reads
        ch.pipeline().addFirst(new ChannelInboundHandlerAdapter() {
            @Override
            public void channelActive(ChannelHandlerContext ctx) throws Exception {
                ctx.pipeline().remove(this);
                SocketAddress server = ctx.channel().remoteAddress();
                if (server != null) {
                    for (Consumer<SocketAddress> c : connected) {
                        c.accept(server);
                    }
                }
                super.channelActive(ctx);
            }
        });
        return ch;
    }

    @Override
    public Set<SocketAddress> remotes() {
        Set<SocketAddress> servers = new HashSet<>();
        for (SocketChannel ch : open) {
            SocketAddress server = ch.isActive() ? ch.remoteAddress() : null;
            if (server != null) {
                servers.add(server);
            }
        }
        return servers;
    }

    @Override
    public void onConnected(Consumer<SocketAddress> c) {
        connected.add(c);
    }

    /** Completes when the open connection whose local address is {@code local} closes; null if none is open. */
    @Override
    public CompletionStage<?> apply(SocketAddress local) {
        for (SocketChannel ch : open) {
            if (local != null && local.equals(ch.localAddress())) { // the call's attribute is this very value
                CompletableFuture<Void> closed = new CompletableFuture<>();
                ch.closeFuture().addListener(f -> closed.complete(null));
                return closed;
            }
        }
        return null;
    }

    /** The event loop of the open connection from {@code local}, where it is an epoll loop; else null. */
    @Override
    public ReadLoop readLoopFor(SocketAddress local) {
        for (SocketChannel ch : open) {
            if (local != null && local.equals(ch.localAddress())) {
                return EpollReadLoop.of(ch.eventLoop());
            }
        }
        return null;
    }

    @Override
    public String toString() {
        return channels + " with co-located lifelines";
    }
}
