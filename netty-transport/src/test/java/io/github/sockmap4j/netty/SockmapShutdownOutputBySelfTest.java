package io.github.sockmap4j.netty;

import io.netty.bootstrap.Bootstrap;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapFactory;
import io.netty.testsuite.transport.socket.SocketShutdownOutputBySelfTest;
import java.util.List;
import org.junit.jupiter.api.Disabled;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

@Tag("kernel")
class SockmapShutdownOutputBySelfTest extends SocketShutdownOutputBySelfTest {
    @Override
    protected List<BootstrapFactory<Bootstrap>> newFactories() {
        return SockmapSocketTestPermutation.INSTANCE.clientSocket();
    }

    @Test
    @Disabled("disabled in Netty's own suite (SocketShutdownOutputBySelfTest) for every transport")
    @Override
    public void testWriteAfterShutdownOutputNoWritabilityChange(TestInfo testInfo) {
    }
}
