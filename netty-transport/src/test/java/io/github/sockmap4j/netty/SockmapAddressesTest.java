package io.github.sockmap4j.netty;

import static org.junit.jupiter.api.Assertions.assertInstanceOf;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapComboFactory;
import io.netty.testsuite.transport.socket.SocketAddressesTest;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.util.List;
import org.junit.jupiter.api.Tag;

@Tag("kernel")
class SockmapAddressesTest extends SocketAddressesTest {
    @Override
    protected List<BootstrapComboFactory<ServerBootstrap, Bootstrap>> newFactories() {
        return SockmapSocketTestPermutation.INSTANCE.socket();
    }

    @Override
    protected void assertAddress(SocketAddress address) {
        assertInstanceOf(InetSocketAddress.class, address);
    }
}
