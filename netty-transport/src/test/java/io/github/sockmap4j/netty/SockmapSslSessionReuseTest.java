package io.github.sockmap4j.netty;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapComboFactory;
import io.netty.testsuite.transport.socket.SocketSslSessionReuseTest;
import java.util.List;
import org.junit.jupiter.api.Tag;

/**
 * Netty's TLS session reuse over the transport, with the JDK's SSL provider and OpenSSL
 * (BoringSSL, netty-tcnative, a test dependency of this module).
 */
@Tag("kernel")
class SockmapSslSessionReuseTest extends SocketSslSessionReuseTest {
    @Override
    protected List<BootstrapComboFactory<ServerBootstrap, Bootstrap>> newFactories() {
        return SockmapSocketTestPermutation.INSTANCE.socket();
    }
}
