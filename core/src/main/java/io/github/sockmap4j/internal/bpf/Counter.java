package io.github.sockmap4j.internal.bpf;

/** Indexes of the per-CPU counter array, {@code enum sm4j_counter} in bpf/src/sockmap4j.h. */
public enum Counter {
    SOCKETS_REGISTERED,
    REGISTER_FAILED,
    MSGS_REDIRECTED,
    BYTES_REDIRECTED,
    MSGS_PASSED,
    BYTES_PASSED,
    SOCKETS_TAINTED,
    BOUND_HIT,
    RESUMED;
}
