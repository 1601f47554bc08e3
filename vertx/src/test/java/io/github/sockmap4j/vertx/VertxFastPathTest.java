package io.github.sockmap4j.vertx;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.testsupport.ConnectionEvents;
import io.github.sockmap4j.testsupport.RedirectedShare;
import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpClient;
import io.vertx.core.http.HttpClientOptions;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.RequestOptions;
import io.vertx.core.net.NetClient;
import io.vertx.core.net.NetServer;
import io.vertx.core.net.NetSocket;
import io.vertx.core.transport.Transport;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import jdk.jfr.consumer.RecordedEvent;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Vert.x 5 servers and clients on {@link SockmapVertx#transport()}, each case also on Vert.x's own
 * epoll transport as its twin: both carry the traffic, only the first is redirected. The
 * transport's connections are JFR connection events; a stock channel makes none.
 */
@Tag("kernel")
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class VertxFastPathTest {
    enum Kind {
        SOCKMAP, STOCK_EPOLL;

        Vertx vertx() {
            return Vertx.builder().withTransport(this == SOCKMAP ? SockmapVertx.transport() : Transport.EPOLL).build();
        }
    }

    private static <T> T await(Future<T> f) throws Exception {
        return f.toCompletionStage().toCompletableFuture().get(30, TimeUnit.SECONDS);
    }

    /**
     * One client call, chained on a Vert.x context. Chained from the test's thread, a response's
     * {@code body()} can be asked for after Vert.x has delivered that body: 3 to 6 calls in 100 of
     * a 64 KiB echo on Vert.x's own epoll transport then never completed, none on a context.
     */
    private static <T> T call(Context context, Supplier<Future<T>> call) throws Exception {
        Promise<T> done = Promise.promise();
        context.runOnContext(v -> call.get().onComplete(done));
        return await(done.future());
    }

    private static byte[] random(int n) {
        byte[] b = new byte[n];
        new Random(n).nextBytes(b);
        return b;
    }

    private static void witness(Kind kind, RedirectedShare share, List<RecordedEvent> connections, long sent,
                                String what) {
        if (kind == Kind.SOCKMAP) {
            share.assertRedirected(0.99, sent, what);
            assertTrue(connections.size() >= 2, () -> what + ": both ends were the transport's: " + connections);
            assertTrue(connections.stream().allMatch(e -> e.getBoolean("accelerated")), connections::toString);
        } else {
            share.assertNone(what);
            assertEquals(List.of(), connections, what + ": stock channels make no connection events");
        }
    }

    @ParameterizedTest
    @EnumSource(Kind.class)
    void netServerEchoesNetClient(Kind kind) throws Exception {
        Vertx vertx = kind.vertx();
        try {
            assertTrue(vertx.isNativeTransportEnabled(), "epoll under both");
            NetServer server = vertx.createNetServer().connectHandler(s -> s.handler(s::write));
            await(server.listen(0, "127.0.0.1"));
            byte[] data = random(256 << 10);
            ConnectionEvents connections = ConnectionEvents.start();
            RedirectedShare share = RedirectedShare.start(Sockmap.global());
            NetClient client = vertx.createNetClient();
            NetSocket socket = await(client.connect(server.actualPort(), "127.0.0.1"));
            CompletableFuture<Buffer> back = new CompletableFuture<>();
            Buffer got = Buffer.buffer();
            socket.handler(b -> {
                got.appendBuffer(b);
                if (got.length() >= data.length) {
                    back.complete(got);
                }
            });
            socket.write(Buffer.buffer(data));
            assertArrayEquals(data, back.get(30, TimeUnit.SECONDS).getBytes());
            await(socket.close());
            witness(kind, share, connections.stop(), 2L * data.length, kind + " NetServer");
            await(client.close());
            await(server.close());
        } finally {
            await(vertx.close());
        }
    }

    @ParameterizedTest
    @EnumSource(Kind.class)
    void httpServerServesHttpClient64BytesAnd256KiBAndAStream(Kind kind) throws Exception {
        Vertx vertx = kind.vertx();
        try {
            int chunks = 2048;
            byte[] chunk = random(4096);
            HttpServer server = vertx.createHttpServer().requestHandler(req -> {
                if (req.path().equals("/stream")) {
                    req.response().setChunked(true);
                    for (int i = 0; i < chunks; i++) {
                        req.response().write(Buffer.buffer(chunk));
                    }
                    req.response().end();
                } else {
                    req.body().onSuccess(b -> req.response().end(b));
                }
            });
            await(server.listen(0, "127.0.0.1"));
            ConnectionEvents connections = ConnectionEvents.start();
            RedirectedShare share = RedirectedShare.start(Sockmap.global());
            HttpClient client = vertx.createHttpClient(new HttpClientOptions().setKeepAlive(true),
                    new io.vertx.core.http.PoolOptions().setHttp1MaxSize(1));
            Context context = vertx.getOrCreateContext();
            long sent = 0;
            for (int size : new int[] {64, 256 << 10}) {
                byte[] body = random(size);
                Buffer back = call(context, () -> client.request(new RequestOptions().setMethod(HttpMethod.POST)
                                .setHost("127.0.0.1").setPort(server.actualPort()).setURI("/echo"))
                        .compose(r -> r.send(Buffer.buffer(body))).compose(r -> r.body()));
                assertArrayEquals(body, back.getBytes());
                sent += 2L * size;
            }
            Buffer streamed = call(context, () -> client.request(HttpMethod.GET, server.actualPort(), "127.0.0.1", "/stream")
                    .compose(r -> r.send()).compose(r -> r.body()));
            assertEquals(chunks * chunk.length, streamed.length());
            sent += (long) chunks * chunk.length;
            await(client.close());
            witness(kind, share, connections.stop(), sent, kind + " HttpServer");
            if (kind == Kind.SOCKMAP) {
                share.assertNoBoundHits("HttpServer stream");
            }
            await(server.close());
        } finally {
            await(vertx.close());
        }
    }
}
