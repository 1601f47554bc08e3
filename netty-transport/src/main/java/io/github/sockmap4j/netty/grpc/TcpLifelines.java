package io.github.sockmap4j.netty.grpc;

import io.github.sockmap4j.colocated.grpc.ReadLoop;
import io.netty.channel.ChannelFactory;
import io.netty.channel.socket.SocketChannel;
import java.net.SocketAddress;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;

/**
 * A channel builder's TCP connections, each found by its local address: the lifeline of the
 * co-located connection agreed on it, which ends when the TCP connection does (its peer closed,
 * reset, or killed: the kernel ends the TCP connection of a killed process).
 */
final class TcpLifelines implements ChannelFactory<SocketChannel>, Function<SocketAddress, CompletionStage<?>>,
        ReadLoop.Finder {
    private final ChannelFactory<SocketChannel> channels;
    private final Set<SocketChannel> open = ConcurrentHashMap.newKeySet();

    TcpLifelines(ChannelFactory<SocketChannel> channels) {
        this.channels = channels;
    }

    @Override
    public SocketChannel newChannel() {
        SocketChannel ch = channels.newChannel();
        open.add(ch);
        ch.closeFuture().addListener(f -> open.remove(ch));
        return ch;
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
