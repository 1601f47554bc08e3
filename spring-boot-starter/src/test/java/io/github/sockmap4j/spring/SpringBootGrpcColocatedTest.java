package io.github.sockmap4j.spring;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.colocated.grpc.ColocatedGrpc;
import io.github.sockmap4j.spring.app.EchoApplication;
import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.stub.ClientCalls;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.grpc.client.GrpcChannelFactory;
import org.springframework.test.annotation.DirtiesContext;

/**
 * The starter and nothing else, as a Spring gRPC service and its client are written: their calls
 * move to a co-located connection by default (both ends in one process here, as two processes of
 * one pod would be), every call answered.
 */
@Tag("kernel")
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@DirtiesContext(classMode = DirtiesContext.ClassMode.AFTER_CLASS)
@SpringBootTest(classes = EchoApplication.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = {"spring.grpc.server.port=0", "spring.grpc.server.address=127.0.0.1",
            "spring.application.name=colocated-by-default"})
class SpringBootGrpcColocatedTest {
    @Autowired
    GrpcChannelFactory grpcChannels;

    @Test
    void springGrpcCallsMoveToAColocatedConnectionByDefault() {
        long upgrades = ColocatedGrpc.upgrades();
        ManagedChannel channel = grpcChannels.createChannel("127.0.0.1:" + EchoApplication.GRPC_PORT.get());
        try {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            int calls = 0;
            while (ColocatedGrpc.upgrades() < upgrades + 2) { // the server's and the channel's
                assertTrue(System.nanoTime() < deadline, "no co-located connection after " + calls + " calls; fallbacks: "
                        + ColocatedGrpc.fallbacks());
                byte[] body = new byte[1 + calls % 5000];
                new Random(calls).nextBytes(body);
                assertArrayEquals(body, ClientCalls.blockingUnaryCall(channel, EchoApplication.UNARY,
                        CallOptions.DEFAULT.withDeadlineAfter(10, TimeUnit.SECONDS), body));
                calls++;
            }
            for (int i = 0; i < 200; i++) {
                byte[] body = new byte[64 << (i % 10)];
                new Random(i).nextBytes(body);
                assertArrayEquals(body, ClientCalls.blockingUnaryCall(channel, EchoApplication.UNARY,
                        CallOptions.DEFAULT.withDeadlineAfter(10, TimeUnit.SECONDS), body), "call " + i);
            }
        } finally {
            channel.shutdownNow();
        }
    }
}
