package io.github.sockmap4j.linux.bpf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Where a Service is in the map ({@link ServiceMap.Key}): a loopback VIP under the namespace it was
 * put from, any other VIP under none, as the connect programs look them up (is_loopback in
 * bpf/src/lib/keys.h). Pure code: runs without root.
 */
class ServiceKeyTest {
    static InetSocketAddress at(String literal, int port) {
        return new InetSocketAddress(InetAddress.ofLiteral(literal), port);
    }

    @Test
    void aLoopbackVipIsKeptUnderItsNamespace() {
        for (String loopback : List.of("127.0.0.1", "127.3.2.1", "::1", "::ffff:127.0.0.2")) {
            assertEquals(41, ServiceMap.Key.of(at(loopback, 80), 41).netns(), loopback);
        }
        assertNotEquals(ServiceMap.Key.of(at("127.0.0.2", 80), 41), ServiceMap.Key.of(at("127.0.0.2", 80), 42),
                "two namespaces' Services of one loopback VIP are two entries");
    }

    @Test
    void anyOtherVipIsOneForTheWholeHost() {
        for (String other : List.of("10.96.0.10", "128.0.0.1", "::2", "fd00::1", "::ffff:10.0.0.1", "0.0.0.0")) {
            assertEquals(0, ServiceMap.Key.of(at(other, 80), 41).netns(), other);
        }
        assertEquals(ServiceMap.Key.of(at("10.96.0.10", 80), 41), ServiceMap.Key.of(at("10.96.0.10", 80), 42));
    }
}
