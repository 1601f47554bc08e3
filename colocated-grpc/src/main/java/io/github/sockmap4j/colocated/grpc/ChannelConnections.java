package io.github.sockmap4j.colocated.grpc;

import java.net.SocketAddress;
import java.util.Set;
import java.util.function.Consumer;

/**
 * What a channel's connection factory knows of the channel's TCP connections: which servers it is
 * connected to. A channel connected to more than one at once spreads its calls over them (its
 * load-balancing policy, whoever chose it: the builder, or a service config from its name
 * resolver), and a co-located connection to one of them would undo that; such a channel keeps its
 * calls on HTTP/2 ({@link Fallback#BALANCED}). Given to {@link ColocatedGrpc#configure} as its
 * lifelines; the Netty transport's {@code SockmapGrpc} does.
 *
 * <p>What it moves: nothing; it is read by the channel's own agreement only.
 */
public interface ChannelConnections {
    /** The remote addresses of the channel's TCP connections that are connected now. */
    Set<SocketAddress> remotes();

    /**
     * Calls {@code connected} with the remote address of each of the channel's TCP connections as
     * it connects, on the thread that saw it connect (an event loop: return at once).
     */
    void onConnected(Consumer<SocketAddress> connected);
}
