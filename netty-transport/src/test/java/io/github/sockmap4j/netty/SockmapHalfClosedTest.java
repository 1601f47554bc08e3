package io.github.sockmap4j.netty;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapComboFactory;
import io.netty.testsuite.transport.socket.SocketHalfClosedTest;
import java.util.List;
import org.junit.jupiter.api.Tag;

@Tag("kernel")
class SockmapHalfClosedTest extends SocketHalfClosedTest {
    @Override
    protected List<BootstrapComboFactory<ServerBootstrap, Bootstrap>> newFactories() {
        return SockmapSocketTestPermutation.INSTANCE.socket();
    }
}
