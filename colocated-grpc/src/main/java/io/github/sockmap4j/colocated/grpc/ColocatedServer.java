package io.github.sockmap4j.colocated.grpc;

import io.github.sockmap4j.colocated.SharedRegion;
import io.grpc.ForwardingServerBuilder;
import io.grpc.InternalChannelz.SocketStats;
import io.grpc.InternalInstrumented;
import io.grpc.Server;
import io.grpc.ServerBuilder;
import io.grpc.ServerStreamTracer;
import io.grpc.internal.GrpcUtil;
import io.grpc.internal.InternalServer;
import io.grpc.internal.ObjectPool;
import io.grpc.internal.ServerImplBuilder;
import io.grpc.internal.ServerListener;
import io.grpc.internal.SharedResourcePool;
import java.io.IOException;
import java.net.SocketAddress;
import java.util.List;
import java.util.concurrent.ScheduledExecutorService;

/**
 * A gRPC server whose connections are co-located ones: each {@link #attach} serves one region's
 * rings, this process's end, until the connection ends or the server shuts down.
 *
 * <pre>
 * ColocatedServer s = ColocatedServer.builder("orders").addService(new OrdersImpl()).build();
 * s.server().start();
 * s.attach(region);
 * </pre>
 */
public final class ColocatedServer {
    private final Server server;
    private final Listening listening;

    private ColocatedServer(Server server, Listening listening) {
        this.server = server;
        this.listening = listening;
    }

    /** A builder of a server named {@code name} (its address, in logs and in calls' attributes). */
    public static Builder builder(String name) {
        return new Builder(name);
    }

    /** The gRPC server: start, shut down and await it as any other. */
    public Server server() {
        return server;
    }

    /**
     * Serves calls that come over {@code region} (this end of it; the server owns it from here).
     *
     * @throws IllegalStateException before the server is started or after it is shut down
     */
    public void attach(SharedRegion region) {
        listening.attach(region);
    }

    public static final class Builder extends ForwardingServerBuilder<Builder> {
        private final ServerImplBuilder delegate;
        private final Listening listening;
        private int maxInboundMessage = GrpcUtil.DEFAULT_MAX_MESSAGE_SIZE;
        private int maxInboundMetadata = GrpcUtil.DEFAULT_MAX_HEADER_LIST_SIZE;
        private ReadLoop readLoop;

        private Builder(String name) {
            Listening[] l = new Listening[1];
            this.delegate = new ServerImplBuilder((tracers, metrics) -> {
                l[0].tracers = tracers;
                return l[0];
            });
            this.listening = new Listening(new ColocatedAddress(name), this);
            l[0] = listening;
        }

        @Override
        protected ServerBuilder<?> delegate() {
            return delegate;
        }

        @Override
        public Builder maxInboundMessageSize(int bytes) {
            this.maxInboundMessage = bytes;
            return this;
        }

        @Override
        public Builder maxInboundMetadataSize(int bytes) {
            this.maxInboundMetadata = bytes;
            return this;
        }

        /**
         * Reads each attached connection on {@code loop} instead of a thread of its own, where its
         * region has bells; with {@link #directExecutor()} the handlers then run on that loop.
         */
        public Builder readOn(ReadLoop loop) {
            this.readLoop = loop;
            return this;
        }

        /** Use {@link #buildColocated()}: a server of this kind is attached regions through its holder. */
        @Override
        public Server build() {
            return buildColocated().server();
        }

        public ColocatedServer buildColocated() {
            return new ColocatedServer(delegate.build(), listening);
        }
    }

    /** The server's "listening": regions attached to it instead of connections accepted. */
    private static final class Listening implements InternalServer {
        private final ColocatedAddress address;
        private final Builder builder;
        private final ObjectPool<ScheduledExecutorService> schedulers = SharedResourcePool.forResource(DeadlineTimer.RESOURCE);
        private List<? extends ServerStreamTracer.Factory> tracers = List.of();
        private ServerListener listener;
        private boolean shutdown;

        Listening(ColocatedAddress address, Builder builder) {
            this.address = address;
            this.builder = builder;
        }

        @Override
        public synchronized void start(ServerListener l) throws IOException {
            this.listener = l;
        }

        synchronized void attach(SharedRegion region) {
            if (listener == null || shutdown) {
                region.close();
                throw new IllegalStateException(listener == null ? "start the server before attaching a connection"
                        : "the server is shut down");
            }
            ColocatedConnection c = new ColocatedConnection(region, address.name(), builder.readLoop);
            ColocatedServerTransport t = new ColocatedServerTransport(c, address, tracers, schedulers,
                    builder.maxInboundMessage, builder.maxInboundMetadata);
            t.start(listener.transportCreated(t));
        }

        @Override
        public synchronized void shutdown() {
            if (!shutdown) {
                shutdown = true;
                if (listener != null) {
                    listener.serverShutdown();
                }
            }
        }

        @Override
        public SocketAddress getListenSocketAddress() {
            return address;
        }

        @Override
        public InternalInstrumented<SocketStats> getListenSocketStats() {
            return null;
        }

        @Override
        public List<? extends SocketAddress> getListenSocketAddresses() {
            return List.of(address);
        }

        @Override
        public List<InternalInstrumented<SocketStats>> getListenSocketStatsList() {
            return null;
        }
    }
}
