package io.github.sockmap4j.colocated.grpc;

import java.io.IOException;
import java.io.InputStream;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A message the peer lent (a LENT frame): its head and tail copied here, its body where the peer
 * put it. Given back once (a RETURNED frame): when its stream is closed, or its lease is, or
 * when it is dropped undelivered (its stream ended first).
 */
final class LentIn implements StreamFlow.Inbound {
    /** What a lent message counts against its stream's window besides its head and tail. */
    static final int DESCRIPTOR_BYTES = 16;

    private final ColocatedConnection connection;
    private final long at;
    private final MemorySegment body;
    private final byte[] head;
    private final byte[] tail;
    private final AtomicBoolean back = new AtomicBoolean();

    LentIn(ColocatedConnection connection, long at, MemorySegment body, byte[] head, byte[] tail) {
        this.connection = connection;
        this.at = at;
        this.body = body;
        this.head = head;
        this.tail = tail;
    }

    /** The message's whole length: head, body and tail. */
    long messageBytes() {
        return head.length + body.byteSize() + tail.length;
    }

    @Override
    public int length() {
        return head.length + tail.length + DESCRIPTOR_BYTES;
    }

    @Override
    public InputStream stream() {
        return new Stream();
    }

    @Override
    public void drop() {
        giveBack();
    }

    private void giveBack() {
        if (back.compareAndSet(false, true)) {
            connection.giveBack(at, body.byteSize());
        }
    }

    /** The message as the marshaller reads it. */
    private final class Stream extends InputStream implements LentMessage, io.grpc.KnownLength {
        private long pos;
        private boolean kept;
        private boolean closed;

        @Override
        public byte[] head() {
            return head.clone();
        }

        @Override
        public MemorySegment body() {
            return body;
        }

        @Override
        public byte[] tail() {
            return tail.clone();
        }

        @Override
        public synchronized Lease keep() {
            if (kept || closed) {
                throw new IllegalStateException(kept ? "the body is kept already" : "the message's stream is closed");
            }
            if (!connection.holds().hold()) {
                throw new IllegalStateException("the co-located connection that lent this body has ended");
            }
            kept = true;
            AtomicBoolean done = new AtomicBoolean();
            return () -> {
                if (done.compareAndSet(false, true)) {
                    giveBack();
                    connection.holds().release();
                }
            };
        }

        @Override
        public synchronized int available() {
            return (int) Math.min(Integer.MAX_VALUE, messageBytes() - pos);
        }

        @Override
        public int read() throws IOException {
            byte[] one = new byte[1];
            return read(one, 0, 1) < 0 ? -1 : one[0] & 0xff;
        }

        @Override
        public synchronized int read(byte[] b, int off, int len) throws IOException {
            java.util.Objects.checkFromIndexSize(off, len, b.length);
            if (closed) {
                throw new IOException("the message's stream is closed");
            }
            if (len == 0) {
                return 0;
            }
            long bodyEnd = head.length + body.byteSize();
            if (pos >= bodyEnd + tail.length) {
                return -1;
            }
            int n;
            if (pos < head.length) {
                n = (int) Math.min(len, head.length - pos);
                System.arraycopy(head, (int) pos, b, off, n);
            } else if (pos < bodyEnd) {
                n = (int) Math.min(len, bodyEnd - pos);
                try {
                    MemorySegment.copy(body, ValueLayout.JAVA_BYTE, pos - head.length, b, off, n);
                } catch (IllegalStateException e) {
                    throw new IOException("the co-located connection that lent this message has ended", e);
                }
            } else {
                n = (int) Math.min(len, bodyEnd + tail.length - pos);
                System.arraycopy(tail, (int) (pos - bodyEnd), b, off, n);
            }
            pos += n;
            return n;
        }

        @Override
        public synchronized void close() {
            if (closed) {
                return;
            }
            closed = true;
            if (!kept) {
                giveBack();
            }
        }
    }
}
