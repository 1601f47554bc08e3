package io.github.sockmap4j.netty;

import org.junit.jupiter.api.Tag;
import io.netty.bootstrap.Bootstrap;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapFactory;
import io.netty.testsuite.transport.socket.SocketShutdownOutputBySelfTest;
import java.util.List;
import org.junit.jupiter.api.TestInfo;

@Tag("kernel")
class SockmapShutdownOutputBySelfTest extends SocketShutdownOutputBySelfTest {
    @Override
    protected List<BootstrapFactory<Bootstrap>> newFactories() {
        return SockmapSocketTestPermutation.INSTANCE.clientSocket();
    }

    @Override
    public void testWriteAfterShutdownOutputNoWritabilityChange(TestInfo testInfo) {
        // @Disabled in Netty's own suite; not a test here either.
    }
}
