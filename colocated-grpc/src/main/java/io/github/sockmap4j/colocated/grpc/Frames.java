package io.github.sockmap4j.colocated.grpc;

import io.grpc.InternalMetadata;
import io.grpc.Metadata;
import java.io.ByteArrayOutputStream;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

/**
 * The frames of a co-located gRPC connection, one ring record each: the record's kind is the
 * frame's type, its bytes begin with the stream's id (0 for the connection). Little-endian.
 *
 * <pre>
 * OPEN       id, method (string), authority (string), headers (metadata)     client to server
 * HEADERS    id, headers (metadata)                                          server to client
 * MESSAGE    id, flags (byte; 1: more of this message follows), bytes       both ways
 * HALF_CLOSE id                                                              client to server
 * TRAILERS   id, code (int), description (string, -1: none), trailers       server to client
 * CANCEL     id, code (int), description (string)                            both ways
 * WINDOW     id, bytes (int): the receiver took that many of the stream's    both ways
 * GOAWAY     0: no new stream will be served                                 server to client
 * PING, PONG 0, data (long)                                                  both ways
 * LENT       id, place (long), body bytes (long), head (int length, bytes),  both ways, where the
 *            tail (the rest): a message whose body is in the sender's half   region has a heap
 *            of the heap ({@link Lending})
 * RETURNED   0, place (long), body bytes (long): the receiver is done with   both ways
 *            a body it was lent
 * string: int length, UTF-8 bytes; metadata: int count of pairs, then each key and value as
 * int length and bytes (InternalMetadata's serialized form)
 * </pre>
 *
 * A frame is parsed from the reader's own copy ({@link Reader}), every length checked against what
 * is left before it is used: a frame that does not parse is a {@link ProtocolException}, which
 * ends its connection.
 */
final class Frames {
    static final int OPEN = 1;
    static final int HEADERS = 2;
    static final int MESSAGE = 3;
    static final int HALF_CLOSE = 4;
    static final int TRAILERS = 5;
    static final int CANCEL = 6;
    static final int WINDOW = 7;
    static final int GOAWAY = 8;
    static final int PING = 9;
    static final int PONG = 10;
    static final int LENT = 11;
    static final int RETURNED = 12;
    static final byte MORE = 1;
    /** The bytes of a MESSAGE frame before its message's: the stream's id and the flags. */
    static final int MESSAGE_HEADER = 5;

    private Frames() {
    }

    /** A frame that cannot be what a peer of this protocol sends. */
    static final class ProtocolException extends java.io.IOException {
        private static final long serialVersionUID = 1L;

        ProtocolException(String message) {
            super(message);
        }
    }

    /**
     * A MESSAGE frame: the stream's id, the flags and {@code n} bytes of {@code message} from
     * {@code off}, made in one array (a message is the one frame large enough to matter).
     */
    static byte[] message(int streamId, boolean more, byte[] message, int off, int n) {
        byte[] f = new byte[MESSAGE_HEADER + n];
        System.arraycopy(message, off, f, MESSAGE_HEADER, n);
        return messageHeader(f, streamId, more);
    }

    /** A MESSAGE frame's header (stream id, flags) written into the first {@link #MESSAGE_HEADER} bytes of {@code frame}. */
    static byte[] messageHeader(byte[] frame, int streamId, boolean more) {
        ByteBuffer.wrap(frame).order(ByteOrder.LITTLE_ENDIAN).putInt(streamId).put(more ? MORE : 0);
        return frame;
    }

    /** {@code length} bytes of {@code array} from {@code offset}: a message, or a frame's share of one. */
    record Slice(byte[] array, int offset, int length) implements StreamFlow.Inbound {
        @Override
        public java.io.InputStream stream() {
            return new java.io.ByteArrayInputStream(array, offset, length);
        }
    }

    /** Builds one frame's bytes. Not thread-safe. */
    static final class Writer {
        private final ByteArrayOutputStream out = new ByteArrayOutputStream(256);
        private final ByteBuffer scratch = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);

        Writer(int streamId) {
            putInt(streamId);
        }

        Writer putInt(int v) {
            scratch.clear();
            scratch.putInt(v);
            out.write(scratch.array(), 0, 4);
            return this;
        }

        Writer putLong(long v) {
            scratch.clear();
            scratch.putLong(v);
            out.write(scratch.array(), 0, 8);
            return this;
        }

        Writer putByte(byte b) {
            out.write(b);
            return this;
        }

        Writer putString(String s) {
            if (s == null) {
                return putInt(-1);
            }
            byte[] b = s.getBytes(StandardCharsets.UTF_8);
            putInt(b.length);
            out.write(b, 0, b.length);
            return this;
        }

