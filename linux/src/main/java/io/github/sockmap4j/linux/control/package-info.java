/**
 * Not an API: the node agent's control socket as both of its ends read it: the one-line request
 * format ({@code AgentRequest}), its limits and the socket's path. The client is core's
 * ({@code internal.agent}), the server the {@code sockmap4j-agent} module's.
 */
package io.github.sockmap4j.linux.control;
