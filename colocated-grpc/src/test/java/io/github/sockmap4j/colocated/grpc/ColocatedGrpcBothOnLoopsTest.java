package io.github.sockmap4j.colocated.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Timeout;

/**
 * Every case of {@link ColocatedGrpcTest} with both ends read on event loops of their own (epoll
 * sets waiting on the rings' bells), no reader thread at either end, both on gRPC's direct
 * executor: the server's handlers and the channel's callbacks run on the loops, as
 * {@code SockmapGrpc} has them with {@code runOnEventLoops}.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ColocatedGrpcBothOnLoopsTest extends ColocatedGrpcTest {
    private EpollTestLoop clientLoop;
    private EpollTestLoop serverLoop;

    @Override
    ReadLoop loop() {
        clientLoop = EpollTestLoop.open("test-client-loop");
        return clientLoop;
    }

    @Override
    ReadLoop serverLoop() {
        serverLoop = EpollTestLoop.open("test-server-loop");
        return serverLoop;
    }

    @Override
    boolean direct() {
        return true;
    }

    @Override
    void afterStop() {
        try {
            assertEquals(0, EpollTestLoop.watchingOnceNone(clientLoop, serverLoop),
                    "no loop watches a bell once both ends shut down");
        } finally {
            clientLoop.close();
            serverLoop.close();
        }
    }
}
