package com.example.unchanged;

import io.grpc.BindableService;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerServiceDefinition;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ServerCalls;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.annotation.Profile;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.core.io.buffer.DefaultDataBufferFactory;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.reactive.function.client.WebClient;
import reactor.core.publisher.Flux;

/**
 * The services, as they ship without sockmap4j:
 * <pre>
 *   webflux ADDR PORT GRPC_PORT   WebFlux (Reactor Netty) serving /echo and /stream, and a gRPC echo (grpc-netty-shaded)
 *   mvc ADDR PORT                 Spring MVC on Tomcat serving /echo
 *   client-http ADDR PORT CALLS SIZE   WebClient: CALLS echoes of SIZE random bytes, each checked
 *   client-grpc ADDR PORT CALLS SIZE   gRPC (grpc-netty-shaded): the same
 *   client-grpc-proto ADDR PORT CALLS SIZE   the same, each message as protobuf's {@code bytes data = 1}
 *   client-stream ADDR PORT BYTES [MBPS]  WebClient: GET /stream (the server paced at MBPS MB/s if given),
 *                                      every 8-byte sequence number checked
 * </pre>
 * Servers print "ready=1" once they listen; clients "ok=1" (and what they measured) once done.
 */
@SpringBootApplication
public class Service {
    static final MethodDescriptor<byte[], byte[]> ECHO = MethodDescriptor.<byte[], byte[]>newBuilder()
            .setType(MethodDescriptor.MethodType.UNARY).setFullMethodName("unchanged.Echo/Echo")
            .setRequestMarshaller(new Bytes()).setResponseMarshaller(new Bytes()).build();

