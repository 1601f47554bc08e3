package io.github.sockmap4j.micronaut;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.testsupport.ConnectionEvents;
import io.github.sockmap4j.testsupport.RedirectedShare;
import io.micronaut.context.ApplicationContext;
import io.micronaut.http.HttpRequest;
import io.micronaut.http.MediaType;
import io.micronaut.http.client.BlockingHttpClient;
import io.micronaut.http.client.HttpClient;
import io.micronaut.runtime.server.EmbeddedServer;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import jdk.jfr.consumer.RecordedEvent;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Micronaut's Netty server and HTTP client with this artifact on the class path: with
 * {@code sockmap} named for the default event loops and the server's acceptor, with nothing
 * named (Micronaut stays on NIO: nothing redirected), and with {@code epoll} named (Micronaut's
 * own epoll, the twin: the same traffic, nothing redirected). The transport's connections are
 * JFR connection events; a stock channel makes none.
 */
@Tag("kernel")
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class MicronautFastPathTest {
    enum Setting {
        SOCKMAP_NAMED("sockmap,epoll,nio"), NONE(null), STOCK_EPOLL("epoll");

        final String transport;

        Setting(String transport) {
            this.transport = transport;
        }
    }

    private static byte[] random(int n) {
        byte[] b = new byte[n];
        new Random(n).nextBytes(b);
        return b;
    }

    @ParameterizedTest
    @EnumSource(Setting.class)
    void serverAndClientCarry64BytesAnd256KiB(Setting setting) {
        Map<String, Object> config = new HashMap<>(Map.of("micronaut.server.host", "127.0.0.1",
                "micronaut.server.port", -1));
        if (setting.transport != null) {
            config.put("micronaut.netty.event-loops.default.transport", setting.transport);
            config.put("micronaut.server.netty.parent.transport", setting.transport);
        }
        ConnectionEvents connections = ConnectionEvents.start();
        try (EmbeddedServer server = ApplicationContext.run(EmbeddedServer.class, config);
             HttpClient client = server.getApplicationContext().createBean(HttpClient.class, server.getURL())) {
            RedirectedShare share = RedirectedShare.start(Sockmap.global());
            BlockingHttpClient blocking = client.toBlocking();
            long sent = 0;
            for (int size : new int[] {64, 256 << 10, 64, 256 << 10}) {
                byte[] body = random(size);
                byte[] back = blocking.retrieve(HttpRequest.POST("/echo", body)
                        .contentType(MediaType.APPLICATION_OCTET_STREAM_TYPE)
                        .accept(MediaType.APPLICATION_OCTET_STREAM_TYPE), byte[].class);
                assertArrayEquals(body, back);
                sent += 2L * size;
            }
            List<RecordedEvent> events = connections.stop();
            if (setting != Setting.SOCKMAP_NAMED) {
                share.assertNone("Micronaut " + setting);
                assertEquals(List.of(), events, "stock channels make no connection events");
            } else {
                share.assertRedirected(0.99, sent, "Micronaut " + setting);
                share.assertNoBoundHits("Micronaut " + setting);
                assertTrue(events.size() >= 2, () -> "both ends were the transport's: " + events);
                assertTrue(events.stream().allMatch(e -> e.getBoolean("accelerated")), events::toString);
            }
        } finally {
            connections.close();
        }
    }
}
