package io.github.sockmap4j.colocated.grpc;

import io.github.sockmap4j.colocated.SharedRegion;
import io.grpc.ChannelCredentials;
import io.grpc.ChannelLogger;
import io.grpc.ForwardingChannelBuilder2;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Status;
import io.grpc.internal.ClientTransportFactory;
import io.grpc.internal.ConnectionClientTransport;
import io.grpc.internal.GrpcUtil;
import io.grpc.internal.KeepAliveManager;
import io.grpc.internal.ManagedChannelImplBuilder;
import io.grpc.internal.SharedResourceHolder;
import java.net.SocketAddress;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A channel whose calls go over one co-located connection: the rings of a region this process
 * shares with the server's (made by one end, handed to the other; see {@code Handover}). The
 * connection is the channel's only one: once it ends, calls fail with UNAVAILABLE. This is the
 * explicit form, given a region; {@link ColocatedGrpc} agrees on one over a TCP connection.
 *
 * <pre>
 * ManagedChannel ch = ColocatedChannelBuilder.forRegion(region, "orders").build();
 * </pre>
 */
public final class ColocatedChannelBuilder extends ForwardingChannelBuilder2<ColocatedChannelBuilder> {
    private final ManagedChannelImplBuilder delegate;
    private int maxInboundMessage = GrpcUtil.DEFAULT_MAX_MESSAGE_SIZE;
    private int maxInboundMetadata = GrpcUtil.DEFAULT_MAX_HEADER_LIST_SIZE;
    private Runnable whenEnded;
    private java.util.function.Consumer<ColocatedClientTransport> onTransport;
    private ReadLoop readLoop;
    private long keepAliveNanos = GrpcUtil.KEEPALIVE_TIME_NANOS_DISABLED;
    private long keepAliveTimeoutNanos = GrpcUtil.DEFAULT_KEEPALIVE_TIMEOUT_NANOS;
    private boolean keepAliveWithoutCalls;

    private ColocatedChannelBuilder(SharedRegion region, String name) {
        ColocatedAddress address = new ColocatedAddress(name);
        AtomicReference<SharedRegion> once = new AtomicReference<>(region);
        this.delegate = new ManagedChannelImplBuilder(address, name, () -> new Factory(once, address), () -> 0);
        // one connection, never made again: an idle channel keeps it instead of dropping it
        delegate.idleTimeout(30, TimeUnit.DAYS);
    }

    /**
     * A channel over {@code region}'s rings, this process's end: the end that made the region or
     * the end that opened it, whichever this is. {@code name} names the connection (authority,
     * logs).
     */
    public static ColocatedChannelBuilder forRegion(SharedRegion region, String name) {
        return new ColocatedChannelBuilder(region, name);
    }

    /** Runs {@code r} once the channel's connection has ended (on the thread that ended it). */
    ColocatedChannelBuilder whenEnded(Runnable r) {
        this.whenEnded = r;
        return this;
    }

    /** Hands {@code c} the channel's transport as it is made (its one connection's). */
    ColocatedChannelBuilder onTransport(java.util.function.Consumer<ColocatedClientTransport> c) {
        this.onTransport = c;
        return this;
    }

    /**
     * Reads the connection on {@code loop} instead of a thread of its own, where the region has
     * bells ({@code SharedRegion.create(..., true)}); a region without them, or a loop that cannot
     * watch one, is read by a thread as before. With {@link #directExecutor()} the calls'
     * callbacks then run on that loop.
     */
    public ColocatedChannelBuilder readOn(ReadLoop loop) {
        this.readLoop = loop;
        return this;
    }

    @Override
    protected ManagedChannelBuilder<?> delegate() {
        return delegate;
    }

    @Override
    public ColocatedChannelBuilder maxInboundMessageSize(int bytes) {
        this.maxInboundMessage = bytes;
        return this;
    }

    @Override
    public ColocatedChannelBuilder maxInboundMetadataSize(int bytes) {
        this.maxInboundMetadata = bytes;
        return this;
    }

