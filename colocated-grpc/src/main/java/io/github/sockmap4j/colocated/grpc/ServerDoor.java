package io.github.sockmap4j.colocated.grpc;

import io.grpc.InternalChannelz;
import io.grpc.InternalInstrumented;
import io.grpc.Server;
import io.grpc.ServerServiceDefinition;
import io.grpc.ServerStreamTracer;
import io.grpc.internal.ServerListener;
import java.lang.reflect.Field;
import java.util.List;

/**
 * The door a running gRPC server takes its transports through: the listener its own transport
 * server (Netty's, say) was started with. A co-located connection goes in there, so its calls meet
 * everything the server's TCP connections' calls meet: its services, interceptors, transport
 * filters, executor, stream tracers, handshake timeout and shutdown.
 *
 * <p>gRPC keeps that listener in its transport server's fields, with no API to it; this reads
 * them by name (checked against gRPC 1.84: {@code ServerImpl.transportServer},
 * {@code NettyServer.listener}, {@code streamTracerFactories}, {@code maxMessageSize},
 * {@code maxHeaderListSize}). A gRPC whose fields differ gets no co-located connections
 * ({@link Fallback#SERVER_UNREACHABLE}), never one that skips part of the server.
 */
record ServerDoor(Server server, ServerListener listener, List<? extends ServerStreamTracer.Factory> tracers,
                  int maxMessage, int maxMetadata) {

    /** The started server whose services hold {@code marker} (that exact object), through channelz. */
    static Server serverHolding(ServerServiceDefinition marker) {
        InternalChannelz channelz = InternalChannelz.instance();
        long from = 0;
        while (true) {
            InternalChannelz.ServerList page = channelz.getServers(from, 100);
            for (InternalInstrumented<InternalChannelz.ServerStats> s : page.servers) {
                if (s instanceof Server server && server.getServices().stream().anyMatch(d -> d == marker)) {
                    return server;
                }
                from = s.getLogId().getId() + 1;
            }
            if (page.end || page.servers.isEmpty()) {
                return null;
            }
        }
    }

    /**
     * The door of {@code server}.
     *
     * @throws ReflectiveOperationException naming the field this gRPC does not have as expected
     */
    @SuppressWarnings("unchecked")
    static ServerDoor of(Server server) throws ReflectiveOperationException {
        Object transportServer = read(server, "transportServer");
        Object listener = read(transportServer, "listener");
        if (!(listener instanceof ServerListener l)) {
            throw new NoSuchFieldException(transportServer.getClass().getName() + ".listener is "
                    + (listener == null ? "null (not started?)" : listener.getClass().getName()));
        }
        Object tracers = read(transportServer, "streamTracerFactories");
        Object maxMessage = read(transportServer, "maxMessageSize");
        Object maxMetadata = read(transportServer, "maxHeaderListSize");
        if (!(tracers instanceof List<?>) || !(maxMessage instanceof Integer m) || !(maxMetadata instanceof Integer h)) {
            throw new NoSuchFieldException(transportServer.getClass().getName() + "'s tracers or limits are not as expected");
        }
        return new ServerDoor(server, l, (List<? extends ServerStreamTracer.Factory>) tracers, m, h);
    }

    private static Object read(Object o, String name) throws ReflectiveOperationException {
        for (Class<?> c = o.getClass(); c != null; c = c.getSuperclass()) {
            try {
                Field f = c.getDeclaredField(name);
                f.setAccessible(true);
                return f.get(o);
            } catch (NoSuchFieldException next) {
                // its superclass may hold it
            }
        }
        throw new NoSuchFieldException(o.getClass().getName() + " has no field '" + name + "'");
    }
}
