package io.github.sockmap4j.netty;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapComboFactory;
import io.netty.testsuite.transport.socket.SocketSpdyEchoTest;
import java.util.List;
import org.junit.jupiter.api.Tag;

/** Netty's test over the transport, with the JDK's SSL provider (tcnative is not served here). */
@Tag("kernel")
class SockmapSpdyEchoTest extends SocketSpdyEchoTest {
    @Override
    protected List<BootstrapComboFactory<ServerBootstrap, Bootstrap>> newFactories() {
        return SockmapSocketTestPermutation.INSTANCE.socket();
    }
}
