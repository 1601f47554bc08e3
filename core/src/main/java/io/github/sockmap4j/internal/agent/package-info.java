/**
 * Not an API: the client side of the node agent's control socket: the client that processes
 * without privileges (and {@code PolicyClient}) use. The request format is the linux module's
 * ({@code linux.control}), shared with the server, the {@code sockmap4j-agent} module's.
 */
package io.github.sockmap4j.internal.agent;
