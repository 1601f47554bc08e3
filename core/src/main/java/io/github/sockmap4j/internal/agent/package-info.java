/**
 * Not an API: the node agent's control socket, its request protocol, policy file and rule book,
 * and the client side that applications without privileges use through it.
 */
package io.github.sockmap4j.internal.agent;
