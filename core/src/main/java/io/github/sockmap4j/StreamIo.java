package io.github.sockmap4j;

import io.github.sockmap4j.internal.flow.ConnectionFlow;
import io.github.sockmap4j.internal.flow.SocketWriter;
import io.github.sockmap4j.linux.net.Buffers;
import io.github.sockmap4j.linux.net.NativeSocket;
import io.github.sockmap4j.linux.net.SocketReader;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.Objects;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BooleanSupplier;

/**
 * The reads and writes of a {@link SockmapChannel}: one reader and one writer at a time (a lock
 * each), every transfer inside the channel's enter/exit guard, so that its fd stays open while a
 * thread is in recv or send, and a blocking one interruptible by close and by
 * {@link Thread#interrupt()}. Reads publish to the connection's flow; writes keep within its credit.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
final class StreamIo {
    private final SockmapChannel channel;
    private final NativeSocket socket;
    private final ConnectionFlow flow;
    private final ReentrantLock readLock = new ReentrantLock();
    private final SocketReader reader = new SocketReader(); // guarded by readLock
    private final ReentrantLock writeLock = new ReentrantLock();
    /** Single and gathering sends within the receiver's credit; guarded by the write lock. */
    private final SocketWriter writer = new SocketWriter();
    private final BooleanSupplier open; // made once: no allocation per read or write

    StreamIo(SockmapChannel channel, NativeSocket socket, ConnectionFlow flow) {
        this.channel = channel;
        this.socket = socket;
        this.flow = flow;
        this.open = channel::isOpen;
    }

    long read(MemorySegment dst, boolean readOnly, boolean blocking) throws IOException {
        if (readOnly) {
            throw new IllegalArgumentException("read-only destination");
        }
        readLock.lock();
        try {
            return readLocked(dst, blocking);
        } finally {
            readLock.unlock();
        }
    }

    long read(ByteBuffer[] dsts, int offset, int length, boolean blocking) throws IOException {
        Objects.checkFromIndexSize(offset, length, dsts.length);
        readLock.lock();
        try {
            return Buffers.scatter(dsts, offset, length, blocking, this::readLocked);
        } finally {
            readLock.unlock();
        }
    }

    private long readLocked(MemorySegment dst, boolean blocking) throws IOException {
        if (!channel.enterRead()) {
            return -1; // input shut down
        }
        boolean waits = blocking && dst.byteSize() != 0; // nothing to read: no wait to begin
        boolean completed = false;
        channel.beginIo(waits);
        try {
            long n = dst.byteSize() == 0 ? 0 : blocking ? reader.readWaiting(socket, dst, open)
                    : reader.readNow(socket, dst, flow.bounded(), open);
            completed = n != 0 || !waits; // waiting, 0: woken by close(), the operation did not complete
            if (n > 0) {
                flow.onRead(n);
            }
            return n;
        } finally {
            channel.endIo(waits, completed);
        }
    }

    long write(MemorySegment src, boolean blocking) throws IOException {
        writeLock.lock();
        try {
            return writeLocked(src, blocking);
        } finally {
            writeLock.unlock();
        }
    }

    long write(ByteBuffer[] srcs, int offset, int length, boolean blocking) throws IOException {
        Objects.checkFromIndexSize(offset, length, srcs.length);
        writeLock.lock();
        try {
            if (SocketWriter.gatherable(srcs, offset, length)) {
                return send(null, srcs, offset, length, blocking);
            }
            return Buffers.spread(srcs, offset, length, blocking, this::writeLocked);
        } finally {
            writeLock.unlock();
        }
    }

    private long writeLocked(MemorySegment src, boolean blocking) throws IOException {
        return send(src, null, 0, 0, blocking);
    }

    /** One send of {@code src}, or a gathering one of {@code srcs} when it is not null. */
    private long send(MemorySegment src, ByteBuffer[] srcs, int offset, int length, boolean blocking)
            throws IOException {
        channel.enterWrite();
        boolean completed = false;
        channel.beginIo(blocking);
        try {
            long n = srcs == null ? writer.write(socket, src, blocking, open, flow.credit())
                    : writer.gather(socket, srcs, offset, length, blocking, open, flow.credit());
            completed = true;
            return n;
        } finally {
            channel.endIo(blocking, completed);
        }
    }

    /** For a selector: whether a non-blocking writer is held for credit now. */
    boolean creditHeld() {
        return writer.held();
    }

    /** For a selector: whether a writer held for credit may write again. */
    boolean creditReturned() {
        return writer.returned(writeLock, flow.resolvedCredit());
    }

    /** The channel closed: its writer is held for nothing any more. */
    void closed() {
        writer.closed();
    }
}
