/**
 * For integrations that read and write a connected socket's fd themselves (the Netty transport,
 * the Arrow bridge) instead of through a {@code SockmapChannel}: {@link
 * io.github.sockmap4j.spi.RawSockets} of a {@code Sockmap} gives a receiver its {@link
 * io.github.sockmap4j.spi.ReadCounter} and a writer its {@link io.github.sockmap4j.spi.WriteCredit}
 * (docs/in-flight-bound.md), with the same rule a {@code SockmapChannel} follows.
 */
package io.github.sockmap4j.spi;
