package com.example.sockmap;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapStats;
import io.github.sockmap4j.vertx.SockmapVertx;
import io.vertx.core.Context;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpClient;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.RequestOptions;
import java.util.concurrent.TimeUnit;

/**
 * A Vert.x HTTP server and a client calling it, on the sockmap transport (one line). Run with a
 * call count; prints what the kernel redirected and exits.
 */
public final class Service {
    public static void main(String[] args) throws Exception {
        int calls = args.length > 0 ? Integer.parseInt(args[0]) : 1000;
        Vertx vertx = Vertx.builder().withTransport(SockmapVertx.transport()).build();
        try {
            HttpServer server = vertx.createHttpServer()
                    .requestHandler(req -> req.body().onSuccess(b -> req.response().end(b)));
            server.listen(0, "127.0.0.1").toCompletionStage().toCompletableFuture().get(30, TimeUnit.SECONDS);
            HttpClient client = vertx.createHttpClient();
            Sockmap sockmap = Sockmap.global();
            SockmapStats before = sockmap.stats();
            Buffer body = Buffer.buffer(new byte[4096]);
            // Each call chained on a Vert.x context: chained from main, a response's body() can be
            // asked for after Vert.x has delivered that body, and the call never completes.
            Context context = vertx.getOrCreateContext();
            for (int i = 0; i < calls; i++) {
                Promise<Buffer> done = Promise.promise();
                context.runOnContext(v -> client.request(new RequestOptions().setMethod(HttpMethod.POST)
                                .setHost("127.0.0.1").setPort(server.actualPort()).setURI("/echo"))
                        .compose(r -> r.send(body)).compose(r -> r.body()).onComplete(done));
                done.future().toCompletionStage().toCompletableFuture().get(10, TimeUnit.SECONDS);
            }
            SockmapStats after = sockmap.stats();
            System.out.printf("%d calls of %d bytes%n", calls, body.length());
            System.out.printf("example=vertx active=%s redirected=%d tcp=%d%n", sockmap.isActive(),
                    after.bytesRedirected() - before.bytesRedirected(), after.bytesPassed() - before.bytesPassed());
        } finally {
            vertx.close().toCompletionStage().toCompletableFuture().get(30, TimeUnit.SECONDS);
        }
    }
}
