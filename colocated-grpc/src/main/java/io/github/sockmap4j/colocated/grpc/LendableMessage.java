package io.github.sockmap4j.colocated.grpc;

import java.io.IOException;
import java.lang.foreign.MemorySegment;

/**
 * A message that can leave its body in memory the peer maps, instead of being copied through the
 * rings: implemented by the {@link java.io.InputStream} a marshaller returns. Over a co-located
 * connection whose ends agreed on lending (both lend by default: {@code
 * -Dsockmap4j.colocated.lendBytes}), the transport places the body in this end's half of the connection's heap ({@link #writeBody}) and
 * sends the peer its head, its tail and where the body is; the peer's marshaller reads the body in
 * place ({@link LentMessage}) and gives it back when done. Anywhere else (HTTP/2, a connection
 * without a heap, a heap with no room now, a body smaller than {@link #LEND_MIN}) the stream is
 * read as it is.
 *
 * <p>The stream's bytes must be the head, the body and the tail, in that order: a receiver that
 * does not look for a {@link LentMessage} reads those bytes from it, so a message means the same
 * whichever way it went.
 */
public interface LendableMessage {
    /**
     * A body smaller than this is copied through the rings. Lending costs a place in the heap, the
     * descriptor and a give-back; the demo's 6 KiB query batches cost its stages less lent than
     * copied and read (profiled, docs/colocated.md).
     */
    int LEND_MIN = 4 * 1024;

    /** The bytes before the body (copied to the peer with the descriptor). */
    byte[] head();

    /** The body's length in bytes. */
    long bodyBytes();

    /** Writes the body, exactly {@link #bodyBytes()} bytes, into {@code to}. */
    void writeBody(MemorySegment to) throws IOException;

    /** The bytes after the body (copied to the peer with the descriptor). */
    byte[] tail();
}
