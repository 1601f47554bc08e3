package io.github.sockmap4j.netty;

import org.junit.jupiter.api.Tag;
import io.netty.bootstrap.Bootstrap;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapFactory;
import io.netty.testsuite.transport.socket.SocketConnectionAttemptTest;
import java.util.List;
import org.junit.jupiter.api.TestInfo;

/**
 * Netty's connection attempts over the transport. testConnectTimeout and
 * testConnectCancellation dial io.netty.testsuite.badHost, an address outside loopback: they
 * are overridden without {@code @Test} so they never run.
 */
@Tag("kernel")
class SockmapConnectionAttemptTest extends SocketConnectionAttemptTest {
    @Override
    protected List<BootstrapFactory<Bootstrap>> newFactories() {
        return SockmapSocketTestPermutation.INSTANCE.clientSocket();
    }

    @Override
    public void testConnectTimeout(TestInfo testInfo) {
        // Never run: dials an address outside this machine.
    }

    @Override
    public void testConnectCancellation(TestInfo testInfo) {
        // Never run: dials an address outside this machine.
    }
}
