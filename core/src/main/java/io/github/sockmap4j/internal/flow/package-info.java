/**
 * Not an API: credit and read publication for the in-flight bound (docs/in-flight-bound.md): one
 * rule ({@link io.github.sockmap4j.internal.flow.CreditEngine}) with two drivers, a blocking channel's
 * wait and an event loop's retry; the kernel side of an open {@code Sockmap} as channels use it
 * ({@link io.github.sockmap4j.internal.flow.FastPath}).
 */
package io.github.sockmap4j.internal.flow;
