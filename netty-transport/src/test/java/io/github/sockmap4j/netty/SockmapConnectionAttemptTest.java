package io.github.sockmap4j.netty;

import io.netty.bootstrap.Bootstrap;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapFactory;
import io.netty.testsuite.transport.socket.SocketConnectionAttemptTest;
import java.util.List;
import org.junit.jupiter.api.Disabled;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

/**
 * Netty's connection attempts over the transport. testConnectTimeout and
 * testConnectCancellation dial io.netty.testsuite.badHost, an address outside loopback: they are
 * disabled, and show in reports as skipped by design.
 */
@Tag("kernel")
class SockmapConnectionAttemptTest extends SocketConnectionAttemptTest {
    @Override
    protected List<BootstrapFactory<Bootstrap>> newFactories() {
        return SockmapSocketTestPermutation.INSTANCE.clientSocket();
    }

    @Test
    @Disabled("dials an address outside loopback (io.netty.testsuite.badHost)")
    @Override
    public void testConnectTimeout(TestInfo testInfo) {
    }

    @Test
    @Disabled("dials an address outside loopback (io.netty.testsuite.badHost)")
    @Override
    public void testConnectCancellation(TestInfo testInfo) {
    }
}
