package io.github.sockmap4j.examples;

import io.github.sockmap4j.OptIn;
import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapChannel;
import io.github.sockmap4j.SockmapServerChannel;
import io.github.sockmap4j.SockmapStats;
import io.github.sockmap4j.netty.grpc.SockmapGrpc;
import io.grpc.BindableService;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.github.sockmap4j.reactor.SockmapLoopResources;
import io.github.sockmap4j.vertx.SockmapVertx;
import io.vertx.core.Vertx;
import java.io.IOException;
import reactor.netty.DisposableServer;
import reactor.netty.http.HttpResources;
import reactor.netty.http.client.HttpClient;
import reactor.netty.http.server.HttpServer;
import reactor.netty.resources.LoopResources;
import java.net.InetSocketAddress;

/**
 * The Java snippets of the project's README.md, compiled: ReadmeSnippetsTest checks that every
 * line of every {@code java} block there is here. Not meant to be run.
 */
final class ReadmeSnippets {
    private ReadmeSnippets() {
    }

    static void channels() throws IOException {
        Sockmap sockmap = Sockmap.global();                  // one line in the log says active or why not
        try (SockmapServerChannel server = sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(9000));        // port 9000 is opted in until close()
            SockmapChannel ch = (SockmapChannel) server.accept();
            ch.isAccelerated();                              // checked against the kernel's map
        }
    }

    static void reactorNetty(java.util.function.BiFunction<? super reactor.netty.http.server.HttpServerRequest,
                                     ? super reactor.netty.http.server.HttpServerResponse,
                                     ? extends org.reactivestreams.Publisher<Void>> handler) {
        LoopResources loops = SockmapLoopResources.create("my-service");
        DisposableServer server = HttpServer.create().runOn(loops).port(8080).handle(handler).bindNow();
        HttpClient client = HttpClient.create().runOn(loops);
        HttpResources.set(loops);   // or the default of every HttpServer and HttpClient that names none
        server.disposeNow();
        client.warmup().block();
    }

    static void vertx() {
        Vertx vertx = Vertx.builder().withTransport(SockmapVertx.transport()).build();
        vertx.close();
    }

    static void blockingServer() throws IOException {
        OptIn optIn = Sockmap.global().optIn(8080);   // until optIn.close()
        optIn.close();
    }

    static void grpc(int port, BindableService myService) throws IOException {
        Server server = SockmapGrpc.configure(NettyServerBuilder.forPort(port))
                .addService(myService).build().start();   // the port is opted in when start() returns
        ManagedChannel channel = SockmapGrpc.configure(NettyChannelBuilder.forAddress("localhost", port))
                .usePlaintext().build();
        channel.shutdownNow();
        server.shutdownNow();
    }

    static void state() {
        Sockmap sockmap = Sockmap.global();
        boolean active = sockmap.isActive();                 // false: plain TCP, and...
        String why = sockmap.unavailabilityCause();          // ...why, with what to do (null when active)
        String outside = sockmap.coverageProblem();          // set up, but this process is outside its cgroup
        SockmapStats stats = sockmap.stats();                // the kernel's counters
        System.out.println(active + " " + why + " " + outside + " " + stats);
    }
}
