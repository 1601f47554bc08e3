package io.github.sockmap4j.netty;

import io.netty.bootstrap.ServerBootstrap;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapFactory;
import io.netty.testsuite.transport.socket.SocketShutdownOutputByPeerTest;
import java.util.List;
import org.junit.jupiter.api.Tag;

@Tag("kernel")
class SockmapShutdownOutputByPeerTest extends SocketShutdownOutputByPeerTest {
    @Override
    protected List<BootstrapFactory<ServerBootstrap>> newFactories() {
        return SockmapSocketTestPermutation.INSTANCE.serverSocket();
    }
}
