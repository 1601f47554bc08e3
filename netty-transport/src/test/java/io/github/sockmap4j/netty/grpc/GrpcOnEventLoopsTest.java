package io.github.sockmap4j.netty.grpc;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapStats;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ForwardingClientCall;
import io.grpc.ForwardingClientCallListener;
import io.grpc.ForwardingServerCallListener;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.Status;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * {@link GrpcFastPathTest}'s calls with the echo service on the event loops
 * ({@link SockmapGrpc#runOnEventLoops(NettyServerBuilder, java.util.Collection)}) and the
 * channel's callbacks there too: every server callback of the echo service, and every callback of
 * a call that brought no executor of its own, must run on one of the transport's loops.
 */
@Tag("kernel")
class GrpcOnEventLoopsTest extends GrpcFastPathTest {
    /** Callbacks that ran off the loops: "side method thread". */
    final Set<String> offLoop = ConcurrentHashMap.newKeySet();
    final AtomicInteger serverOnLoop = new AtomicInteger();
    /** Replies' onMessage on a loop: each runs before its call's future completes. */
    final AtomicInteger clientOnLoop = new AtomicInteger();
    /** Calls' onClose on a loop: may still be on its way when the test reads the count. */
    final AtomicInteger clientClosesOnLoop = new AtomicInteger();

    void ran(String side, String what, AtomicInteger onLoop) {
        if (LoopExecutionTest.inLoop(SockmapGrpc.group(profile()))) {
            onLoop.incrementAndGet();
        } else {
            offLoop.add(side + " " + what + " " + Thread.currentThread().getName());
        }
    }

    final ServerInterceptor serverThreads = new ServerInterceptor() {
        @Override
        public <Q, A> ServerCall.Listener<Q> interceptCall(ServerCall<Q, A> call, Metadata headers,
                ServerCallHandler<Q, A> next) {
            String m = call.getMethodDescriptor().getBareMethodName();
            ran("server", m + " start", serverOnLoop);
            return new ForwardingServerCallListener.SimpleForwardingServerCallListener<>(next.startCall(call, headers)) {
                @Override
                public void onMessage(Q message) {
                    ran("server", m + " onMessage", serverOnLoop);
                    super.onMessage(message);
                }

                @Override
                public void onHalfClose() {
                    ran("server", m + " onHalfClose", serverOnLoop);
                    super.onHalfClose();
                }
            };
        }
    };

    final ClientInterceptor clientThreads = new ClientInterceptor() {
        @Override
        public <Q, A> ClientCall<Q, A> interceptCall(MethodDescriptor<Q, A> method, CallOptions options, Channel next) {
            if (options.getExecutor() != null) {
                return next.newCall(method, options); // a blocking stub's: its callbacks run on the caller's thread
            }
            String m = method.getBareMethodName();
            return new ForwardingClientCall.SimpleForwardingClientCall<>(next.newCall(method, options)) {
                @Override
                public void start(Listener<A> listener, Metadata headers) {
                    super.start(new ForwardingClientCallListener.SimpleForwardingClientCallListener<>(listener) {
                        @Override
                        public void onMessage(A message) {
                            ran("client", m + " onMessage", clientOnLoop);
                            super.onMessage(message);
                        }

                        @Override
                        public void onClose(Status status, Metadata trailers) {
                            ran("client", m + " onClose", clientClosesOnLoop);
                            super.onClose(status, trailers);
                        }
                    }, headers);
                }
            };
        }
    };

    @Override
    NettyServerBuilder execution(NettyServerBuilder builder) {
        return SockmapGrpc.runOnEventLoops(builder, Set.of("sockmap4j.Echo")).intercept(serverThreads);
    }

    @Override
    NettyChannelBuilder execution(NettyChannelBuilder builder) {
        return SockmapGrpc.runOnEventLoops(builder).intercept(clientThreads);
    }

    /**
     * Connected before its first call. A call started earlier waits in gRPC's delayed transport,
     * and the thread that hands it to the real one (gRPC's executor, where the channel's
     * connectivity update arrived) may run its first callbacks: once in a clean-clone CI run,
     * {@code bidiStreaming}'s first reply ran on {@code grpc-default-executor-0}.
     */
    @Override
    ManagedChannel fastChannel(io.grpc.Server server) {
        ManagedChannel ch = super.fastChannel(server);
        try {
            io.github.sockmap4j.testbed.Await.until("the channel is ready", java.time.Duration.ofSeconds(10),
                    () -> ch.getState(true) == io.grpc.ConnectivityState.READY);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
        return ch;
    }

    @AfterEach
    void everyCallbackRanOnALoop() {
        assertEquals(Set.of(), offLoop, "callbacks that ran off the event loops");
    }

    /** Many calls at once, each answered on a loop and whole, and the bytes on the redirect. */
    @Test
    void unaryCallsAnsweredOnTheLoopsOverTheRedirect() throws Exception {
        ManagedChannel ch = fastChannel(fastServer());
        SockmapStats before = Sockmap.global().stats();
        List<CompletableFuture<byte[]>> calls = new ArrayList<>();
        for (int i = 0; i < 2_000; i++) {
            CompletableFuture<byte[]> f = new CompletableFuture<>();
            ClientCalls.asyncUnaryCall(ch.newCall(UNARY, CallOptions.DEFAULT), random(1 + i % 4096), observer(f));
            calls.add(f);
        }
        long bytes = 0;
        for (int i = 0; i < calls.size(); i++) {
            byte[] want = random(1 + i % 4096);
            assertArrayEquals(want, calls.get(i).get(30, TimeUnit.SECONDS), "call " + i);
            bytes += want.length;
        }
        assertTrue(serverOnLoop.get() >= 3 * calls.size(), "server callbacks on a loop: " + serverOnLoop);
        assertTrue(clientOnLoop.get() >= calls.size(), "replies' callbacks on a loop: " + clientOnLoop);
        assertRedirected(before, 2 * bytes);
    }
}
