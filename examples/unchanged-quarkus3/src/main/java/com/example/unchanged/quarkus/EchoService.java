package com.example.unchanged.quarkus;

import com.example.unchanged.quarkus.grpc.Echo;
import com.example.unchanged.quarkus.grpc.Msg;
import io.quarkus.grpc.GrpcService;
import io.smallrye.mutiny.Uni;

/** The gRPC echo (Quarkus gRPC): the message back. */
@GrpcService
public class EchoService implements Echo {
    @Override
    public Uni<Msg> echo(Msg request) {
        return Uni.createFrom().item(request);
    }
}
