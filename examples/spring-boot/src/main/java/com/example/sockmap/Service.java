package com.example.sockmap;

import io.grpc.BindableService;
import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.ServerServiceDefinition;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ServerCalls;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.web.server.context.WebServerApplicationContext;
import org.springframework.context.ApplicationListener;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.grpc.client.GrpcChannelFactory;
import org.springframework.grpc.server.lifecycle.GrpcServerStartedEvent;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.reactive.function.client.WebClient;
import reactor.core.publisher.Mono;

/**
 * A WebFlux endpoint, a gRPC service, and a client of each (WebClient, a Spring gRPC channel)
 * calling them: in a real system the callers are other services on the same node. Nothing here
 * names sockmap4j; the starter puts all four on the fast path. Run with a call count; it prints
 * what the kernel redirected, as the {@code sockmap} health component reports it, and exits.
 */
@SpringBootApplication
@RestController
public class Service {
    static final MethodDescriptor.Marshaller<byte[]> BYTES = new MethodDescriptor.Marshaller<>() {
        @Override
        public InputStream stream(byte[] value) {
            return new ByteArrayInputStream(value);
        }

        @Override
        public byte[] parse(InputStream stream) {
            try {
                return stream.readAllBytes();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    };
    static final MethodDescriptor<byte[], byte[]> ECHO = MethodDescriptor.<byte[], byte[]>newBuilder()
            .setType(MethodDescriptor.MethodType.UNARY).setFullMethodName("example.Echo/Echo")
            .setRequestMarshaller(BYTES).setResponseMarshaller(BYTES).build();
    static final AtomicInteger GRPC_PORT = new AtomicInteger();

    @PostMapping("/echo")
    public Mono<byte[]> echo(@RequestBody byte[] body) {
        return Mono.just(body);
    }

    @Bean
    BindableService echoService() {
        return () -> ServerServiceDefinition.builder("example.Echo")
                .addMethod(ECHO, ServerCalls.asyncUnaryCall((req, out) -> {
                    out.onNext(req);
                    out.onCompleted();
                })).build();
    }

    @Bean
    ApplicationListener<GrpcServerStartedEvent> grpcPort() {
        return e -> GRPC_PORT.set(e.getPort());
    }

    public static void main(String[] args) {
        int calls = args.length > 0 ? Integer.parseInt(args[0]) : 1000;
        long started = System.nanoTime();
        try (ConfigurableApplicationContext context = SpringApplication.run(Service.class)) {
            System.out.printf("started in %d ms%n", TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started));
            if (calls == 0) {
                idle(context);
                return;
            }
            WebClient web = context.getBean(WebClient.Builder.class)
                    .baseUrl("http://127.0.0.1:" + ((WebServerApplicationContext) context).getWebServer().getPort())
                    .build();
            ManagedChannel grpc = context.getBean(GrpcChannelFactory.class).createChannel("127.0.0.1:" + GRPC_PORT.get());
            String before = sockmapHealth(web);
            byte[] body = new byte[4096];
            for (int i = 0; i < calls; i++) {
                web.post().uri("/echo").bodyValue(body).retrieve().bodyToMono(byte[].class).block(Duration.ofSeconds(10));
                ClientCalls.blockingUnaryCall(grpc, ECHO, CallOptions.DEFAULT.withDeadlineAfter(10, TimeUnit.SECONDS), body);
            }
            grpc.shutdownNow();
            System.out.printf("%d WebFlux and %d gRPC calls of %d bytes%n", calls, calls, body.length);
            System.out.println("before: " + before);
            System.out.println("after:  " + sockmapHealth(web));
        }
    }

    /** What the starter's health component says: active or why not, and the kernel's counters. */
    static String sockmapHealth(WebClient web) {
        return web.get().uri("/actuator/health/sockmap").exchangeToMono(r -> r.statusCode().is2xxSuccessful()
                        ? r.bodyToMono(String.class) : Mono.just("no sockmap health component (sockmap4j not on the class path)"))
                .block(Duration.ofSeconds(10));
    }

    /** With 0 calls: stays up, idle, until killed (for measuring what an idle service costs). */
    static void idle(ConfigurableApplicationContext context) {
        System.out.println("idle");
        try {
            Thread.sleep(Long.MAX_VALUE);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
