package io.github.sockmap4j.colocated.grpc;

/**
 * Every case of {@link ColocatedGrpcTest} with the channel's connection read on an event loop and
 * both ends on gRPC's default executors: a blocking caller still reads its own reply, and the
 * loop hands the rest to the channel's executor.
 */
class ColocatedGrpcOnLoopPooledTest extends ColocatedGrpcOnLoopTest {
    @Override
    boolean direct() {
        return false;
    }
}
