package io.github.sockmap4j;

import io.github.sockmap4j.linux.ffi.Linux;
import io.github.sockmap4j.linux.net.NativeSocket;
import java.nio.channels.SelectionKey;
import java.util.function.BooleanSupplier;
import java.util.function.IntBinaryOperator;

/**
 * What the selector uses of a channel of either kind, made once at registration: its socket, its
 * ready ops for epoll's events, what to do once no selector holds it, and its credit.
 *
 * @param socket         the channel's socket
 * @param readyOps       ready ops for (epoll events, interest ops)
 * @param kill           run once the selector dropped its last key of the channel
 * @param creditHeld     whether a non-blocking writer of the channel is held for credit now
 * @param creditReturned whether a writer held for credit may write again
 */
record Selectable(NativeSocket socket, IntBinaryOperator readyOps, Runnable kill, BooleanSupplier creditHeld,
                  BooleanSupplier creditReturned) {
    /** The ready ops of a stream socket: connect while pending, read and write once connected. */
    static int streamReadyOps(int events, int interest, boolean pending, boolean connected) {
        int ready = 0;
        if ((events & (Linux.EPOLLERR | Linux.EPOLLHUP)) != 0) {
            ready = interest;
        }
        if ((events & Linux.EPOLLIN) != 0) {
            ready |= interest & SelectionKey.OP_READ;
        }
        if ((events & Linux.EPOLLOUT) != 0) {
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
