/**
 * For Netty 4.2 applications: {@link io.github.sockmap4j.netty.SockmapNetty}'s channel factories
 * and I/O handler put a Netty service on the fast path, with Netty's own back-pressure.
 */
package io.github.sockmap4j.netty;