    /**
     * The same method as a protobuf service declares it ({@code message Msg { bytes data = 1; }}, for
     * a server with generated code such as Quarkus gRPC's): field 1 framed by hand, no protobuf here.
     */
    static final MethodDescriptor<byte[], byte[]> ECHO_PROTO = ECHO.toBuilder(new ProtoBytes(), new ProtoBytes())
            .build();

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "webflux" -> {
                Server grpc = NettyServerBuilder.forAddress(new InetSocketAddress(args[1], Integer.parseInt(args[3])))
                        .addService((BindableService) () -> ServerServiceDefinition.builder("unchanged.Echo")
                                .addMethod(ECHO, ServerCalls.asyncUnaryCall((req, out) -> {
                                    out.onNext(req);
                                    out.onCompleted();
                                })).build())
                        .build().start();
                new SpringApplicationBuilder(Service.class).web(WebApplicationType.REACTIVE).profiles("webflux")
                        .properties("server.address=" + args[1], "server.port=" + args[2], "spring.main.banner-mode=off")
                        .run();
                ready();
                grpc.awaitTermination();
            }
            case "mvc" -> {
                new SpringApplicationBuilder(Service.class).web(WebApplicationType.SERVLET).profiles("mvc")
                        .properties("server.address=" + args[1], "server.port=" + args[2], "spring.main.banner-mode=off")
                        .run();
                ready();
            }
            case "client-http" -> httpClient(args[1], Integer.parseInt(args[2]), Integer.parseInt(args[3]),
                    Integer.parseInt(args[4]));
            case "client-grpc" -> grpcClient(ECHO, args[1], Integer.parseInt(args[2]), Integer.parseInt(args[3]),
                    Integer.parseInt(args[4]));
            case "client-grpc-proto" -> grpcClient(ECHO_PROTO, args[1], Integer.parseInt(args[2]),
                    Integer.parseInt(args[3]), Integer.parseInt(args[4]));
            case "client-stream" -> streamClient(args[1], Integer.parseInt(args[2]), Long.parseLong(args[3]),
                    args.length > 4 ? Long.parseLong(args[4]) : 0);
            default -> throw new IllegalArgumentException("unknown mode " + args[0]);
        }
    }

    static void ready() {
        System.out.println("ready=1");
        System.out.flush();
    }

    static void done(String what) {
        System.out.println(what);
        System.out.println("ok=1");
        System.out.flush();
        System.exit(0);
    }

    static String url(String addr, int port) {
        return "http://" + (addr.contains(":") ? "[" + addr + "]" : addr) + ":" + port;
    }

    static void httpClient(String addr, int port, int calls, int size) {
        WebClient client = WebClient.builder().baseUrl(url(addr, port))
                .codecs(c -> c.defaultCodecs().maxInMemorySize(size + 1024)).build();
        Random random = new Random(7);
        for (int i = 0; i < calls; i++) {
            byte[] body = new byte[size];
            random.nextBytes(body);
            byte[] back = client.post().uri("/echo").bodyValue(body).retrieve().bodyToMono(byte[].class).block();
            if (!Arrays.equals(body, back)) {
                throw new IllegalStateException("echo " + i + " differs");
            }
        }
        done("calls=" + calls);
    }

    static void grpcClient(MethodDescriptor<byte[], byte[]> method, String addr, int port, int calls, int size)
            throws InterruptedException {
        ManagedChannel channel = NettyChannelBuilder.forAddress(addr, port).usePlaintext().build();
        Random random = new Random(7);
        for (int i = 0; i < calls; i++) {
            byte[] body = new byte[size];
            random.nextBytes(body);
            byte[] back = ClientCalls.blockingUnaryCall(channel, method, io.grpc.CallOptions.DEFAULT, body);
            if (!Arrays.equals(body, back)) {
                throw new IllegalStateException("call " + i + " differs");
            }
        }
        channel.shutdown().awaitTermination(10, TimeUnit.SECONDS);
        done("calls=" + calls);
    }

    static void streamClient(String addr, int port, long bytes, long mbps) {
        long start = System.nanoTime();
        long[] state = new long[3]; // bytes seen, next sequence number, a carry of up to 7 bytes' count
        byte[] carry = new byte[8];
        WebClient.create(url(addr, port)).get().uri("/stream?bytes=" + bytes + "&mbps=" + mbps).retrieve().bodyToFlux(DataBuffer.class)
                .doOnNext(b -> {
                    ByteBuffer in = ByteBuffer.allocate(b.readableByteCount());
                    b.toByteBuffer(in);
                    org.springframework.core.io.buffer.DataBufferUtils.release(b);
                    state[0] += in.remaining();
                    while (state[2] == 0 && in.remaining() >= 8) {
                        long v = in.getLong();
                        if (v != state[1]) {
                            throw new IllegalStateException("sequence number " + state[1] + " is " + v);
                        }
                        state[1]++;
                    }
                    while (in.hasRemaining()) {
                        carry[(int) state[2]++] = in.get();
                        if (state[2] == 8) {
                            long v = ByteBuffer.wrap(carry).getLong();
                            if (v != state[1]) {
                                throw new IllegalStateException("sequence number " + state[1] + " is " + v);
                            }
                            state[1]++;
                            state[2] = 0;
                        }
                    }
                }).blockLast();
        if (state[0] != bytes) {
            throw new IllegalStateException("got " + state[0] + " of " + bytes + " bytes");
        }
        double reached = bytes / 1e6 / ((System.nanoTime() - start) / 1e9);
        done(String.format(java.util.Locale.ROOT, "bytes=%d\nmbps=%.0f", bytes, reached));
    }

    /** The echo, on WebFlux and on Spring MVC alike. */
    @RestController
    static class Echo {
        @PostMapping("/echo")
        byte[] echo(@RequestBody byte[] body) {
            return body;
        }
    }

    /** A large response on WebFlux: big-endian 8-byte sequence numbers in 64 KiB buffers. */
    @RestController
    @Profile("webflux")
    static class Stream {
        @GetMapping("/stream")
        Flux<DataBuffer> stream(@RequestParam long bytes, @RequestParam(defaultValue = "0") long mbps) {
            int chunk = 64 << 10;
            DefaultDataBufferFactory f = DefaultDataBufferFactory.sharedInstance;
            Flux<Integer> chunks = Flux.range(0, (int) ((bytes + chunk - 1) / chunk));
            if (mbps > 0) {
                chunks = chunks.delayElements(java.time.Duration.ofNanos(chunk * 1000L / mbps));
            }
            return chunks.map(i -> {
                int n = (int) Math.min(chunk, bytes - (long) i * chunk);
                ByteBuffer b = ByteBuffer.allocate(n);
                long first = (long) i * chunk / 8;
                for (int k = 0; k < n / 8; k++) {
                    b.putLong(first + k);
                }
                b.flip();
                return f.wrap(b);
            });
        }
    }

    /** byte[] as the protobuf message {@code Msg { bytes data = 1; }}. */
    static final class ProtoBytes implements MethodDescriptor.Marshaller<byte[]> {
        @Override
        public InputStream stream(byte[] value) {
            java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream(value.length + 6);
            out.write(0x0A); // field 1, length-delimited
            for (int n = value.length; ; n >>>= 7) {
                if ((n & ~0x7F) == 0) {
                    out.write(n);
                    break;
                }
                out.write((n & 0x7F) | 0x80);
            }
            out.writeBytes(value);
            return new ByteArrayInputStream(out.toByteArray());
        }

        @Override
        public byte[] parse(InputStream stream) {
            try {
                byte[] all = stream.readAllBytes();
                if (all.length == 0) {
                    return all;
                }
                if (all[0] != 0x0A) {
                    throw new IllegalStateException("not field 1 of Msg: tag " + all[0]);
                }
                int len = 0;
                int i = 1;
                for (int shift = 0; ; shift += 7) {
                    int b = all[i++] & 0xFF;
                    len |= (b & 0x7F) << shift;
                    if ((b & 0x80) == 0) {
                        break;
                    }
                }
                return Arrays.copyOfRange(all, i, i + len);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    }

    /** byte[] as gRPC messages. */
    static final class Bytes implements MethodDescriptor.Marshaller<byte[]> {
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
    }
}
