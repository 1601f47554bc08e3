package io.github.sockmap4j.spring;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.netty.SockmapNetty;
import io.github.sockmap4j.spring.app.EchoApplication;
import io.github.sockmap4j.testsupport.ConnectionEvents;
import io.github.sockmap4j.testsupport.Http2Only;
import io.github.sockmap4j.testsupport.RedirectedShare;
import io.grpc.ManagedChannel;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.StreamObserver;
import io.micrometer.core.instrument.MeterRegistry;
import io.netty.channel.Channel;
import io.netty.channel.epoll.EpollSocketChannel;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import jdk.jfr.consumer.RecordedEvent;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.grpc.client.GrpcChannelFactory;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.web.reactive.function.client.WebClient;

/**
 * A Spring Boot 4 service with the starter and nothing else of sockmap4j: WebFlux served to
 * WebClient, and gRPC through Spring gRPC, on the fast path. Each case asserts the kernel's
 * counters (at least 99% of the bytes redirected) and whose channels carried them.
 */
@Tag("kernel")
@ExtendWith(Http2Only.class) // gRPC's HTTP/2 over the redirect: the co-located transport is SpringBootGrpcColocatedTest's
@Timeout(value = 120, unit = TimeUnit.SECONDS)
// The context closes with the class, before the run checks that no socket is left registered.
@DirtiesContext(classMode = DirtiesContext.ClassMode.AFTER_CLASS)
@SpringBootTest(classes = EchoApplication.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = {"spring.grpc.server.port=0", "spring.grpc.server.address=127.0.0.1",
                "management.endpoint.health.show-components=always", "management.endpoint.health.show-details=always",
                "management.endpoints.web.exposure.include=health"})
class SpringBootFastPathTest {
    @LocalServerPort
    int port;
    @Autowired
    WebClient.Builder webClients;
    @Autowired
    GrpcChannelFactory grpcChannels;
    @Autowired
    Sockmap sockmap;
    @Autowired
    MeterRegistry registry;

    private static byte[] random(int n) {
        byte[] b = new byte[n];
        new Random(n).nextBytes(b);
        return b;
    }

    /** Every web connection so far was the transport's when it connected, and is redirected while open. */
    private static void webChannelsAreTheTransports() {
        assertFalse(EchoApplication.SERVER_CHANNELS.isEmpty(), "the server accepted connections");
        assertFalse(EchoApplication.CLIENT_CHANNELS.isEmpty(), "WebClient connected");
        for (Map<Channel, Boolean> ends : List.of(EchoApplication.SERVER_CHANNELS, EchoApplication.CLIENT_CHANNELS)) {
            ends.forEach((ch, transports) -> {
                assertInstanceOf(EpollSocketChannel.class, ch);
                assertTrue(transports, () -> "a stock channel: " + ch);
                if (ch.isActive()) {
                    assertTrue(SockmapNetty.isAccelerated(ch), () -> "open but not redirected: " + ch);
                }
            });
        }
    }

    @Test
    void webFluxServesWebClient64BytesAnd256KiB() {
        WebClient client = webClients.baseUrl("http://127.0.0.1:" + port).build();
        RedirectedShare share = RedirectedShare.start(sockmap);
        long sent = 0;
        for (int size : new int[] {64, 256 << 10, 64, 256 << 10}) {
            byte[] body = random(size);
            byte[] back = client.post().uri("/echo").bodyValue(body).retrieve().bodyToMono(byte[].class)
                    .block(Duration.ofSeconds(30));
            assertArrayEquals(body, back);
            sent += 2L * size;
        }
        webChannelsAreTheTransports();
        share.assertRedirected(0.99, sent, "WebFlux + WebClient");
    }

