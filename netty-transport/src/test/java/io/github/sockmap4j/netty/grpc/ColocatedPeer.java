package io.github.sockmap4j.netty.grpc;

import io.github.sockmap4j.colocated.grpc.ColocatedGrpc;
import io.grpc.CallOptions;
import io.grpc.ClientCall;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerServiceDefinition;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ServerCalls;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * The other process of {@link ColocatedKillTest}: a server or a client of the agreement over
 * plain Netty (no fast path of its own), which prints what it did and is then killed.
 */
public final class ColocatedPeer {
    static final MethodDescriptor<byte[], byte[]> ECHO = GrpcFastPathTest.method("Echo", MethodDescriptor.MethodType.UNARY);
    /** Answers with headers, then nothing: a call in flight until one end goes. */
    static final MethodDescriptor<byte[], byte[]> HANG = GrpcFastPathTest.method("Hang", MethodDescriptor.MethodType.UNARY);
    /** One message, then nothing: a stream in flight until one end goes. */
    static final MethodDescriptor<byte[], byte[]> TRICKLE =
            GrpcFastPathTest.method("Trickle", MethodDescriptor.MethodType.SERVER_STREAMING);

    private ColocatedPeer() {
    }

    /** The service both processes serve; {@code started} hears of each call that hangs. */
    static ServerServiceDefinition service(Consumer<String> started) {
        return ServerServiceDefinition.builder("sockmap4j.Echo")
                .addMethod(ECHO, ServerCalls.asyncUnaryCall((req, out) -> {
                    out.onNext(req);
                    out.onCompleted();
                }))
                .addMethod(HANG, (call, headers) -> {
                    call.sendHeaders(new Metadata());
                    call.request(1);
                    io.grpc.Context.current().addListener(c -> started.accept("CANCELLED HANG"), Runnable::run);
                    started.accept("HANG");
                    return new io.grpc.ServerCall.Listener<>() {
                    };
                })
                .addMethod(TRICKLE, ServerCalls.asyncServerStreamingCall((req, out) -> {
                    io.grpc.Context.current().addListener(c -> started.accept("CANCELLED TRICKLE"), Runnable::run);
                    out.onNext(req);
                    started.accept("TRICKLE");
                }))
                .build();
    }

    public static void main(String[] args) throws Exception {
        System.setProperty(ColocatedGrpc.SWITCH, "true");
        if (args[0].equals("server") || args[0].equals("server-at")) {
            InetAddress at = args[0].equals("server") ? InetAddress.getLoopbackAddress() : InetAddress.getByName(args[1]);
            Server s = ColocatedGrpc.configure(NettyServerBuilder.forAddress(new InetSocketAddress(at, 0)))
                    .addService(service(ColocatedPeer::say)).build().start();
            say("PORT " + s.getPort());
            s.awaitTermination();
            return;
        }
        if (args[0].equals("fallback-client")) {
            fallbackClient(args[1], Integer.parseInt(args[2]));
            return;
        }
        int port = Integer.parseInt(args[1]);
        ManagedChannel ch = ColocatedGrpc.configure(NettyChannelBuilder.forAddress("127.0.0.1", port)).usePlaintext().build();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (ColocatedGrpc.upgrades() == 0 && System.nanoTime() < deadline) {
            ClientCalls.blockingUnaryCall(ch, ECHO, CallOptions.DEFAULT.withDeadlineAfter(10, TimeUnit.SECONDS), new byte[8]);
        }
        say("UPGRADED " + ColocatedGrpc.upgrades());
        ClientCall<byte[], byte[]> hang = ch.newCall(HANG, CallOptions.DEFAULT);
        hang.start(new ClientCall.Listener<>() {
        }, new Metadata());
        hang.sendMessage(new byte[8]);
        hang.halfClose();
        ClientCall<byte[], byte[]> trickle = ch.newCall(TRICKLE, CallOptions.DEFAULT);
        trickle.start(new ClientCall.Listener<>() {
        }, new Metadata());
        trickle.request(10);
        trickle.sendMessage(new byte[8]);
        trickle.halfClose();
        say("CALLING");
        Thread.currentThread().join(); // until killed
    }

    /**
     * A client of the agreement that calls until an agreement fell back, says why ("FALLBACK
     * REASON words", each reason but OFF), makes 20 more calls ("CALLS OK 20") and says how many
     * co-located connections it made ("UPGRADES n").
     */
    private static void fallbackClient(String host, int port) throws InterruptedException {
        ManagedChannel ch = ColocatedGrpc.configure(NettyChannelBuilder.forAddress(host, port)).usePlaintext().build();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (fellBack().isEmpty() && ColocatedGrpc.upgrades() == 0 && System.nanoTime() < deadline) {
            ClientCalls.blockingUnaryCall(ch, ECHO, CallOptions.DEFAULT.withDeadlineAfter(10, TimeUnit.SECONDS), new byte[8]);
        }
        for (io.github.sockmap4j.colocated.grpc.Fallback f : fellBack()) {
            say("FALLBACK " + f + " " + ColocatedGrpc.lastFallback(f));
        }
        int ok = 0;
        for (int i = 0; i < 20; i++) {
            byte[] m = new byte[] {(byte) i};
            if (java.util.Arrays.equals(m, ClientCalls.blockingUnaryCall(ch, ECHO,
                    CallOptions.DEFAULT.withDeadlineAfter(10, TimeUnit.SECONDS), m))) {
                ok++;
            }
        }
        say("CALLS OK " + ok);
        say("UPGRADES " + ColocatedGrpc.upgrades());
        ch.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }

    private static java.util.List<io.github.sockmap4j.colocated.grpc.Fallback> fellBack() {
        return ColocatedGrpc.fallbacks().entrySet().stream()
                .filter(e -> e.getValue() > 0 && e.getKey() != io.github.sockmap4j.colocated.grpc.Fallback.OFF)
                .map(java.util.Map.Entry::getKey).toList();
    }

    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
