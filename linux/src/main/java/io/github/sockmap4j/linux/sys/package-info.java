/**
 * Not an API: the host as the fast path needs it: capabilities, cgroups, the host check,
 * trusted directories, network namespaces, sock_diag.
 */
package io.github.sockmap4j.linux.sys;
