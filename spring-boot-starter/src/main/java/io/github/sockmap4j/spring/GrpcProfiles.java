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

    /** As {@link #executor(ServerBuilder, SockmapGrpc.Profile)}, for a channel. */
    static void executor(ManagedChannelBuilder<?> builder, SockmapGrpc.Profile profile) {
        switch (profile) {
            case STANDARD -> { }
            case POLLING -> builder.executor(SockmapGrpc.pollingExecutor());
            case DIRECT -> builder.directExecutor();
        }
    }
}
