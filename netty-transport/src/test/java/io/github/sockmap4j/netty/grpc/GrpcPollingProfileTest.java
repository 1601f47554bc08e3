package io.github.sockmap4j.netty.grpc;

/** {@link GrpcFastPathTest}'s calls in the {@link SockmapGrpc.Profile#POLLING} profile: event loops that poll before they sleep, gRPC's executor. */
class GrpcPollingProfileTest extends GrpcFastPathTest {
    @Override
    SockmapGrpc.Profile profile() {
        return SockmapGrpc.Profile.POLLING;
    }
}
