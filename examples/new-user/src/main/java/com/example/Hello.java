package com.example;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapStats;
import io.github.sockmap4j.SockmapUnavailableException;
import io.github.sockmap4j.netty.SockmapNetty;
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

/** A gRPC echo over the sockmap4j transport: prints whether epoll ran and how much was redirected. */
public final class Hello {
    static final MethodDescriptor.Marshaller<byte[]> BYTES = SockmapGrpc.bytesMarshaller();
    static final MethodDescriptor<byte[], byte[]> ECHO = MethodDescriptor.<byte[], byte[]>newBuilder()
            .setType(MethodDescriptor.MethodType.UNARY).setFullMethodName("hello.Echo/Echo")
            .setRequestMarshaller(BYTES).setResponseMarshaller(BYTES).build();

    public static void main(String[] args) throws Exception {
        int calls = args.length > 0 ? Integer.parseInt(args[0]) : 1000;
        ServerServiceDefinition echo = ServerServiceDefinition.builder("hello.Echo")
                .addMethod(ECHO, ServerCalls.asyncUnaryCall((req, out) -> {
                    out.onNext(req);
                    out.onCompleted();
                })).build();
        Server server;
        try {
            server = SockmapGrpc.configure(NettyServerBuilder.forPort(0)).addService(echo).build().start();
        } catch (IOException e) {
            System.out.println("start=failed " + (e.getCause() instanceof SockmapUnavailableException u
                    ? "SockmapUnavailableException: " + u.getMessage() : e.toString()));
            return;
        }
        Sockmap sockmap = Sockmap.global();
        SockmapStats before = sockmap.stats();
        ManagedChannel channel = SockmapGrpc.configure(NettyChannelBuilder.forAddress("localhost", server.getPort()))
                .usePlaintext().build();
        try {
            for (int i = 0; i < calls; i++) {
                ClientCalls.blockingUnaryCall(channel, ECHO, CallOptions.DEFAULT, new byte[] {(byte) i});
            }
        } finally {
            channel.shutdownNow();
            server.shutdownNow();
        }
        SockmapStats after = sockmap.stats();
        System.out.println("start=ok epoll=" + SockmapNetty.isEpollAvailable() + " active=" + sockmap.isActive()
                + " redirected=" + (after.messagesRedirected() - before.messagesRedirected())
                + " tcp=" + (after.messagesPassed() - before.messagesPassed()));
    }
}
