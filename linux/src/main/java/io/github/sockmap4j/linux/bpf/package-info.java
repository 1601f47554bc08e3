/**
 * Not an API: the kernel objects of a pin directory (the BPF programs, maps and pins, their
 * layouts checked against BTF, the lock and the in-flight watcher), as the public packages use them.
 */
package io.github.sockmap4j.linux.bpf;
