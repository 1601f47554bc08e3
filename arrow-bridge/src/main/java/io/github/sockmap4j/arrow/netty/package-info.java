/**
 * For Arrow applications on Netty: the bridge's framing as Netty handlers over the transport.
 */
package io.github.sockmap4j.arrow.netty;
