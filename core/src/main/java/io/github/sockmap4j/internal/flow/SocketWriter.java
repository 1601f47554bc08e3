package io.github.sockmap4j.internal.flow;

import io.github.sockmap4j.linux.ffi.Errno;
import io.github.sockmap4j.linux.ffi.LibC;
import io.github.sockmap4j.linux.ffi.Linux;
import io.github.sockmap4j.linux.ffi.NativeLayouts;
import io.github.sockmap4j.linux.net.NativeSocket;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.channels.AsynchronousCloseException;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BooleanSupplier;

/**
 * The send side of a channel's socket: single and gathering sends, each within the receiver's
 * credit ({@link ChannelCredit}) when the connection has one. Blocking mode sends everything;
 * non-blocking mode what the socket and the credit take now.
 *
 * <p>A gathering write is one sendmsg with an iovec per buffer (up to IOV_MAX and
 * {@link #GATHER_BYTES}, then the next): one message for the kernel, so one verdict run and one
 * redirected message instead of one per buffer. Small writes batched this way are what makes the
 * redirect keep up with TCP, which coalesces small writes itself (docs/kernel.md, "Small
 * messages"). The msghdr and its iovecs are allocated once per channel and reused.
 *
 * <p><b>Note:</b> not threadsafe: used under the channel's write lock (but {@link #held} and
 * {@link #returned}, for a selector).
 */
public final class SocketWriter {
    /**
     * The most bytes one gathering sendmsg collects (more when a single buffer is larger): small
     * buffers coalesce into messages of this size, large ones are not glued into messages larger
     * than a receiver's in-flight bound, which would send them all by TCP.
     */
    public static final long GATHER_BYTES = 64 * 1024;

    private final ChannelCredit credits = new ChannelCredit();
    private MemorySegment scratch;

    /**
     * Sends {@code src}: all of it when blocking.
     *
     * @param c    the connection's credit, null for none
     * @param open whether the channel is still open
     * @return the bytes sent
     */
    public long write(NativeSocket socket, MemorySegment src, boolean blocking, BooleanSupplier open, CreditEngine c)
            throws IOException {
        long size = src.byteSize();
        long written = 0;
        while (written < size) {
            if (blocking && !open.getAsBoolean()) {
                return written;
            }
            long chunk = size - written;
            if (c != null) {
                long allowed = credits.await(c, chunk, blocking, open);
                if (allowed == 0) {
                    break;
                }
                chunk = Math.min(chunk, allowed);
            }
            long n = socket.send(written == 0 && chunk == size ? src : src.asSlice(written, chunk), 0);
            if (n >= 0) {
                written += n;
                if (c != null) {
                    c.sent(n);
                }
            } else if (!sendAgain(socket, n, blocking, open, "send")) {
                break;
            }
        }
        return written;
    }

    /** Two or more buffers with bytes, all direct: one sendmsg can take them. */
    public static boolean gatherable(ByteBuffer[] srcs, int offset, int length) {
        int withBytes = 0;
        for (int i = offset; i < offset + length; i++) {
            if (srcs[i].hasRemaining()) {
                if (!srcs[i].isDirect()) {
                    return false;
                }
                withBytes++;
            }
        }
        return withBytes > 1;
    }

    /**
     * Sends {@code srcs[offset..offset+length)} ({@link #gatherable}) in gathering sends,
     * advancing their positions: all of them when blocking.
     *
     * @return the bytes sent
     */
    public long gather(NativeSocket socket, ByteBuffer[] srcs, int offset, int length, boolean blocking, BooleanSupplier open,
                       CreditEngine c) throws IOException {
        int max = Math.min(length, Linux.IOV_MAX);
        MemorySegment s = scratch(max);
        MemorySegment msghdr = s.asSlice(0, LibC.MSGHDR_SIZE);
        MemorySegment iov = s.asSlice(LibC.MSGHDR_SIZE, LibC.IOVEC_SIZE * max);
        int first = offset;
        int end = offset + length;
        long total = 0;
        while (true) {
            while (first < end && !srcs[first].hasRemaining()) {
                first++;
            }
            if (first == end) {
                break;
            }
            long limit = Long.MAX_VALUE;
            if (c != null) {
                limit = credits.await(c, remaining(srcs, first, end), blocking, open);
                if (limit == 0) {
                    break;
                }
            }
            int count = 0;
            long chunk = 0;
            for (int i = first; i < end && count < max && chunk < GATHER_BYTES && chunk < limit; i++) {
                ByteBuffer b = srcs[i];
                if (b.hasRemaining()) {
                    MemorySegment seg = MemorySegment.ofBuffer(b);
                    long len = Math.min(seg.byteSize(), limit - chunk);
                    iov.set(ValueLayout.ADDRESS, count * LibC.IOVEC_SIZE + NativeLayouts.IOVEC_BASE, seg);
                    iov.set(ValueLayout.JAVA_LONG, count * LibC.IOVEC_SIZE + NativeLayouts.IOVEC_LEN, len);
                    chunk += len;
                    count++;
                }
            }
            if (blocking && !open.getAsBoolean()) {
                break;
            }
            long n = socket.sendmsg(msghdr, iov, count, 0);
            if (n >= 0) {
                total += n;
                if (c != null) {
                    c.sent(n);
                }
                boolean whole = n == chunk;
                for (int i = first; i < end && n > 0; i++) {
                    ByteBuffer b = srcs[i];
                    int step = (int) Math.min(n, b.remaining());
                    b.position(b.position() + step);
                    n -= step;
                }
                if (!blocking && !whole) {
                    break; // the socket took what it could
                }
            } else if (!sendAgain(socket, n, blocking, open, "sendmsg")) {
                break;
            }
        }
        return total;
    }

    private static long remaining(ByteBuffer[] srcs, int from, int end) {
        long n = 0;
        for (int i = from; i < end; i++) {
            n += srcs[i].remaining();
        }
        return n;
    }

    /**
     * A zeroed msghdr (no name, no control: only its iovec fields are ever set) followed by room
     * for {@code iovecs} iovecs.
     */
    private MemorySegment scratch(int iovecs) {
        long need = LibC.MSGHDR_SIZE + LibC.IOVEC_SIZE * iovecs;
        if (scratch == null || scratch.byteSize() < need) {
            scratch = Arena.ofAuto().allocate(need, 8);
        }
        return scratch;
    }

    /**
     * After a send that failed with {@code -n}: whether to send again (EINTR; EAGAIN in blocking
     * mode, once the socket is writable: heap memory goes with MSG_DONTWAIT, which never waits in
     * the kernel) or to return what was written (EAGAIN, non-blocking).
     */
    private static boolean sendAgain(NativeSocket socket, long n, boolean blocking, BooleanSupplier open, String call)
            throws IOException {
        if (-n == Errno.EAGAIN) {
            if (blocking) {
                socket.await(Linux.POLLOUT, -1);
            }
            return blocking;
        }
        if (-n == Errno.EINTR) {
            return true;
        }
        if (!open.getAsBoolean()) {
            throw new AsynchronousCloseException();
        }
        throw Errno.error(call, n);
    }

    /** For a selector: whether a non-blocking writer held for credit may write again. */
    public boolean returned(ReentrantLock writeLock, CreditEngine credit) {
        return credits.returned(writeLock, credit);
    }

    /** Whether a non-blocking writer is held for credit now. */
    public boolean held() {
        return credits.held();
    }

    /** The channel closed: its writer is held for nothing any more. */
    public void closed() {
        credits.closed();
    }
}
