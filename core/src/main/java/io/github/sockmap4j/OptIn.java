package io.github.sockmap4j;

/**
 * A server endpoint opted in to the fast path; {@link #close()} opts it out again. Opting the
 * same rule in twice in one process counts: the entry leaves the kernel at the last close.
 */
public interface OptIn extends AutoCloseable {
    /** The server port. */
    int port();

    /** Whether this opt-in reached the kernel (false when the fast path is off). */
    boolean active();

    /**
     * Changes the in-flight bound of this rule's connections, in bytes (0: each receiver's
     * SO_RCVBUF). This process's open connections take it at once; connections that
     * processes open from now on read it from the kernel.
     */
    void setBound(int bytes) throws java.io.IOException;

    @Override
    void close();
}
