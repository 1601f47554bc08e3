package io.github.sockmap4j.netty.grpc;

/** {@link GrpcFastPathTest}'s calls in the {@link SockmapGrpc.Profile#DIRECT} profile: polling event loops running the handlers and callbacks themselves. */
class GrpcDirectProfileTest extends GrpcFastPathTest {
    @Override
    SockmapGrpc.Profile profile() {
        return SockmapGrpc.Profile.DIRECT;
    }
}
