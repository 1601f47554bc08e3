package io.github.sockmap4j;

import java.io.IOException;
import java.net.ProtocolFamily;
import java.nio.channels.DatagramChannel;
import java.nio.channels.Pipe;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.channels.spi.AbstractSelector;
import java.nio.channels.spi.SelectorProvider;

/**
 * The provider of sockmap4j's channels and of the epoll selector that can select them. Only
 * TCP stream channels are provided; the others throw {@link UnsupportedOperationException}.
 */
public final class SockmapSelectorProvider extends SelectorProvider {
    static final SockmapSelectorProvider INSTANCE = new SockmapSelectorProvider();

    private SockmapSelectorProvider() {
    }

    public static SockmapSelectorProvider provider() {
        return INSTANCE;
    }

    @Override
    public DatagramChannel openDatagramChannel() {
        throw new UnsupportedOperationException("sockmap4j provides TCP channels only");
    }

    @Override
    public DatagramChannel openDatagramChannel(ProtocolFamily family) {
        throw new UnsupportedOperationException("sockmap4j provides TCP channels only");
    }

    @Override
    public Pipe openPipe() {
        throw new UnsupportedOperationException("sockmap4j provides TCP channels only");
    }

    @Override
    public AbstractSelector openSelector() throws IOException {
        return new EpollSelector(this);
    }

    @Override
    public ServerSocketChannel openServerSocketChannel() throws IOException {
        return Sockmap.global().openServerChannel();
    }

    @Override
    public SocketChannel openSocketChannel() throws IOException {
        return Sockmap.global().openChannel();
    }
}
