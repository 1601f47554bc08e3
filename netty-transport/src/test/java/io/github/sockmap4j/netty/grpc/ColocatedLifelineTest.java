package io.github.sockmap4j.netty.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.common.util.concurrent.ListenableFuture;
import io.github.sockmap4j.colocated.grpc.ColocatedGrpc;
import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ServerCalls;
import io.netty.channel.epoll.EpollSocketChannel;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * How a channel's own end of its TCP connection ends its co-located connection (no root), as the
 * channel's shutdown ends its HTTP/2 calls: {@code shutdown} lets a call open on the co-located
 * connection be answered; {@code shutdownNow} ends it at once.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ColocatedLifelineTest {
    private static final MethodDescriptor<byte[], byte[]> HOLD = MethodDescriptor.<byte[], byte[]>newBuilder()
            .setType(MethodDescriptor.MethodType.UNARY).setFullMethodName("test.Lifeline/Hold")
            .setRequestMarshaller(SockmapGrpc.bytesMarshaller()).setResponseMarshaller(SockmapGrpc.bytesMarshaller()).build();
    private final List<AutoCloseable> cleanup = new ArrayList<>();
    private final AtomicInteger colocated = new AtomicInteger();
    /** The answers of HOLD's calls, held until a test gives them. */
    private final BlockingQueue<Runnable> held = new LinkedBlockingQueue<>();

    @AfterEach
    void tearDown() throws Exception {
        for (int i = cleanup.size() - 1; i >= 0; i--) {
            cleanup.get(i).close();
        }
    }

    private Server server() throws Exception {
        ServerServiceDefinition hold = ServerServiceDefinition.builder(HOLD.getServiceName())
                .addMethod(HOLD, ServerCalls.asyncUnaryCall((req, out) -> held.add(() -> {
                    out.onNext(req);
                    out.onCompleted();
                }))).build();
        ServerInterceptor counting = new ServerInterceptor() {
            @Override
            public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
                                                              ServerCallHandler<Q, R> next) {
                if (Boolean.TRUE.equals(call.getAttributes().get(ColocatedGrpc.TRANSPORT_ATTR_COLOCATED))) {
                    colocated.incrementAndGet();
                }
                return next.startCall(call, headers);
            }
        };
        Server s = ColocatedGrpc.configure(NettyServerBuilder.forAddress(
                        new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)))
                .addService(ColocatedPeer.service(x -> { })).addService(hold).intercept(counting).build().start();
        cleanup.add(() -> {
            s.shutdownNow();
            assertTrue(s.awaitTermination(10, TimeUnit.SECONDS), "the server terminates");
        });
        return s;
    }

    /** A channel as {@code SockmapGrpc} makes one with the switch on, with a call open on its co-located connection. */
    private ManagedChannel channelWithAHeldCall(Server s, AtomicReference<ListenableFuture<byte[]>> open) throws Exception {
        TcpLifelines lifelines = new TcpLifelines(EpollSocketChannel::new);
        ManagedChannel ch = ColocatedGrpc.configure(NettyChannelBuilder.forAddress("127.0.0.1", s.getPort())
                .channelFactory(lifelines).eventLoopGroup(SockmapGrpc.sharedGroup()).usePlaintext(), lifelines).build();
        cleanup.add(() -> {
            ch.shutdownNow();
            assertTrue(ch.awaitTermination(10, TimeUnit.SECONDS), "the channel terminates");
        });
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (colocated.get() == 0) {
            assertTrue(System.nanoTime() < deadline, "no call went co-located: " + ColocatedGrpc.fallbacks());
            ClientCalls.blockingUnaryCall(ch, ColocatedPeer.ECHO, CallOptions.DEFAULT.withDeadlineAfter(10, TimeUnit.SECONDS),
                    new byte[] {1});
        }
        int before = colocated.get();
        open.set(ClientCalls.futureUnaryCall(ch.newCall(HOLD, CallOptions.DEFAULT.withDeadlineAfter(30, TimeUnit.SECONDS)),
                new byte[] {7}));
        Runnable answer = held.poll(10, TimeUnit.SECONDS);
        assertTrue(answer != null, "the held call reached the server");
        assertEquals(before + 1, colocated.get(), "the held call went co-located");
        held.add(answer);
        return ch;
    }

    @Test
    void aGracefulShutdownLetsTheCallOpenOnTheColocatedConnectionBeAnswered() throws Exception {
        Server s = server();
        AtomicReference<ListenableFuture<byte[]>> open = new AtomicReference<>();
        ManagedChannel ch = channelWithAHeldCall(s, open);
        ch.shutdown();
        assertTrue(ch.awaitTermination(10, TimeUnit.SECONDS), "the channel's own connections end");
        held.take().run();
        assertEquals(7, open.get().get(10, TimeUnit.SECONDS)[0], "the open call was answered");
    }

    @Test
    void shutdownNowEndsTheCallOpenOnTheColocatedConnectionAtOnce() throws Exception {
        Server s = server();
        AtomicReference<ListenableFuture<byte[]>> open = new AtomicReference<>();
        ManagedChannel ch = channelWithAHeldCall(s, open);
        ch.shutdownNow();
        ExecutionException e = org.junit.jupiter.api.Assertions.assertThrows(ExecutionException.class,
                () -> open.get().get(5, TimeUnit.SECONDS), "the open call ends before the server answers it");
        Status status = ((StatusRuntimeException) e.getCause()).getStatus();
        assertTrue(status.getCode() == Status.Code.UNAVAILABLE || status.getCode() == Status.Code.CANCELLED, status.toString());
    }
}
