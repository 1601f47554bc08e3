package io.github.sockmap4j.colocated.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.CallOptions;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.StreamObserver;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Every case of {@link ColocatedGrpcTest} with the channel's connection read on an event loop (an
 * epoll set waiting on the ring's bell) instead of a thread of its own; the server's end keeps its
 * thread. Both ends on gRPC's direct executor, as {@code SockmapGrpc.runOnEventLoops} has them:
 * the channel's callbacks run on the loop.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ColocatedGrpcOnLoopTest extends ColocatedGrpcTest {
    private EpollTestLoop loop;

    @Override
    ReadLoop loop() {
        loop = EpollTestLoop.open("test-read-loop");
        return loop;
    }

    @Override
    boolean direct() {
        return true;
    }

    @Override
    void afterStop() {
        try {
            assertEquals(0, EpollTestLoop.watchingOnceNone(loop), "the loop watches no bell once the channel is shut down");
        } finally {
            loop.close();
        }
    }

    @Test
    void theLoopReadsTheRepliesAndNoReaderThreadIsMade() throws Exception {
        CompletableFuture<String> where = new CompletableFuture<>();
        ClientCalls.asyncUnaryCall(channel.newCall(ECHO, CallOptions.DEFAULT.withDeadlineAfter(10, TimeUnit.SECONDS)),
                new byte[] {1}, new StreamObserver<>() {
                    @Override
                    public void onNext(byte[] value) {
                        where.complete(Thread.currentThread().getName());
                    }

                    @Override
                    public void onError(Throwable t) {
                        where.completeExceptionally(t);
                    }

                    @Override
                    public void onCompleted() {
                    }
                });
        String thread = where.get(10, TimeUnit.SECONDS);
        if (direct()) {
            assertEquals(loop.threadName(), thread, "the reply's callback ran on the loop");
        } else {
            assertTrue(thread.startsWith("grpc-default-executor"), "the reply's callback ran on the channel's executor: "
                    + thread);
        }
        assertTrue(LoopReader.started() >= 1, "counted");
        assertEquals(1, loop.watching(), "the loop watches the ring's bell");
        assertEquals(java.util.List.of("sockmap4j-colocated-test"), readerThreads(),
                "only the server's end has a reader thread");
    }
}
