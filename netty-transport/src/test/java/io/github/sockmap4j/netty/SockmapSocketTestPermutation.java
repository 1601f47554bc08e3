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
import java.util.ArrayList;
import java.util.List;

/**
 * Netty's socket suite over the transport, the way Netty's epoll module runs it: a sockmap4j
 * server (epoll, port opted in) against epoll clients (the fast path) and NIO clients, and a
 * NIO server (not opted in) against epoll clients (the fallback pairing).
 */
final class SockmapSocketTestPermutation extends SocketTestPermutation {
    static final SockmapSocketTestPermutation INSTANCE = new SockmapSocketTestPermutation();
    static final EventLoopGroup EPOLL_BOSS = new MultiThreadIoEventLoopGroup(2,
            new DefaultThreadFactory("testsuite-sockmap-boss", true), EpollIoHandler.newFactory());
    static final EventLoopGroup EPOLL_WORKER = new MultiThreadIoEventLoopGroup(3,
            new DefaultThreadFactory("testsuite-sockmap-worker", true), EpollIoHandler.newFactory());
    static final EventLoopGroup NIO = new MultiThreadIoEventLoopGroup(3,
            new DefaultThreadFactory("testsuite-sockmap-nio", true), NioIoHandler.newFactory());

    @Override
    public List<BootstrapComboFactory<ServerBootstrap, Bootstrap>> socket() {
        List<BootstrapComboFactory<ServerBootstrap, Bootstrap>> list = combo(serverSocket(), clientSocket());
        list.remove(list.size() - 1); // NIO x NIO is not this transport
        return list;
    }

    @Override
    public List<BootstrapFactory<ServerBootstrap>> serverSocket() {
        List<BootstrapFactory<ServerBootstrap>> l = new ArrayList<>();
        l.add(() -> new ServerBootstrap().group(EPOLL_BOSS, EPOLL_WORKER)
                .channelFactory(SockmapNetty.serverChannelFactory()));
        l.add(() -> new ServerBootstrap().group(NIO, NIO).channel(NioServerSocketChannel.class));
        return l;
    }

    @Override
    public List<BootstrapFactory<Bootstrap>> clientSocket() {
        List<BootstrapFactory<Bootstrap>> l = new ArrayList<>();
        l.add(() -> new Bootstrap().group(EPOLL_WORKER).channelFactory(SockmapNetty.socketChannelFactory()));
        l.add(() -> new Bootstrap().group(NIO).channel(NioSocketChannel.class));
        return l;
    }
}
