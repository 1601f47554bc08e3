/**
 * For new users: the demos the README runs, each a service on the fast path in a few lines.
 */
package io.github.sockmap4j.examples;
