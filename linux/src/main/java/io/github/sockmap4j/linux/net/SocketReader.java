package io.github.sockmap4j.linux.net;

import io.github.sockmap4j.linux.ffi.Errno;
import io.github.sockmap4j.linux.ffi.Linux;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.channels.AsynchronousCloseException;
import java.util.function.BooleanSupplier;

/**
 * The receive side of a channel's socket: one recv(2) into native or heap memory, no copy in
 * between.
 *
 * <p>Non-blocking reads in a row that found nothing are counted: from {@link #SPIN_READS} on, a
 * read of a socket in the SOCKHASH asks poll(2) first. recv(2) of such a socket takes the
 * socket's lock even when there is nothing to read, and a reader spinning on it keeps the
 * redirecting sender, which needs the same lock to queue its message, waiting and then waking
 * (docs/lab-notes.md, busy-polling). A selector's loop, which reads until nothing is left and
 * then waits, never gets there.
 *
 * <p><b>Note:</b> not threadsafe: used under the channel's read lock.
 */
public final class SocketReader {
    private static final int SPIN_READS = 2;
    private int emptyReads;

    /**
     * A non-blocking read.
     *
     * @param registered whether the socket is in the SOCKHASH (then a spinning reader polls first)
     * @param open       whether the channel is still open
     * @return bytes read, 0 when nothing is there, -1 at end of stream
     */
    public long readNow(NativeSocket socket, MemorySegment dst, boolean registered, BooleanSupplier open) throws IOException {
        if (emptyReads >= SPIN_READS && registered && !socket.await(Linux.POLLIN, 0)) {
            return 0; // still nothing, and the socket's lock was not taken to learn it
        }
        long n = socket.recv(dst, 0);
        if (n >= 0) {
            emptyReads = 0;
            return n == 0 ? -1 : n;
        }
        if (-n == Errno.EAGAIN || -n == Errno.EINTR) {
            emptyReads++;
            return 0;
        }
        throw failure((int) -n, open);
    }

    /**
     * A blocking read of a blocking fd: one recv(2) waits (heap memory, which never waits in
     * recv, waits in poll), and closing the channel wakes it with shutdown(2).
     *
     * @return bytes read, -1 at end of stream, 0 when the channel closed
     */
    public long readWaiting(NativeSocket socket, MemorySegment dst, BooleanSupplier open) throws IOException {
        while (true) {
            if (!open.getAsBoolean()) {
                return 0;
            }
            long n = socket.recv(dst, 0);
            if (n >= 0) {
                return n == 0 ? -1 : n;
            }
            if (-n == Errno.EAGAIN) {
                socket.await(Linux.POLLIN, -1);
            } else if (-n != Errno.EINTR) {
                throw failure((int) -n, open);
            }
        }
    }

    private static IOException failure(int errno, BooleanSupplier open) {
        return open.getAsBoolean() ? Errno.error("recv", -errno) : new AsynchronousCloseException();
    }
}
