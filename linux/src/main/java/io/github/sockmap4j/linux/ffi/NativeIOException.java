package io.github.sockmap4j.linux.ffi;

import java.io.IOException;

/**
 * A failed native call: names the operation and carries the errno, as Netty's
 * {@code Errors.newIOException("epoll_ctl", res)} does. Made only by {@link Errno}'s
 * {@code ok}/{@code error}, the one place a call's result becomes an exception.
 */
public final class NativeIOException extends IOException {
    private static final long serialVersionUID = 1L;

    private final int errno;

    NativeIOException(String operation, int errno) {
        super(operation + " failed: " + Errno.describe(errno));
        this.errno = errno;
    }

    NativeIOException(String operation, int errno, String detail) {
        super(operation + " failed: " + Errno.describe(errno) + " (" + detail + ")");
        this.errno = errno;
    }

    /** The positive errno value of the failed call. */
    public int errno() {
        return errno;
    }
}
