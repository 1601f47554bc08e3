package io.github.sockmap4j.bench;

import io.github.sockmap4j.netty.grpc.SockmapGrpc;
import io.grpc.MethodDescriptor;
import io.grpc.ServerServiceDefinition;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.ServerCalls;

/**
 * The gRPC service the benchmarks call over every transport: a unary echo of the request's bytes,
 * and a server stream of {@link #STREAM_MESSAGES} messages of 64 KiB.
 */
final class BenchEchoService {
    private static final MethodDescriptor.Marshaller<byte[]> BYTES = SockmapGrpc.bytesMarshaller();
    /** The service's full name; its handlers never block. */
    static final String SERVICE = "bench.Echo";
    static final MethodDescriptor<byte[], byte[]> UNARY = MethodDescriptor.<byte[], byte[]>newBuilder()
            .setType(MethodDescriptor.MethodType.UNARY).setFullMethodName(SERVICE + "/Unary")
            .setRequestMarshaller(BYTES).setResponseMarshaller(BYTES).build();
    static final MethodDescriptor<byte[], byte[]> STREAM = MethodDescriptor.<byte[], byte[]>newBuilder()
            .setType(MethodDescriptor.MethodType.SERVER_STREAMING).setFullMethodName(SERVICE + "/Stream")
            .setRequestMarshaller(BYTES).setResponseMarshaller(BYTES).build();
    static final int STREAM_MESSAGES = 4096;
    private static final byte[] STREAM_MESSAGE = new byte[64 << 10];

    private BenchEchoService() {
    }

    static ServerServiceDefinition service() {
        return ServerServiceDefinition.builder(SERVICE)
                .addMethod(UNARY, ServerCalls.asyncUnaryCall((req, out) -> {
                    out.onNext(req);
                    out.onCompleted();
                }))
                .addMethod(STREAM, ServerCalls.asyncServerStreamingCall((req, out) -> {
                    // As a server streaming this much should: only while the call is ready. Writing all
                    // 256 MiB at once queued it all in the server first (with directExecutor(), on its
                    // event loop, flushed only once the handler returned), which measured that queue.
                    ServerCallStreamObserver<byte[]> call = (ServerCallStreamObserver<byte[]>) out;
                    int[] sent = {0};
                    call.setOnReadyHandler(() -> {
                        while (sent[0] < STREAM_MESSAGES && call.isReady()) {
                            call.onNext(STREAM_MESSAGE);
                            sent[0]++;
                        }
                        if (sent[0] == STREAM_MESSAGES) {
                            sent[0]++;
                            call.onCompleted();
                        }
                    });
                }))
                .build();
    }
}
