package io.github.sockmap4j.spring.app;

import io.github.sockmap4j.netty.grpc.SockmapGrpc;
import io.grpc.BindableService;
import io.grpc.MethodDescriptor;
import io.grpc.ServerServiceDefinition;
import io.grpc.stub.ServerCalls;
import io.grpc.stub.StreamObserver;
import io.netty.channel.Channel;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.http.client.autoconfigure.reactive.ClientHttpConnectorBuilderCustomizer;
import org.springframework.boot.http.client.reactive.ReactorClientHttpConnectorBuilder;
import org.springframework.boot.reactor.netty.NettyServerCustomizer;
import org.springframework.context.ApplicationListener;
import org.springframework.context.annotation.Bean;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.grpc.server.lifecycle.GrpcServerStartedEvent;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;
import reactor.core.publisher.Flux;

/**
 * A Spring Boot 4 service as its authors would write it, with nothing of sockmap4j in it: a
 * WebFlux echo and stream, a gRPC echo (unary and bidi streaming) served by Spring gRPC. The
 * test hooks record the channels the server accepted and WebClient connected, as seen when
 * they connected (a closed channel has lost its handlers).
 */
@SpringBootApplication
@RestController
public class EchoApplication {
    public static final String SERVICE = "sockmap4j.test.Echo";
    public static final MethodDescriptor<byte[], byte[]> UNARY = method("Unary", MethodDescriptor.MethodType.UNARY);
    public static final MethodDescriptor<byte[], byte[]> STREAM =
            method("Stream", MethodDescriptor.MethodType.BIDI_STREAMING);

    /** Channel of each connection the web server accepted, and whether it was the transport's then. */
    public static final Map<Channel, Boolean> SERVER_CHANNELS = new ConcurrentHashMap<>();
    public static final Map<Channel, Boolean> CLIENT_CHANNELS = new ConcurrentHashMap<>();
    public static final AtomicInteger GRPC_PORT = new AtomicInteger();
    /** The threads the unary echo ran on. */
    public static final java.util.Set<String> UNARY_THREADS = ConcurrentHashMap.newKeySet();

    private static MethodDescriptor<byte[], byte[]> method(String name, MethodDescriptor.MethodType type) {
        return MethodDescriptor.<byte[], byte[]>newBuilder().setType(type)
                .setFullMethodName(MethodDescriptor.generateFullMethodName(SERVICE, name))
                .setRequestMarshaller(SockmapGrpc.bytesMarshaller())
                .setResponseMarshaller(SockmapGrpc.bytesMarshaller()).build();
    }

    @PostMapping("/echo")
    public Flux<DataBuffer> echo(@RequestBody Flux<DataBuffer> body) {
        return body;
    }

    /** {@code n} chunks of {@code size} bytes, streamed as they are made. */
    @GetMapping("/stream")
    public Flux<byte[]> stream(@RequestParam("n") int n, @RequestParam("size") int size) {
        byte[] chunk = new byte[size];
        java.util.Arrays.fill(chunk, (byte) 'x');
        return Flux.range(0, n).map(i -> chunk);
    }

    @Bean
    BindableService echoService() {
        return () -> ServerServiceDefinition.builder(SERVICE)
                .addMethod(UNARY, ServerCalls.asyncUnaryCall((byte[] req, StreamObserver<byte[]> out) -> {
                    UNARY_THREADS.add(Thread.currentThread().getName());
                    out.onNext(req);
                    out.onCompleted();
                }))
                .addMethod(STREAM, ServerCalls.asyncBidiStreamingCall(out -> new StreamObserver<byte[]>() {
                    @Override
                    public void onNext(byte[] value) {
                        out.onNext(value);
                    }

                    @Override
                    public void onError(Throwable t) {
                        out.onError(t);
                    }

                    @Override
                    public void onCompleted() {
                        out.onCompleted();
                    }
                }))
                .build();
    }

    @Bean
    ApplicationListener<GrpcServerStartedEvent> grpcPort() {
        return e -> GRPC_PORT.set(e.getPort());
    }

    @Bean
    NettyServerCustomizer recordServerChannels() {
        return server -> server.doOnConnection(c -> record(SERVER_CHANNELS, c.channel()));
    }

    @Bean
    ClientHttpConnectorBuilderCustomizer<ReactorClientHttpConnectorBuilder> recordClientChannels() {
        return builder -> builder.withHttpClientCustomizer(
                client -> client.doOnConnected(c -> record(CLIENT_CHANNELS, c.channel())));
    }

    private static void record(Map<Channel, Boolean> into, Channel ch) {
        Channel conn = ch.parent() instanceof io.netty.channel.socket.SocketChannel ? ch.parent() : ch;
        into.computeIfAbsent(conn, io.github.sockmap4j.netty.SockmapNetty::isTransportChannel);
    }
}
