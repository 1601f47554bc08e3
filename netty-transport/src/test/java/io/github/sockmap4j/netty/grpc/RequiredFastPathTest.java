package io.github.sockmap4j.netty.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.testbed.ChildJvm;
import io.github.sockmap4j.SockmapUnavailableException;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.ServerServiceDefinition;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ServerCalls;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code sockmap4j.require=true} with the fast path off (the cgroup named does not exist): a gRPC
 * server does not start and a client does not connect, each with a {@link SockmapUnavailableException}
 * as the cause. In a child JVM, since the setting is process-wide; needs no privileges.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class RequiredFastPathTest {

    @Test
    void nothingServesOrConnectsOnPlainTcpWhenTheFastPathIsRequired() throws Exception {
        try (ChildJvm child = ChildJvm.requiredWhereOff(Main.class)) {
            String server = child.expect("server=", 60);
            String client = child.expect("client=", 60);
            assertEquals(0, child.waitFor(30), child.output());
            assertTrue(server.startsWith("refused " + SockmapUnavailableException.class.getName()),
                    () -> "server.start(): " + child.output());
            // The cause: the cgroup named here, or (without privileges) what is missing.
            assertTrue(ChildJvm.namesOffCause(server),
                    () -> "names the cause: " + child.output());
            assertTrue(client.startsWith("refused"), () -> "the call: " + child.output());
            assertTrue(client.contains(SockmapUnavailableException.class.getSimpleName()),
                    () -> "the call's cause: " + child.output());
        }
    }

    /** Starts a server, then calls a plain server it starts itself, both through the transport. */
    public static final class Main {
        public static void main(String[] args) throws Exception {
            ServerServiceDefinition echo = ServerServiceDefinition.builder("sockmap4j.Echo")
                    .addMethod(GrpcFastPathTest.UNARY, ServerCalls.asyncUnaryCall((req, out) -> {
                        out.onNext(req);
                        out.onCompleted();
                    })).build();
            try {
                Server s = SockmapGrpc.configure(NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0)))
                        .addService(echo).build().start();
                s.shutdownNow();
                System.out.println("server=started on plain TCP");
            } catch (IOException e) {
                Throwable c = e.getCause();
                System.out.println("server=refused " + (c == null ? e : c.getClass().getName() + ": " + c.getMessage()));
            }
            // A plain gRPC server (no sockmap4j): the client alone must refuse to connect to it.
            Server plain = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0)).addService(echo)
                    .build().start();
            ManagedChannel ch = SockmapGrpc.configure(NettyChannelBuilder.forAddress("127.0.0.1", plain.getPort()))
                    .usePlaintext().build();
            try {
                ClientCalls.blockingUnaryCall(ch, GrpcFastPathTest.UNARY, io.grpc.CallOptions.DEFAULT
                        .withDeadlineAfter(20, TimeUnit.SECONDS), new byte[] {1});
                System.out.println("client=connected on plain TCP");
            } catch (StatusRuntimeException e) {
                StringBuilder causes = new StringBuilder();
                for (Throwable c = e; c != null; c = c.getCause()) {
                    causes.append(c.getClass().getSimpleName()).append(' ');
                }
                System.out.println("client=refused " + causes);
            } finally {
                ch.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
                plain.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
            }
        }
    }
}
