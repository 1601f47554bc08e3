package io.github.sockmap4j.colocated.grpc;

import com.google.common.util.concurrent.MoreExecutors;
import io.grpc.Status;
import io.grpc.internal.ClientTransport;
import io.grpc.internal.KeepAliveManager;
import java.util.concurrent.TimeUnit;

/**
 * A co-located channel's keepalive pings, as gRPC's {@link KeepAliveManager} asks for them: each
 * over the rings (a PING frame its server's reader answers); a ping that cannot be sent, or that
 * no answer follows within the keepalive's timeout, ends the connection, its calls UNAVAILABLE.
 */
final class KeepAlivePings implements KeepAliveManager.KeepAlivePinger {
    private final ColocatedClientTransport transport;
    private final long timeoutNanos;

    KeepAlivePings(ColocatedClientTransport transport, long timeoutNanos) {
        this.transport = transport;
        this.timeoutNanos = timeoutNanos;
    }

    @Override
    public void ping() {
        transport.ping(new ClientTransport.PingCallback() {
            @Override
            public void onSuccess(long roundTripTimeNanos) {
                // the answer itself resets the keepalive (ColocatedClientTransport.pong)
            }

            @Override
            public void onFailure(Status cause) {
                transport.shutdownNow(Status.UNAVAILABLE.withDescription("a keepalive ping could not be sent over "
                        + "co-located connection " + transport.connection.name() + ": " + cause.getDescription()));
            }
        }, MoreExecutors.directExecutor());
    }

    @Override
    public void onPingTimeout() {
        transport.shutdownNow(Status.UNAVAILABLE.withDescription("Keepalive failed: the co-located server answered no "
                + "ping within " + TimeUnit.NANOSECONDS.toMillis(timeoutNanos) + " ms over connection "
                + transport.connection.name()));
    }
}
