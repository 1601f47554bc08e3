package io.github.sockmap4j.netty.grpc;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.common.util.concurrent.ListenableFuture;
import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapStats;
import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerServiceDefinition;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ServerCalls;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * {@link GrpcFastPathTest}'s calls in the {@link SockmapGrpc.Profile#POLLING} profile: event loops
 * that poll before they sleep, handlers on the polling executor.
 */
class GrpcPollingProfileTest extends GrpcFastPathTest {
    static final MethodDescriptor<byte[], byte[]> MEET = method("Meet", MethodDescriptor.MethodType.UNARY);

    @Override
    SockmapGrpc.Profile profile() {
        return SockmapGrpc.Profile.POLLING;
    }

    @Test
    void eachProfileHasOneGroupSharedByItsBuilders() {
        assertSame(SockmapGrpc.sharedGroup(), SockmapGrpc.group(SockmapGrpc.Profile.STANDARD));
        assertSame(SockmapGrpc.group(SockmapGrpc.Profile.POLLING), SockmapGrpc.group(SockmapGrpc.Profile.POLLING));
        assertNotSame(SockmapGrpc.group(SockmapGrpc.Profile.POLLING), SockmapGrpc.group(SockmapGrpc.Profile.DIRECT));
        assertEquals(Duration.ZERO, SockmapGrpc.Profile.STANDARD.maxPoll());
        assertThrows(NullPointerException.class, () -> SockmapGrpc.group(null));
        assertSame(SockmapGrpc.pollingExecutor(), SockmapGrpc.pollingExecutor());
    }

    /**
     * Handlers that block until every one of a batch of calls has arrived: each call gets a thread
     * of the polling executor (as gRPC's own executor gives one), none waits behind another, and
     * the replies come back whole over the redirect.
     */
    @Test
    void blockingHandlersRunOnThePollingExecutorEachOnAThread() throws Exception {
        int calls = 8;
        for (int round = 0; round < 20; round++) {
            CountDownLatch all = new CountDownLatch(calls);
            Set<String> threads = ConcurrentHashMap.newKeySet();
            ServerServiceDefinition meet = ServerServiceDefinition.builder("sockmap4j.Echo")
                    .addMethod(MEET, ServerCalls.asyncUnaryCall((req, out) -> {
                        threads.add(Thread.currentThread().getName());
                        all.countDown();
                        try {
                            out.onNext(all.await(30, TimeUnit.SECONDS) ? req : new byte[0]);
                            out.onCompleted();
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                            out.onError(e);
                        }
                    }))
                    .build();
            Server s = SockmapGrpc.configure(NettyServerBuilder.forAddress(
                    new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0)), profile()).addService(meet).build().start();
            closers.add(() -> s.shutdownNow().awaitTermination(10, TimeUnit.SECONDS));
            ManagedChannel ch = SockmapGrpc.configure(NettyChannelBuilder.forAddress("127.0.0.1", s.getPort()), profile())
                    .usePlaintext().build();
            closers.add(() -> ch.shutdownNow().awaitTermination(10, TimeUnit.SECONDS));
            SockmapStats before = Sockmap.global().stats();
            List<byte[]> sent = new ArrayList<>();
            List<ListenableFuture<byte[]>> replies = new ArrayList<>();
            for (int i = 0; i < calls; i++) {
                byte[] req = random(1024 + round * calls + i);
                sent.add(req);
                replies.add(ClientCalls.futureUnaryCall(ch.newCall(MEET, CallOptions.DEFAULT), req));
            }
            for (int i = 0; i < calls; i++) {
                assertArrayEquals(sent.get(i), replies.get(i).get(60, TimeUnit.SECONDS), "round " + round + ", call " + i
                        + ": a handler waited for calls that got no thread");
            }
            assertEquals(calls, threads.size(), "each waiting handler on a thread of its own: " + threads);
            assertTrue(threads.stream().allMatch(n -> n.startsWith("sockmap4j-exec-")), "handlers ran on " + threads);
            assertRedirected(before, 2L * calls * 1024);
        }
    }
}
