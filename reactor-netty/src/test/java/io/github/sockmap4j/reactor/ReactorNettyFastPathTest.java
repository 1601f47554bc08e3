package io.github.sockmap4j.reactor;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.netty.SockmapNetty;
import io.github.sockmap4j.testsupport.RedirectedShare;
import io.netty.channel.Channel;
import io.netty.channel.epoll.EpollSocketChannel;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.netty.DisposableServer;
import reactor.netty.http.HttpProtocol;
import reactor.netty.http.client.HttpClient;
import reactor.netty.http.server.HttpServer;
import reactor.netty.resources.ConnectionProvider;
import reactor.netty.resources.LoopResources;
import reactor.netty.tcp.TcpClient;
import reactor.netty.tcp.TcpServer;

/**
 * Reactor Netty's servers and clients on {@link SockmapLoopResources}, each case also run on
 * Reactor Netty's own epoll resources as its twin: the same traffic works on both, and only the
 * first is redirected. Both run epoll channels of the same class, so each case asserts the
 * kernel's counters and the channels' provenance, never one of them alone.
 */
@Tag("kernel")
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ReactorNettyFastPathTest {
    static final SockmapLoopResources SOCKMAP = SockmapLoopResources.create(SockmapNetty.global(), "test", 2, true, 0);
    static final LoopResources STOCK = LoopResources.create("stock", 2, true);

    /** The transport's loops polling up to 200 µs before they sleep (its {@code polling} setting). */
    static final SockmapLoopResources POLLING = SockmapLoopResources.create(SockmapNetty.global(), "test-poll", 2, true, 0)
            .polling(Duration.ofNanos(200_000));

    enum Loops {
        SOCKMAP_LOOPS, SOCKMAP_POLLING, STOCK_EPOLL;

        LoopResources resources() {
            return switch (this) {
                case SOCKMAP_LOOPS -> SOCKMAP;
                case SOCKMAP_POLLING -> POLLING;
                case STOCK_EPOLL -> STOCK;
            };
        }

        boolean sockmap() {
            return this != STOCK_EPOLL;
        }
    }

    @AfterAll
    static void dispose() {
        SOCKMAP.disposeLater(Duration.ZERO, Duration.ofSeconds(10)).block();
        POLLING.disposeLater(Duration.ZERO, Duration.ofSeconds(10)).block();
        STOCK.disposeLater(Duration.ZERO, Duration.ofSeconds(10)).block();
    }

    /**
     * Every connection's two ends as the server and the client saw them, once each (a pooled
     * connection is seen at every acquire, an h2 connection through its streams), with whether
     * each was the transport's when it connected (a closed channel has lost its handlers).
     */
    static final class Ends {
        final java.util.Map<Channel, Boolean> server = new ConcurrentHashMap<>();
        final java.util.Map<Channel, Boolean> client = new ConcurrentHashMap<>();

        void server(Channel ch) {
            add(server, ch);
        }

        void client(Channel ch) {
            add(client, ch);
        }

        private static void add(java.util.Map<Channel, Boolean> ends, Channel ch) {
            Channel conn = ch.parent() instanceof io.netty.channel.socket.SocketChannel ? ch.parent() : ch;
            ends.computeIfAbsent(conn, SockmapNetty::isTransportChannel);
        }

        void check(Loops loops, int connections) throws InterruptedException {
            // Each side's callback runs on its event loop, a moment after the connect completes.
            assertTrue(io.github.sockmap4j.testbed.Await.holdsWithin(Duration.ofSeconds(10), () -> client.size() == connections),
                    () -> "client connections " + client);
            assertTrue(io.github.sockmap4j.testbed.Await.holdsWithin(Duration.ofSeconds(10), () -> server.size() == connections),
                    () -> "server connections " + server);
            for (var e : concat().entrySet()) {
                assertInstanceOf(EpollSocketChannel.class, e.getKey());
                assertEquals(loops.sockmap(), e.getValue(), e.getKey()::toString);
            }
        }

        /** While the connections are open: the kernel has them in its map, or not at all. */
        void checkAccelerated(Loops loops) throws Exception {
            for (Channel ch : concat().keySet()) {
                assertEquals(loops.sockmap(), SockmapNetty.isAccelerated(ch), ch::toString);
            }
        }

        private java.util.Map<Channel, Boolean> concat() {
            java.util.Map<Channel, Boolean> all = new java.util.HashMap<>(server);
            all.putAll(client);
            return all;
        }
    }

    private static void witness(Loops loops, RedirectedShare share, long sent, String what) {
        if (loops.sockmap()) {
            share.assertRedirected(0.99, sent, what);
        } else {
            share.assertNone(what);
        }
    }

    private static byte[] random(int n) {
        byte[] b = new byte[n];
        new Random(n).nextBytes(b);
        return b;
    }

    private static HttpServer echoServer(Loops loops, Ends ends) {
        return HttpServer.create().runOn(loops.resources()).host("127.0.0.1").port(0)
                .doOnConnection(c -> ends.server(c.channel()))
                .handle((req, res) -> res.send(req.receive().retain()));
    }

    @ParameterizedTest
    @EnumSource(Loops.class)
    void keepAliveReusesThePooledConnection(Loops loops) throws Exception {
        Ends ends = new Ends();
        DisposableServer server = echoServer(loops, ends).bindNow();
        ConnectionProvider pool = ConnectionProvider.create("keep-alive", 1);
        try {
            RedirectedShare share = RedirectedShare.start(Sockmap.global());
            HttpClient client = HttpClient.create(pool).runOn(loops.resources())
                    .doOnConnected(c -> ends.client(c.channel()))
                    .baseUrl("http://127.0.0.1:" + server.port());
            long sent = 0;
            for (int size : new int[] {64, 256 << 10, 64, 256 << 10}) {
                byte[] body = random(size);
                byte[] back = client.post().uri("/echo").send(Mono.just(io.netty.buffer.Unpooled.wrappedBuffer(body)))
                        .responseContent().aggregate().asByteArray().block(Duration.ofSeconds(30));
                assertArrayEquals(body, back);
                sent += 2L * size;
            }
            ends.check(loops, 1);
            ends.checkAccelerated(loops);
            witness(loops, share, sent, loops + " keep-alive");
        } finally {
            pool.disposeLater().block();
            server.disposeNow();
        }
    }

    @ParameterizedTest
    @EnumSource(Loops.class)
    void h2cCarriesConcurrentStreamsOnOneConnection(Loops loops) throws Exception {
        Ends ends = new Ends();
        DisposableServer server = echoServer(loops, ends).protocol(HttpProtocol.H2C).bindNow();
        ConnectionProvider pool = ConnectionProvider.create("h2c", 1);
        try {
            RedirectedShare share = RedirectedShare.start(Sockmap.global());
            HttpClient client = HttpClient.create(pool).runOn(loops.resources()).protocol(HttpProtocol.H2C)
                    .doOnConnected(c -> ends.client(c.channel()))
                    .baseUrl("http://127.0.0.1:" + server.port());
            byte[] body = random(256 << 10);
            List<byte[]> back = Flux.range(0, 8).flatMap(i -> client.post().uri("/echo")
                            .send(Mono.fromSupplier(() -> io.netty.buffer.Unpooled.wrappedBuffer(body)))
                            .responseContent().aggregate().asByteArray())
                    .collectList().block(Duration.ofSeconds(60));
            assertEquals(8, back.size());
            back.forEach(b -> assertArrayEquals(body, b));
            ends.check(loops, 1);
            ends.checkAccelerated(loops);
            witness(loops, share, 2L * 8 * body.length, loops + " h2c");
        } finally {
            pool.disposeLater().block();
            server.disposeNow();
        }
    }

    @ParameterizedTest
    @EnumSource(Loops.class)
    void chunkedBodiesStreamBothWays(Loops loops) throws Exception {
        Ends ends = new Ends();
        int chunks = 64;
        byte[] chunk = random(4096);
        DisposableServer server = HttpServer.create().runOn(loops.resources()).host("127.0.0.1").port(0)
                .doOnConnection(c -> ends.server(c.channel()))
                .handle((req, res) -> req.receive().aggregate().asByteArray().flatMap(in -> {
                    if (in.length != chunks * chunk.length) {
                        return res.status(400).send();
                    }
                    // No content length: the response goes chunked, one write per chunk.
                    return res.sendByteArray(Flux.range(0, chunks).map(i -> chunk)).then();
                }))
                .bindNow();
        ConnectionProvider pool = ConnectionProvider.create("chunked", 1);
        try {
            RedirectedShare share = RedirectedShare.start(Sockmap.global());
            List<String> encodings = new CopyOnWriteArrayList<>();
            byte[] back = HttpClient.create(pool).runOn(loops.resources())
                    .doOnConnected(c -> ends.client(c.channel()))
                    .doOnResponse((r, c) -> encodings.add(String.valueOf(r.responseHeaders().get("transfer-encoding"))))
                    .post().uri("http://127.0.0.1:" + server.port() + "/stream")
                    .send((req, out) -> out.sendByteArray(Flux.range(0, chunks).map(i -> chunk)))
                    .responseContent().aggregate().asByteArray().block(Duration.ofSeconds(30));
            assertEquals(chunks * chunk.length, back.length);
            assertEquals(List.of("chunked"), encodings);
            ends.check(loops, 1);
            ends.checkAccelerated(loops);
            witness(loops, share, 2L * chunks * chunk.length, loops + " chunked");
        } finally {
            pool.disposeLater().block();
            server.disposeNow();
        }
    }

    @ParameterizedTest
    @EnumSource(Loops.class)
    void webSocketEchoesFrames(Loops loops) throws Exception {
        Ends ends = new Ends();
        DisposableServer server = HttpServer.create().runOn(loops.resources()).host("127.0.0.1").port(0)
                .doOnConnection(c -> ends.server(c.channel()))
                .route(r -> r.ws("/ws", (in, out) -> out.sendString(in.receive().asString())))
                .bindNow();
        ConnectionProvider pool = ConnectionProvider.create("ws", 1);
        try {
            RedirectedShare share = RedirectedShare.start(Sockmap.global());
            String frame = "x".repeat(1000);
            List<String> back = HttpClient.create(pool).runOn(loops.resources())
                    .doOnConnected(c -> ends.client(c.channel()))
                    .websocket().uri("ws://127.0.0.1:" + server.port() + "/ws")
                    .handle((in, out) -> out.sendString(Flux.range(0, 200).map(i -> frame))
                            .then().thenMany(in.receive().asString().take(200)))
                    .collectList().block(Duration.ofSeconds(30));
            assertEquals(200 * frame.length(), back.stream().mapToInt(String::length).sum());
            ends.check(loops, 1);
            witness(loops, share, 2L * 200 * frame.length(), loops + " websocket");
        } finally {
            pool.disposeLater().block();
            server.disposeNow();
        }
    }

    @ParameterizedTest
    @EnumSource(Loops.class)
    void tcpServerAndClientEcho(Loops loops) throws Exception {
        Ends ends = new Ends();
        DisposableServer server = TcpServer.create().runOn(loops.resources()).host("127.0.0.1").port(0)
                .doOnConnection(c -> ends.server(c.channel()))
                .handle((in, out) -> out.send(in.receive().retain()))
                .bindNow();
        ConnectionProvider pool = ConnectionProvider.create("tcp", 1);
        try {
            RedirectedShare share = RedirectedShare.start(Sockmap.global());
            byte[] data = random(256 << 10);
            reactor.netty.Connection conn = TcpClient.create(pool).runOn(loops.resources())
                    .host("127.0.0.1").port(server.port())
                    .doOnConnected(c -> ends.client(c.channel()))
                    .connectNow(Duration.ofSeconds(10));
            try {
                ends.check(loops, 1);
                ends.checkAccelerated(loops);
                byte[] back = conn.outbound().sendByteArray(Mono.just(data)).then()
                        .thenMany(conn.inbound().receive().asByteArray())
                        .scan(new byte[0], (a, b) -> {
                            byte[] c = java.util.Arrays.copyOf(a, a.length + b.length);
                            System.arraycopy(b, 0, c, a.length, b.length);
                            return c;
                        })
                        .filter(a -> a.length >= data.length).next().block(Duration.ofSeconds(30));
                assertArrayEquals(data, back);
            } finally {
                conn.disposeNow();
            }
            witness(loops, share, 2L * data.length, loops + " tcp");
        } finally {
            pool.disposeLater().block();
            server.disposeNow();
        }
    }

    @ParameterizedTest
    @EnumSource(Loops.class)
    void localhostIsResolvedOnTheLoops(Loops loops) throws Exception {
        Ends ends = new Ends();
        DisposableServer server = echoServer(loops, ends).bindNow();
        ConnectionProvider pool = ConnectionProvider.create("resolve", 1);
        try {
            RedirectedShare share = RedirectedShare.start(Sockmap.global());
            byte[] body = "resolved".getBytes(StandardCharsets.US_ASCII);
            // Reactor Netty's own DNS resolver (netty-resolver-dns), with the datagram channel
            // class of these resources: localhost comes from /etc/hosts, no query leaves the host.
            byte[] back = HttpClient.create(pool).runOn(loops.resources())
                    .doOnConnected(c -> ends.client(c.channel()))
                    .post().uri("http://localhost:" + server.port() + "/")
                    .send(Mono.just(io.netty.buffer.Unpooled.wrappedBuffer(body)))
                    .responseContent().aggregate().asByteArray().block(Duration.ofSeconds(30));
            assertArrayEquals(body, back);
            ends.check(loops, 1);
            ends.checkAccelerated(loops);
            witness(loops, share, 2L * body.length, loops + " localhost");
        } finally {
            pool.disposeLater().block();
            server.disposeNow();
        }
    }

    @ParameterizedTest
    @EnumSource(Loops.class)
    void gracefulShutdownFinishesTheRequestAndLeavesNothingRegistered(Loops loops) throws Exception {
        long inMapBefore = Sockmap.global().stats().socketsInMap();
        SockmapLoopResources own = SockmapLoopResources.create(SockmapNetty.global(), "shutdown", 1, true, 0);
        LoopResources resources = loops.sockmap() ? own : LoopResources.create("stock-shutdown", 1, true);
        java.util.concurrent.CountDownLatch inHandler = new java.util.concurrent.CountDownLatch(1);
        DisposableServer server = HttpServer.create().runOn(resources).host("127.0.0.1").port(0)
                .handle((req, res) -> {
                    inHandler.countDown();
                    return res.sendString(Mono.delay(Duration.ofMillis(300)).map(x -> "late"));
                })
                .bindNow();
        Channel serverChannel = server.channel();
        assertEquals(loops.sockmap(), SockmapNetty.isOptedIn(serverChannel), "port opted in");
        ConnectionProvider pool = ConnectionProvider.create("shutdown", 1);
        Mono<String> reply = HttpClient.create(pool).runOn(resources).get()
                .uri("http://127.0.0.1:" + server.port() + "/").responseContent().aggregate().asString().cache();
        reply.subscribe();
        assertTrue(inHandler.await(30, TimeUnit.SECONDS), "the request reached the handler");
        // Reactor Netty's graceful shutdown: no new connections, the open request runs to its end.
        server.disposeNow(Duration.ofSeconds(10));
        assertEquals("late", reply.block(Duration.ofSeconds(10)));
        pool.disposeLater().block();
        resources.disposeLater(Duration.ZERO, Duration.ofSeconds(10)).block();
        assertTrue(resources.isDisposed(), "loops ended");
        assertFalse(SockmapNetty.isOptedIn(serverChannel), "the port's opt-in went with the server");
        assertTrue(io.github.sockmap4j.testbed.Await.holdsWithin(Duration.ofSeconds(10),
                        () -> Sockmap.global().stats().socketsInMap() <= inMapBefore),
                () -> "sockets left registered: " + Sockmap.global().stats());
    }
}