    @Test
    void webFluxStreamsToWebClientUnderTheInFlightBound() {
        WebClient client = webClients.baseUrl("http://127.0.0.1:" + port).build();
        RedirectedShare share = RedirectedShare.start(sockmap);
        int n = 2048;
        int size = 4096;
        AtomicLong got = new AtomicLong();
        client.get().uri("/stream?n={n}&size={size}", n, size).retrieve().bodyToFlux(org.springframework.core.io.buffer.DataBuffer.class)
                .doOnNext(b -> {
                    got.addAndGet(b.readableByteCount());
                    org.springframework.core.io.buffer.DataBufferUtils.release(b);
                })
                .blockLast(Duration.ofSeconds(60));
        assertEquals((long) n * size, got.get());
        webChannelsAreTheTransports();
        share.assertRedirected(0.99, (long) n * size, "WebFlux stream");
        share.assertNoBoundHits("WebFlux stream");
    }

    @Test
    void springGrpcUnaryCallsAreRedirected() {
        ManagedChannel channel = grpcChannels.createChannel("127.0.0.1:" + EchoApplication.GRPC_PORT.get());
        ConnectionEvents connections = ConnectionEvents.start();
        try {
            RedirectedShare share = RedirectedShare.start(sockmap);
            long sent = 0;
            for (int size : new int[] {64, 256 << 10, 64, 256 << 10}) {
                byte[] body = random(size);
                byte[] back = ClientCalls.blockingUnaryCall(channel, EchoApplication.UNARY,
                        io.grpc.CallOptions.DEFAULT.withDeadlineAfter(30, TimeUnit.SECONDS), body);
                assertArrayEquals(body, back);
                sent += 2L * size;
            }
            share.assertRedirected(0.99, sent, "Spring gRPC unary");
        } finally {
            channel.shutdownNow();
        }
        bothEndsWereTheTransports(connections.stop());
    }

    @Test
    void springGrpcBidiStreamingHoldsAtTheInFlightBound() throws Exception {
        ManagedChannel channel = grpcChannels.createChannel("127.0.0.1:" + EchoApplication.GRPC_PORT.get());
        ConnectionEvents connections = ConnectionEvents.start();
        try {
            RedirectedShare share = RedirectedShare.start(sockmap);
            int n = 1000;
            byte[] message = random(16 << 10);
            AtomicLong got = new AtomicLong();
            CompletableFuture<Void> done = new CompletableFuture<>();
            StreamObserver<byte[]> out = ClientCalls.asyncBidiStreamingCall(
                    channel.newCall(EchoApplication.STREAM, io.grpc.CallOptions.DEFAULT), new StreamObserver<>() {
                        @Override
                        public void onNext(byte[] value) {
                            got.addAndGet(value.length);
                        }

                        @Override
                        public void onError(Throwable t) {
                            done.completeExceptionally(t);
                        }

                        @Override
                        public void onCompleted() {
                            done.complete(null);
                        }
                    });
            for (int i = 0; i < n; i++) {
                out.onNext(message);
            }
            out.onCompleted();
            done.get(60, TimeUnit.SECONDS);
            assertEquals((long) n * message.length, got.get());
            share.assertRedirected(0.99, 2L * n * message.length, "Spring gRPC bidi stream");
            share.assertNoBoundHits("Spring gRPC bidi stream");
        } finally {
            channel.shutdownNow();
        }
        bothEndsWereTheTransports(connections.stop());
    }

    /** One JFR event per end of each connection the transport made: a stock channel makes none. */
    private static void bothEndsWereTheTransports(List<RecordedEvent> events) {
        assertTrue(events.size() >= 2, () -> "the gRPC connection's two ends were the transport's: " + events);
        assertTrue(events.stream().allMatch(e -> e.getBoolean("accelerated")), events::toString);
    }

    @Test
    void healthAndMetricsSayActive() {
        String health = webClients.baseUrl("http://127.0.0.1:" + port).build().get().uri("/actuator/health/sockmap")
                .retrieve().bodyToMono(String.class).block(Duration.ofSeconds(30));
        assertTrue(health.contains("\"status\":\"UP\"") && health.contains("\"active\":true"), health);
        assertTrue(health.contains("\"bytesRedirected\""), health);
        assertEquals(1.0, registry.get("sockmap4j.active").gauge().value());
    }
}
