package io.github.sockmap4j.examples;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapStats;
import io.github.sockmap4j.netty.grpc.SockmapGrpc;
import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerServiceDefinition;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ServerCalls;
import java.io.IOException;
import java.util.Arrays;
import java.util.Locale;
import java.util.concurrent.TimeUnit;

/**
 * A gRPC server and client over the fast path, each one line away from stock grpc-netty.
 *
 * <pre>
 * GrpcDemo server PORT          serve until stopped (port opted in while bound)
 * GrpcDemo client PORT [CALLS]  call a server, print unary 1 KiB p50/p99
 * GrpcDemo                      both in this JVM: a stock pair, then a sockmap4j pair
 * </pre>
 */
public final class GrpcDemo {
    private GrpcDemo() {
    }

    static final MethodDescriptor.Marshaller<byte[]> BYTES = SockmapGrpc.bytesMarshaller();
    static final MethodDescriptor<byte[], byte[]> ECHO = MethodDescriptor.<byte[], byte[]>newBuilder()
            .setType(MethodDescriptor.MethodType.UNARY).setFullMethodName("demo.Echo/Echo")
            .setRequestMarshaller(BYTES).setResponseMarshaller(BYTES).build();

    static Server server(int port, boolean fast) throws IOException {
        NettyServerBuilder b = NettyServerBuilder.forPort(port).addService(ServerServiceDefinition.builder("demo.Echo")
                .addMethod(ECHO, ServerCalls.asyncUnaryCall((req, out) -> {
                    out.onNext(req);
                    out.onCompleted();
                })).build());
        return (fast ? SockmapGrpc.configure(b) : b).build().start();
    }

    static ManagedChannel channel(int port, boolean fast) {
        NettyChannelBuilder b = NettyChannelBuilder.forAddress("127.0.0.1", port).usePlaintext();
        return (fast ? SockmapGrpc.configure(b) : b).build();
    }

    /** p50 and p99 in microseconds of {@code calls} unary calls of 1 KiB, after a warm-up. */
    static double[] measure(ManagedChannel ch, int calls) {
        byte[] req = new byte[1024];
        for (int i = 0; i < calls / 5; i++) {
            ClientCalls.blockingUnaryCall(ch, ECHO, CallOptions.DEFAULT, req);
        }
        long[] t = new long[calls];
        for (int i = 0; i < calls; i++) {
            long t0 = System.nanoTime();
            ClientCalls.blockingUnaryCall(ch, ECHO, CallOptions.DEFAULT, req);
            t[i] = System.nanoTime() - t0;
        }
        Arrays.sort(t);
        return new double[] {t[calls / 2] / 1000.0, t[(int) (calls * 0.99)] / 1000.0};
    }

    public static void main(String[] args) throws Exception {
        Sockmap sockmap = Sockmap.global();
        System.out.println("fast path: " + (sockmap.isActive() ? "active" : "off (" + sockmap.unavailabilityCause() + ")"));
        String mode = args.length > 0 ? args[0] : "both";
        switch (mode) {
            case "server" -> {
                Server s = server(Integer.parseInt(args[1]), true);
                System.out.println("serving on port " + s.getPort());
                s.awaitTermination();
            }
            case "client" -> {
                ManagedChannel ch = channel(Integer.parseInt(args[1]), true);
                double[] r = measure(ch, args.length > 2 ? Integer.parseInt(args[2]) : 5000);
                System.out.printf(Locale.ROOT, "unary 1 KiB: p50 %.1f us, p99 %.1f us%n", r[0], r[1]);
                ch.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
            }
            default -> {
                int calls = args.length > 1 ? Integer.parseInt(args[1]) : 5000;
                double[][] r = new double[2][];
                for (int fast = 0; fast < 2; fast++) {
                    Server s = server(0, fast == 1);
                    ManagedChannel ch = channel(s.getPort(), fast == 1);
                    SockmapStats before = sockmap.stats();
                    r[fast] = measure(ch, calls);
                    SockmapStats after = sockmap.stats();
                    System.out.printf(Locale.ROOT, "%-22s unary 1 KiB: p50 %7.1f us, p99 %7.1f us, %d B redirected%n",
                            fast == 1 ? "sockmap4j grpc-netty" : "stock grpc-netty", r[fast][0], r[fast][1],
                            after.bytesRedirected() - before.bytesRedirected());
                    ch.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
                    s.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
                }
                System.out.printf(Locale.ROOT, "ratio sockmap4j / stock: p50 %.2f, p99 %.2f (one run, %d calls)%n",
                        r[1][0] / r[0][0], r[1][1] / r[0][1], calls);
            }
        }
    }
}
