package io.github.sockmap4j.netty;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapComboFactory;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapFactory;
import io.netty.testsuite.transport.socket.SocketTestPermutation;
import io.netty.util.concurrent.DefaultThreadFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * Netty's socket suite over the transport, the way Netty's epoll module runs it: a sockmap4j
 * server (epoll, port opted in) against epoll clients (the fast path) and NIO clients, and a
 * NIO server (not opted in) against epoll clients (the fallback pairing).
 */
final class SockmapSocketTestPermutation extends SocketTestPermutation {
    static final SockmapSocketTestPermutation INSTANCE = new SockmapSocketTestPermutation();

    /**
     * The event loops of one test class. Netty's suite leaves channels to its event loops (a
     * half-closed child, a SPDY echo's server and client), so each class gets its own, and
     * {@link #closeGroups()} closes them, with every channel on them, after the class: what is
     * still registered then is a leak of the class that ran, not of Netty's tests.
     */
    private record Groups(EventLoopGroup boss, EventLoopGroup worker, EventLoopGroup nio) {
        static Groups open() {
            return new Groups(new MultiThreadIoEventLoopGroup(2, new DefaultThreadFactory("testsuite-sockmap-boss", true),
                    EpollIoHandler.newFactory()),
                    new MultiThreadIoEventLoopGroup(3, new DefaultThreadFactory("testsuite-sockmap-worker", true),
                            EpollIoHandler.newFactory()),
                    new MultiThreadIoEventLoopGroup(3, new DefaultThreadFactory("testsuite-sockmap-nio", true),
                            NioIoHandler.newFactory()));
        }

        void close() {
            // Not shutdownGracefully(0, ...): with no quiet period a loop can end with its channels open.
            SockmapNetty.shutdown(Duration.ofSeconds(10), boss, worker, nio);
        }
    }

    private static Groups groups;

    private static synchronized Groups groups() {
        if (groups == null) {
            groups = Groups.open();
        }
        return groups;
    }

    /** Closes the current class's event loops and every channel on them; the next class gets new ones. */
    static synchronized void closeGroups() {
        if (groups != null) {
            groups.close();
            groups = null;
        }
    }

    @Override
    public List<BootstrapComboFactory<ServerBootstrap, Bootstrap>> socket() {
        List<BootstrapComboFactory<ServerBootstrap, Bootstrap>> list = combo(serverSocket(), clientSocket());
        list.remove(list.size() - 1); // NIO x NIO is not this transport
        return list;
    }

    @Override
    public List<BootstrapFactory<ServerBootstrap>> serverSocket() {
        List<BootstrapFactory<ServerBootstrap>> l = new ArrayList<>();
        l.add(() -> new ServerBootstrap().group(groups().boss(), groups().worker())
                .channelFactory(SockmapNetty.serverChannelFactory()));
        l.add(() -> new ServerBootstrap().group(groups().nio(), groups().nio()).channel(NioServerSocketChannel.class));
        return l;
    }

    @Override
    public List<BootstrapFactory<Bootstrap>> clientSocket() {
        List<BootstrapFactory<Bootstrap>> l = new ArrayList<>();
        l.add(() -> new Bootstrap().group(groups().worker()).channelFactory(SockmapNetty.socketChannelFactory()));
        l.add(() -> new Bootstrap().group(groups().nio()).channel(NioSocketChannel.class));
        return l;
    }
}
