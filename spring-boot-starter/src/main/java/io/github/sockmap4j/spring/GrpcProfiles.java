package io.github.sockmap4j.spring;

import io.github.sockmap4j.netty.grpc.SockmapGrpc;
import io.grpc.ManagedChannelBuilder;
import io.grpc.ServerBuilder;

/**
 * Where the calls of a {@link SockmapGrpc.Profile} run their handlers and callbacks, for the
 * starter's gRPC customizers. A class of its own, used only from configurations that need gRPC on
 * the class path: Spring reads the methods of an auto-configuration class, and gRPC's types in
 * their signatures would fail a service that has no gRPC.
 */
final class GrpcProfiles {
    private GrpcProfiles() {
    }

    /** gRPC's executor unless {@code profile} says otherwise. */
    static void executor(ServerBuilder<?> builder, SockmapGrpc.Profile profile) {
        switch (profile) {
            case STANDARD -> { }
            case POLLING -> builder.executor(SockmapGrpc.pollingExecutor());
            case DIRECT -> builder.directExecutor();
        }
    }

    /**
     * The server's executors as {@code properties} say: its profile's, then the non-blocking
     * services on the loops (their pool the profile's executor where it has one).
     */
    static void executor(io.grpc.netty.NettyServerBuilder builder, SockmapProperties properties) {
        SockmapGrpc.Profile profile = properties.getGrpcProfile();
        java.util.List<String> onLoops = properties.getGrpcNonBlockingServices();
        if (onLoops.isEmpty() || profile == SockmapGrpc.Profile.DIRECT) {
            if (!onLoops.isEmpty()) {
                org.slf4j.LoggerFactory.getLogger(GrpcProfiles.class).warn("sockmap4j.grpc-non-blocking-services is "
                        + "ignored with sockmap4j.grpc-profile=direct, which runs every service on the event loops");
            }
            executor(builder, profile);
            return;
        }
        SockmapGrpc.runOnEventLoops(builder, onLoops, profile == SockmapGrpc.Profile.POLLING
                ? SockmapGrpc.pollingExecutor() : SockmapGrpc.blockingPool());
    }

    /** As {@link #executor(ServerBuilder, SockmapGrpc.Profile)}, for a channel. */
    static void executor(ManagedChannelBuilder<?> builder, SockmapGrpc.Profile profile) {
        switch (profile) {
            case STANDARD -> { }
            case POLLING -> builder.executor(SockmapGrpc.pollingExecutor());
            case DIRECT -> builder.directExecutor();
        }
    }
}
