package io.github.sockmap4j.colocated.grpc;

/**
 * Every case of {@link ColocatedGrpcTest} with both ends on gRPC's direct executor: handlers and
 * callbacks run on the connections' readers, which write without waiting and end a batch of
 * frames with one wake-up (as {@code SockmapGrpc.runOnEventLoops} has them over a co-located
 * connection).
 */
class ColocatedGrpcDirectTest extends ColocatedGrpcTest {
    @Override
    boolean direct() {
        return true;
    }
}