    /**
     * Pings the server over the rings after {@code time} without an answer to the last ping (at
     * least 10 s, as gRPC's Netty channel takes it; {@code Long.MAX_VALUE} of any unit: never), and
     * ends the connection, its calls UNAVAILABLE, where no answer comes within the keepalive's
     * timeout: a server whose reader is stuck, or a connection without a lifeline whose server died.
     */
    @Override
    public ColocatedChannelBuilder keepAliveTime(long time, TimeUnit unit) {
        long nanos = unit.toNanos(time);
        keepAliveNanos = nanos >= TimeUnit.DAYS.toNanos(1000L * 365) ? GrpcUtil.KEEPALIVE_TIME_NANOS_DISABLED
                : KeepAliveManager.clampKeepAliveTimeInNanos(nanos);
        return this;
    }

    /** How long a keepalive ping waits for its answer (20 s unless told; at least 10 ms). */
    @Override
    public ColocatedChannelBuilder keepAliveTimeout(long timeout, TimeUnit unit) {
        keepAliveTimeoutNanos = KeepAliveManager.clampKeepAliveTimeoutInNanos(unit.toNanos(timeout));
        return this;
    }

    /** Whether keepalive pings go while no call is open (false unless told). */
    @Override
    public ColocatedChannelBuilder keepAliveWithoutCalls(boolean enable) {
        keepAliveWithoutCalls = enable;
        return this;
    }

    private final class Factory implements ClientTransportFactory {
        private final AtomicReference<SharedRegion> region;
        private final ColocatedAddress address;
        private final ScheduledExecutorService timer = SharedResourceHolder.get(DeadlineTimer.RESOURCE);
        private boolean closed;
        private volatile ColocatedConnection first;

        Factory(AtomicReference<SharedRegion> region, ColocatedAddress address) {
            this.region = region;
            this.address = address;
        }

        @Override
        public ConnectionClientTransport newClientTransport(SocketAddress addr, ClientTransportOptions options,
                                                            ChannelLogger logger) {
            SharedRegion r = region.getAndSet(null);
            ColocatedConnection c;
            if (r != null) {
                c = new ColocatedConnection(r, address.name(), readLoop);
                first = c;
                if (whenEnded != null) {
                    c.whenClosed(whenEnded);
                }
            } else {
                Status how = first == null ? null : first.closedStatus();
                c = ColocatedConnection.ended(address.name(), Status.UNAVAILABLE.withDescription(
                        "the co-located connection " + address.name() + " ended"
                        + (how == null || how.getDescription() == null ? "" : " (" + how.getDescription() + ")")
                        + "; this channel makes no other"));
            }
            ColocatedClientTransport t = new ColocatedClientTransport(c, address, options.getAuthority(),
                    options.getUserAgent(), maxInboundMessage, maxInboundMetadata, options.getEagAttributes(), timer);
            if (keepAliveNanos != GrpcUtil.KEEPALIVE_TIME_NANOS_DISABLED) {
                t.keepAlive(keepAliveNanos, keepAliveTimeoutNanos, keepAliveWithoutCalls);
            }
            if (onTransport != null) {
                onTransport.accept(t);
            }
            return t;
        }

        @Override
        public ScheduledExecutorService getScheduledExecutorService() {
            return timer;
        }

        @Override
        public SwapChannelCredentialsResult swapChannelCredentials(ChannelCredentials credentials) {
            return null;
        }

        @Override
        public void close() {
            if (!closed) {
                closed = true;
                SharedResourceHolder.release(DeadlineTimer.RESOURCE, timer);
                SharedRegion r = region.getAndSet(null);
                if (r != null) {
                    r.close();
                }
            }
        }

        @Override
        public Collection<Class<? extends SocketAddress>> getSupportedSocketAddressTypes() {
            return List.of(ColocatedAddress.class);
        }
    }
}
