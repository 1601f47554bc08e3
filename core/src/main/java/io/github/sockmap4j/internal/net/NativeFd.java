package io.github.sockmap4j.internal.net;

import io.github.sockmap4j.internal.ffi.LibC;

/**
 * A channel's socket fd, closed exactly once and only when nothing uses it any more: the channel
 * is closed, no thread is in an operation on it ({@link #enter}/{@link #exit}), and no selector
 * holds it. Closing earlier would let the kernel give the number to another file while a thread
 * or a selector still uses it.
 *
 * <p><b>Note:</b> not threadsafe by itself: its owner calls it under the owner's state lock (one
 * monitor per operation, not two); {@link #isClosed} may be read from any thread.
 */
public final class NativeFd {
    private final int fd;
    private final Runnable onClose;
    private int users;
    private volatile boolean closed;

    /**
     * @param fd      the socket
     * @param onClose run once, just before the fd is closed
     */
    public NativeFd(int fd, Runnable onClose) {
        this.fd = fd;
        this.onClose = onClose;
    }

    /** The fd number: valid while this is not {@link #isClosed() closed}. */
    public int get() {
        return fd;
    }

    /** One more operation uses the fd; it stays open until the matching {@link #exit}. */
    public void enter() {
        users++;
    }

    /** An operation that {@link #enter entered} is done. */
    public void exit() {
        users--;
    }

    /** Whether an operation is in progress on the fd. */
    public boolean inUse() {
        return users > 0;
    }

    /**
     * Closes the fd if {@code released} (its channel closed and out of every selector) and no
     * operation is in progress; once.
     *
     * @return whether the fd is closed now
     */
    public boolean closeIfUnused(boolean released) {
        if (!closed && released && users == 0) {
            closed = true;
            try {
                onClose.run();
            } finally {
                LibC.close(fd);
            }
        }
        return closed;
    }

    /** Whether the fd has been closed. */
    public boolean isClosed() {
        return closed;
    }
}
