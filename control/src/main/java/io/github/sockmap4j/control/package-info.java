/**
 * Not an API: the node agent's control socket as both of its ends read it: the one-line request
 * format ({@code AgentRequest}), its limits and the socket's path, and the client that processes
 * without privileges use ({@code AgentClient}, the rules it holds: {@code AgentRule}); the server
 * is the {@code sockmap4j-agent} module's.
 */
package io.github.sockmap4j.control;
