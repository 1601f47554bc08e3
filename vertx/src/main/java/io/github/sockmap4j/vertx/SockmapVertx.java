package io.github.sockmap4j.vertx;

import io.github.sockmap4j.netty.SockmapNetty;
import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFactory;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.ServerChannel;
import io.netty.channel.socket.DatagramChannel;
import io.netty.channel.socket.InternetProtocolFamily;
import io.vertx.core.datagram.DatagramSocketOptions;
import io.vertx.core.net.ClientOptionsBase;
import io.vertx.core.net.NetServerOptions;
import io.vertx.core.transport.Transport;
import java.net.SocketAddress;
import java.util.Objects;
import java.util.concurrent.ThreadFactory;

/**
 * A Vert.x 5 transport over sockmap4j's Netty transport, installed with one line:
 *
 * <pre>{@code
 * Vertx vertx = Vertx.builder().withTransport(SockmapVertx.transport()).build();
 * }</pre>
 *
 * Vert.x's epoll transport in every respect (event loops, channel options, datagrams, domain
 * sockets) but the TCP channels: its server channels opt their bound port in while bound, and
 * its client and accepted channels publish their reads and wait for their receiver's credit.
 * {@code NetServer}, {@code NetClient}, {@code HttpServer} and {@code HttpClient} of that
 * Vert.x instance take the fast path. Where Netty's epoll is unavailable it is Vert.x's NIO
 * transport with the same TCP channels of NIO (the transport says why at start).
 *
 * <p>Written against the transport SPI of Vert.x 5.0 ({@code io.vertx.core.spi.transport.Transport}),
 * which changed in 5.1.
 */
public final class SockmapVertx {
    private SockmapVertx() {
    }

    /** The transport over {@code Sockmap.global()}. */
    public static Transport transport() {
        return transport(SockmapNetty.global());
    }

    /**
     * The transport over the fast path of {@code transport} ({@link SockmapNetty#of}).
     *
     * @param transport the Netty transport whose channels Vert.x's TCP connections are
     * @return the transport to install with {@code Vertx.builder().withTransport(...)}
     */
    public static Transport transport(SockmapNetty transport) {
        Objects.requireNonNull(transport, "transport");
        Transport base = SockmapNetty.isEpollAvailable() ? Transport.EPOLL : Transport.NIO;
        Impl impl = new Impl(base.implementation(), transport);
        return new Transport() {
            @Override
            public String name() {
                return "sockmap4j";
            }

            @Override
            public boolean available() {
                return base.available();
            }

            @Override
            public Throwable unavailabilityCause() {
                return base.unavailabilityCause();
            }

            @Override
            public io.vertx.core.spi.transport.Transport implementation() {
                return impl;
            }

            @Override
            public String toString() {
                return "SockmapVertx.transport(" + base.name() + ", " + transport + ")";
            }
        };
    }

    /** Vert.x's own transport of the same kind, with the fast path's TCP channels. */
    private static final class Impl implements io.vertx.core.spi.transport.Transport {
        private final io.vertx.core.spi.transport.Transport base;
        private final ChannelFactory<? extends ServerChannel> servers;
        private final ChannelFactory<? extends Channel> clients;

        Impl(io.vertx.core.spi.transport.Transport base, SockmapNetty transport) {
            this.base = base;
            this.servers = transport.serverChannels(0);
            this.clients = transport.socketChannels();
        }

        @Override
        public ChannelFactory<? extends Channel> channelFactory(boolean domainSocket) {
            return domainSocket ? base.channelFactory(true) : clients;
        }

        @Override
        public ChannelFactory<? extends ServerChannel> serverChannelFactory(boolean domainSocket) {
            return domainSocket ? base.serverChannelFactory(true) : servers;
        }

        @Override
        public boolean supportsDomainSockets() {
            return base.supportsDomainSockets();
        }

        @Override
        public boolean supportFileRegion() {
            return base.supportFileRegion();
        }

        @Override
        public boolean isAvailable() {
            return base.isAvailable();
        }

        @Override
        public Throwable unavailabilityCause() {
            return base.unavailabilityCause();
        }

        @Override
        public SocketAddress convert(io.vertx.core.net.SocketAddress address) {
            return base.convert(address);
        }

        @Override
        public io.vertx.core.net.SocketAddress convert(SocketAddress address) {
            return base.convert(address);
        }

        @Override
        public IoHandlerFactory ioHandlerFactory() {
            return base.ioHandlerFactory();
        }

        @Override
        public EventLoopGroup eventLoopGroup(int type, int threads, ThreadFactory threadFactory, int ioRatio) {
            return base.eventLoopGroup(type, threads, threadFactory, ioRatio);
        }

        @Override
        public DatagramChannel datagramChannel() {
            return base.datagramChannel();
        }

        @Override
        @SuppressWarnings("deprecation") // the SPI of Vert.x 5.0 names Netty's deprecated family
        public DatagramChannel datagramChannel(InternetProtocolFamily family) {
            return base.datagramChannel(family);
        }

        @Override
        public void configure(DatagramChannel channel, DatagramSocketOptions options) {
            base.configure(channel, options);
        }

        @Override
        public void configure(ClientOptionsBase options, int connectTimeout, boolean domainSocket, Bootstrap bootstrap) {
            base.configure(options, connectTimeout, domainSocket, bootstrap);
        }

        @Override
        public void configure(NetServerOptions options, boolean domainSocket, ServerBootstrap bootstrap) {
            base.configure(options, domainSocket, bootstrap);
        }
    }
}
