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

    @Override
    void close();
}
