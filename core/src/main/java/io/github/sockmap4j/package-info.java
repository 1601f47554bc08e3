/**
 * The application API: what a service uses to take the sockmap fast path. {@link
 * io.github.sockmap4j.Sockmap} is the fast path of one pin directory (its state, opt-ins, counters);
 * {@link io.github.sockmap4j.SockmapChannel} and {@link io.github.sockmap4j.SockmapServerChannel}
 * are NIO channels whose connections it accelerates, on plain TCP where it is off;
 * {@link io.github.sockmap4j.SockmapConfig} says where and how; {@link
 * io.github.sockmap4j.SockmapAvailability} whether the host can at all.
 *
 * <p>Integrations that hold raw socket fds use {@link io.github.sockmap4j.spi}; operators and the
 * node agent {@code io.github.sockmap4j.admin} of the sockmap4j-node module.
 */
package io.github.sockmap4j;
