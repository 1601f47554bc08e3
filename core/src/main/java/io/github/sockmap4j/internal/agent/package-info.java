/**
 * Not an API: the client side of the node agent's control socket: its request protocol and the
 * client that processes without privileges (and {@code PolicyClient}) use. The server is the
 * {@code sockmap4j-agent} module's.
 */
package io.github.sockmap4j.internal.agent;
