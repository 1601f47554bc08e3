/**
 * Not an API: the downcalls into libc and libbpf (FFM), {@code try*} methods returning
 * {@code -errno} and wrappers that throw, with the platform's constants.
 */
package io.github.sockmap4j.linux.ffi;
