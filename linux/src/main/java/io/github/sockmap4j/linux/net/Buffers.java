package io.github.sockmap4j.linux.net;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;

/** Scattering reads and (not gathered) writes over arrays of buffers, one buffer at a time, as SocketChannel's. */
public final class Buffers {
    private Buffers() {
    }

    /** One read or write of a buffer's remaining bytes. */
    @FunctionalInterface
    public interface Io {
        /**
         * @param blocking whether this one may wait
         * @return bytes moved, 0 for none now, -1 at end of stream (reads)
         */
        long run(MemorySegment memory, boolean blocking) throws IOException;
    }

    /**
     * Reads into {@code dsts[offset..offset+length)} in order until one is not filled; only the
     * first read may wait.
     *
     * @return bytes read, -1 when the first read met the end of the stream
     * @throws IllegalArgumentException at a read-only buffer
     */
    public static long scatter(ByteBuffer[] dsts, int offset, int length, boolean blocking, Io read)
            throws IOException {
        long total = 0;
        for (int i = offset; i < offset + length; i++) {
            ByteBuffer b = dsts[i];
            if (b.isReadOnly()) {
                throw new IllegalArgumentException("read-only buffer");
            }
            if (!b.hasRemaining()) {
                continue;
            }
            long n = read.run(MemorySegment.ofBuffer(b), blocking && total == 0);
            if (n < 0) {
                return total == 0 ? -1 : total;
            }
            b.position(b.position() + (int) n);
            total += n;
            if (b.hasRemaining()) {
                break;
            }
        }
        return total;
    }

    /**
     * Writes {@code srcs[offset..offset+length)} in order until one is not written whole.
     *
     * @return bytes written
     */
    public static long spread(ByteBuffer[] srcs, int offset, int length, boolean blocking, Io write)
            throws IOException {
        long total = 0;
        for (int i = offset; i < offset + length; i++) {
            ByteBuffer b = srcs[i];
            if (!b.hasRemaining()) {
                continue;
            }
            int n = (int) write.run(MemorySegment.ofBuffer(b), blocking);
            b.position(b.position() + n);
            total += n;
            if (b.hasRemaining()) {
                break;
            }
        }
        return total;
    }
}
