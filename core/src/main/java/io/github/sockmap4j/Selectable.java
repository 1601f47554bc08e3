package io.github.sockmap4j;

import io.github.sockmap4j.internal.ffi.LibC;
import java.nio.channels.SelectionKey;
import java.util.function.BooleanSupplier;
import java.util.function.IntBinaryOperator;

/**
 * What the selector uses of a channel of either kind, made once at registration: its fd, its
 * ready ops for epoll's events, what to do once no selector holds it, and its credit.
 *
 * @param fd             the channel's socket
 * @param readyOps       ready ops for (epoll events, interest ops)
 * @param kill           run once the selector dropped its last key of the channel
 * @param creditHeld     whether a non-blocking writer of the channel is held for credit now
 * @param creditReturned whether a writer held for credit may write again
 */
record Selectable(int fd, IntBinaryOperator readyOps, Runnable kill, BooleanSupplier creditHeld,
                  BooleanSupplier creditReturned) {
    /** The ready ops of a stream socket: connect while pending, read and write once connected. */
    static int streamReadyOps(int events, int interest, boolean pending, boolean connected) {
        int ready = 0;
        if ((events & (LibC.EPOLLERR | LibC.EPOLLHUP)) != 0) {
            ready = interest;
        }
        if ((events & LibC.EPOLLIN) != 0) {
            ready |= interest & SelectionKey.OP_READ;
        }
        if ((events & LibC.EPOLLOUT) != 0) {
            ready |= interest & (SelectionKey.OP_WRITE | SelectionKey.OP_CONNECT);
        }
        if (!pending) {
            ready &= ~SelectionKey.OP_CONNECT;
        }
        if (!connected) {
            ready &= ~(SelectionKey.OP_READ | SelectionKey.OP_WRITE);
        }
        return ready;
    }
}
