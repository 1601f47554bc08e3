/**
 * Not an API: the JFR events the library emits (the fast path's state, connections).
 */
package io.github.sockmap4j.internal.jfr;
