package io.github.sockmap4j.spring;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.netty.SockmapNetty;
import io.github.sockmap4j.spring.app.EchoApplication;
import io.github.sockmap4j.testsupport.Http2Only;
import io.github.sockmap4j.testsupport.RedirectedShare;
import io.grpc.ManagedChannel;
import io.grpc.stub.ClientCalls;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.grpc.client.GrpcChannelFactory;
import org.springframework.test.annotation.DirtiesContext;

/**
 * {@code sockmap4j.grpc-profile=polling}: Spring gRPC's server and channels on sockmap4j's polling
 * loops and executor, every byte echoed and redirected.
 */
@Tag("kernel")
@ExtendWith(Http2Only.class) // HTTP/2 over the redirect: the co-located transport is SpringBootGrpcColocatedTest's
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@DirtiesContext(classMode = DirtiesContext.ClassMode.AFTER_CLASS)
@SpringBootTest(classes = EchoApplication.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = {"spring.grpc.server.port=0", "spring.grpc.server.address=127.0.0.1", "sockmap4j.grpc-profile=polling"})
class SpringBootGrpcProfileTest {
    @Autowired
    GrpcChannelFactory grpcChannels;
    @Autowired
    Sockmap sockmap;
    @Autowired
    SockmapProperties properties;

    @Test
    void thePollingProfileRunsHandlersOnThePollingExecutorAndLoopsThatPoll() {
        assertTrue(properties.getGrpcProfile() == io.github.sockmap4j.netty.grpc.SockmapGrpc.Profile.POLLING,
                "bound from 'polling': " + properties.getGrpcProfile());
        SockmapNetty.PollCounts before = SockmapNetty.pollCounts();
        EchoApplication.UNARY_THREADS.clear();
        ManagedChannel channel = grpcChannels.createChannel("127.0.0.1:" + EchoApplication.GRPC_PORT.get());
        try {
            RedirectedShare share = RedirectedShare.start(sockmap);
            long sent = 0;
            for (int size : new int[] {64, 256 << 10, 64, 4096, 64}) {
                byte[] body = new byte[size];
                new Random(size).nextBytes(body);
                byte[] back = ClientCalls.blockingUnaryCall(channel, EchoApplication.UNARY,
                        io.grpc.CallOptions.DEFAULT.withDeadlineAfter(30, TimeUnit.SECONDS), body);
                assertArrayEquals(body, back);
                sent += 2L * size;
            }
            share.assertRedirected(0.99, sent, "Spring gRPC unary, polling profile");
        } finally {
            channel.shutdownNow();
        }
        assertFalse(EchoApplication.UNARY_THREADS.isEmpty(), "the echo ran");
        assertTrue(EchoApplication.UNARY_THREADS.stream().allMatch(t -> t.startsWith("sockmap4j-exec")),
                "every call on the polling executor: " + EchoApplication.UNARY_THREADS);
        SockmapNetty.PollCounts after = SockmapNetty.pollCounts();
        assertTrue(after.pollsThatFoundWork() + after.sleeps() > before.pollsThatFoundWork() + before.sleeps(),
                "the loops are polling loops: " + before + " -> " + after);
    }
}
