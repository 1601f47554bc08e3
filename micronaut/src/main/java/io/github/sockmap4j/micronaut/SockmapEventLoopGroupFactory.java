package io.github.sockmap4j.micronaut;

import io.github.sockmap4j.netty.SockmapNetty;
import io.micronaut.context.annotation.BootstrapContextCompatible;
import io.micronaut.context.annotation.Requires;
import io.micronaut.http.netty.channel.EpollEventLoopGroupFactory;
import io.micronaut.http.netty.channel.EventLoopGroupConfiguration;
import io.micronaut.http.netty.channel.EventLoopGroupFactory;
import io.micronaut.http.netty.channel.NettyChannelType;
import io.micronaut.http.netty.channel.NioEventLoopGroupFactory;
import io.netty.channel.Channel;
import io.netty.channel.IoHandlerFactory;
import jakarta.inject.Named;
import jakarta.inject.Singleton;

/**
 * Micronaut 4's Netty server and HTTP client over sockmap4j's transport: the event loop group
 * factory named {@value #NAME}. Micronaut runs NIO unless told otherwise, and takes a factory
 * by the names listed for each event loop group; the server's acceptor has a setting of its own:
 *
 * <pre>{@code
 * micronaut.netty.event-loops.default.transport: sockmap,epoll,nio
 * micronaut.server.netty.parent.transport: sockmap,epoll,nio
 * }</pre>
 *
 * Micronaut's epoll factory in every respect (event loops, datagram and domain socket
 * channels, channels made from an inherited descriptor) but the TCP channels it makes: server
 * channels that opt their bound port in to {@code Sockmap.global()} while bound, and client
 * channels that publish their reads and wait for their receiver's credit. Where Netty's epoll
 * is unavailable, Micronaut's NIO factory with the transport's NIO channels.
 */
@Singleton
@Named(SockmapEventLoopGroupFactory.NAME)
@Requires(classes = SockmapNetty.class)
@BootstrapContextCompatible
public class SockmapEventLoopGroupFactory implements EventLoopGroupFactory {
    /** The name to list in {@code micronaut.netty.event-loops.*.transport}. */
    public static final String NAME = "sockmap";

    private final SockmapNetty transport = SockmapNetty.global();
    private final EventLoopGroupFactory base =
            SockmapNetty.isEpollAvailable() ? new EpollEventLoopGroupFactory() : new NioEventLoopGroupFactory();

    @Override
    @SuppressWarnings("removal") // still what Micronaut 4.10 calls when no configuration names a transport
    public IoHandlerFactory createIoHandlerFactory() {
        return SockmapNetty.ioHandlerFactory();
    }

    @Override
    public IoHandlerFactory createIoHandlerFactory(EventLoopGroupConfiguration configuration) {
        return SockmapNetty.ioHandlerFactory();
    }

    @Override
    public boolean isNative() {
        return SockmapNetty.isEpollAvailable();
    }

    @Override
    public Class<? extends Channel> channelClass(NettyChannelType type) {
        return base.channelClass(type);
    }

    @Override
    public Class<? extends Channel> channelClass(NettyChannelType type, EventLoopGroupConfiguration configuration) {
        return base.channelClass(type, configuration);
    }

    /** The transport's channels for TCP; Micronaut's own for datagrams and domain sockets. */
    @Override
    public Channel channelInstance(NettyChannelType type, EventLoopGroupConfiguration configuration) {
        return switch (type) {
            case SERVER_SOCKET -> transport.serverChannels(0).newChannel();
            case CLIENT_SOCKET -> transport.socketChannels().newChannel();
            default -> base.channelInstance(type, configuration);
        };
    }

    /** A channel over an inherited descriptor: Micronaut's own (it cannot be opted in here). */
    @Override
    public Channel channelInstance(NettyChannelType type, EventLoopGroupConfiguration configuration, Channel parent,
                                   int fd) {
        return base.channelInstance(type, configuration, parent, fd);
    }

    @Override
    public String toString() {
        return "SockmapEventLoopGroupFactory[" + transport + "]";
    }
}