        Writer putBytes(byte[] b, int off, int len) {
            out.write(b, off, len);
            return this;
        }

        Writer putMetadata(Metadata m) {
            byte[][] kv = InternalMetadata.serialize(m);
            int pairs = kv == null ? 0 : kv.length / 2;
            putInt(pairs);
            for (int i = 0; i < pairs * 2; i++) {
                putInt(kv[i].length);
                out.write(kv[i], 0, kv[i].length);
            }
            return this;
        }

        byte[] bytes() {
            return out.toByteArray();
        }
    }

    /** Reads one frame from the reader's own copy, each length checked. */
    static final class Reader {
        private final MemorySegment frame;
        /** The array {@link #frame} is, where the reader owns one ({@link #restSlice} then copies nothing). */
        private final byte[] array;
        private long pos;

        Reader(MemorySegment frame) {
            this.frame = frame;
            this.array = null;
        }

        /** A frame in an array of its own, which the reader keeps (a slice of it may outlive the reader). */
        Reader(byte[] frame) {
            this.frame = MemorySegment.ofArray(frame);
            this.array = frame;
        }

        private void need(long n, String what) throws ProtocolException {
            if (n < 0 || n > frame.byteSize() - pos) {
                throw new ProtocolException("a frame of " + frame.byteSize() + " bytes ends before its " + what);
            }
        }

        int getInt(String what) throws ProtocolException {
            need(4, what);
            int v = frame.get(ValueLayout.JAVA_INT_UNALIGNED, pos);
            pos += 4;
            return v;
        }

        long getLong(String what) throws ProtocolException {
            need(8, what);
            long v = frame.get(ValueLayout.JAVA_LONG_UNALIGNED, pos);
            pos += 8;
            return v;
        }

        byte getByte(String what) throws ProtocolException {
            need(1, what);
            return frame.get(ValueLayout.JAVA_BYTE, pos++);
        }

        String getString(String what, int max) throws ProtocolException {
            int len = getInt(what);
            if (len == -1) {
                return null;
            }
            if (len < 0 || len > max) {
                throw new ProtocolException("a " + what + " of " + len + " bytes (at most " + max + ")");
            }
            need(len, what);
            String s = new String(frame.asSlice(pos, len).toArray(ValueLayout.JAVA_BYTE), StandardCharsets.UTF_8);
            pos += len;
            return s;
        }

        /** The rest of the frame: a slice of the frame's own array where it has one, else a copy. */
        Slice restSlice() {
            int at = (int) pos;
            pos = frame.byteSize();
            if (array != null) {
                return new Slice(array, at, array.length - at);
            }
            byte[] b = frame.asSlice(at).toArray(ValueLayout.JAVA_BYTE);
            return new Slice(b, 0, b.length);
        }

        /** {@code n} bytes, copied. */
        byte[] getBytes(String what, int n) throws ProtocolException {
            need(n, what);
            byte[] b = frame.asSlice(pos, n).toArray(ValueLayout.JAVA_BYTE);
            pos += n;
            return b;
        }

        /** The rest of the frame. */
        byte[] rest() {
            byte[] b = frame.asSlice(pos).toArray(ValueLayout.JAVA_BYTE);
            pos = frame.byteSize();
            return b;
        }

        /** Metadata of at most {@code maxBytes} (keys and values, with gRPC's 32 bytes a pair). */
        Metadata getMetadata(String what, int maxBytes) throws ProtocolException {
            int pairs = getInt(what);
            if (pairs < 0 || pairs > maxBytes / 32) {
                throw new ProtocolException(what + " of " + pairs + " entries (at most " + maxBytes / 32 + ")");
            }
            byte[][] kv = new byte[pairs * 2][];
            long size = 0;
            for (int i = 0; i < kv.length; i++) {
                int len = getInt(what);
                need(len, what);
                size += len + (i % 2 == 0 ? 32 : 0);
                if (size > maxBytes) {
                    throw new ProtocolException(what + " larger than " + maxBytes + " bytes");
                }
                kv[i] = frame.asSlice(pos, len).toArray(ValueLayout.JAVA_BYTE);
                pos += len;
            }
            for (int i = 0; i < kv.length; i += 2) {
                if (kv[i].length == 0) {
                    throw new ProtocolException(what + " with an empty key");
                }
            }
            return InternalMetadata.newMetadata(pairs, kv);
        }

        void end(String frameName) throws ProtocolException {
            if (pos != frame.byteSize()) {
                throw new ProtocolException("a " + frameName + " frame with " + (frame.byteSize() - pos)
                        + " bytes past its end");
            }
        }
    }
}
