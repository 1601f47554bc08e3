package io.github.sockmap4j.spring;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.spring.app.EchoApplication;
import io.github.sockmap4j.testsupport.Http2Only;
import io.github.sockmap4j.testsupport.RedirectedShare;
import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.StreamObserver;
import io.netty.channel.EventLoopGroup;
import io.netty.util.concurrent.EventExecutor;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.grpc.client.GrpcChannelFactory;
import org.springframework.test.annotation.DirtiesContext;

/**
 * {@code sockmap4j.grpc-non-blocking-services} and {@code sockmap4j.grpc-callbacks-on-loops}: the
 * echo service's calls run on the starter's event loops and so do the channel's callbacks, every
 * byte echoed and redirected.
 */
@Tag("kernel")
@ExtendWith(Http2Only.class) // HTTP/2 over the redirect: the co-located transport is SpringBootGrpcColocatedTest's
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@DirtiesContext(classMode = DirtiesContext.ClassMode.AFTER_CLASS)
@SpringBootTest(classes = EchoApplication.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = {"spring.grpc.server.port=0", "spring.grpc.server.address=127.0.0.1",
            "sockmap4j.grpc-non-blocking-services=" + EchoApplication.SERVICE, "sockmap4j.grpc-callbacks-on-loops=true"})
class SpringBootGrpcOnLoopsTest {
    @Autowired
    GrpcChannelFactory grpcChannels;
    @Autowired
    Sockmap sockmap;
    @Autowired
    SockmapProperties properties;
    @Autowired
    @Qualifier(SockmapAutoConfiguration.EVENT_LOOPS)
    EventLoopGroup loops;

    boolean onALoop() {
        for (EventExecutor e : loops) {
            if (e.inEventLoop()) {
                return true;
            }
        }
        return false;
    }

    @Test
    void aNonBlockingServiceAndTheChannelsCallbacksRunOnTheLoops() throws Exception {
        assertEquals(List.of(EchoApplication.SERVICE), properties.getGrpcNonBlockingServices());
        EchoApplication.UNARY_THREADS.clear();
        ManagedChannel channel = grpcChannels.createChannel("127.0.0.1:" + EchoApplication.GRPC_PORT.get());
        try {
            RedirectedShare share = RedirectedShare.start(sockmap);
            long sent = 0;
            for (int size : new int[] {64, 256 << 10, 64, 4096, 64}) {
                byte[] body = new byte[size];
                new Random(size).nextBytes(body);
                CompletableFuture<byte[]> reply = new CompletableFuture<>();
                CompletableFuture<Boolean> onLoop = new CompletableFuture<>();
                ClientCalls.asyncUnaryCall(channel.newCall(EchoApplication.UNARY,
                        CallOptions.DEFAULT.withDeadlineAfter(30, TimeUnit.SECONDS)), body, new StreamObserver<>() {
                            @Override
                            public void onNext(byte[] value) {
                                onLoop.complete(onALoop());
                                reply.complete(value);
                            }

                            @Override
                            public void onError(Throwable t) {
                                reply.completeExceptionally(t);
                            }

                            @Override
                            public void onCompleted() {
                            }
                        });
                assertArrayEquals(body, reply.get(30, TimeUnit.SECONDS));
                assertTrue(onLoop.get(), "the reply's callback ran on " + Thread.currentThread().getName());
                sent += 2L * size;
            }
            share.assertRedirected(0.99, sent, "Spring gRPC unary, the service on the event loops");
        } finally {
            channel.shutdownNow();
        }
        assertFalse(EchoApplication.UNARY_THREADS.isEmpty(), "the echo ran");
        assertTrue(EchoApplication.UNARY_THREADS.stream().allMatch(t -> t.startsWith("sockmap4j-grpc")),
                "every call on the starter's event loops: " + EchoApplication.UNARY_THREADS);
    }
}
