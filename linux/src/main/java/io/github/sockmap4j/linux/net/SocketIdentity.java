package io.github.sockmap4j.linux.net;

import java.net.InetSocketAddress;

/**
 * Who a connected socket is to the kernel's maps: its two ends, its network namespace and its
 * cookie, read once per connection. The SOCKHASH keys a socket by (local, remote, netns); its
 * peer on this host is the same key reversed.
 *
 * @param local  the socket's own address
 * @param remote its peer's address
 * @param netns  the cookie of its network namespace
 * @param cookie the socket's cookie
 */
public record SocketIdentity(InetSocketAddress local, InetSocketAddress remote, long netns, long cookie) {
    /**
     * The server's end of the connection, whose port the policy names.
     *
     * @param serverSide whether this socket was accepted
     * @return {@link #local()} for an accepted socket, {@link #remote()} for a connecting one
     */
    public InetSocketAddress server(boolean serverSide) {
        return serverSide ? local : remote;
    }
}
