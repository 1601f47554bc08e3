package io.github.sockmap4j.colocated.grpc;

import java.lang.foreign.MemorySegment;

/**
 * A message whose body another process lent: implemented by the {@link java.io.InputStream} a
 * marshaller is given for a {@link LendableMessage} that came over a co-located connection. Its
 * bytes as a stream are the head, the body and the tail; a marshaller that knows the format can
 * instead read the body where it is ({@link #body()}), and keep it past the stream's close
 * ({@link #keep()}).
 *
 * <p>The body is the sender's memory: the sender (a process of the same user, which proved it is
 * the other end of the TCP connection) can change it while it is read, so a reader takes nothing
 * from it on trust (every offset it reads there checked against {@link #body()}'s size before
 * use). It can never make a read leave the body: the body is checked against the sender's half of
 * the heap when the descriptor arrives, and reads through {@link #body()} are bounds-checked by
 * the segment.
 */
public interface LentMessage {
    /** The bytes before the body: this process's own copy. */
    byte[] head();

    /**
     * The body, read-only, where the sender put it. Readable until the stream is closed (or, after
     * {@link #keep()}, the lease is); a read after the connection's memory is unmapped fails with
     * an {@link IllegalStateException}, never a crash.
     */
    MemorySegment body();

    /** The bytes after the body: this process's own copy. */
    byte[] tail();

    /**
     * Keeps the body mapped and lent past the stream's close, until the lease is closed: for a
     * reader that hands the body's address to code that does not go through {@link #body()} (an
     * Arrow buffer). While a lease is open the connection's memory stays mapped even after the
     * connection ends; closing it gives the body back to the sender. Once per message.
     */
    Lease keep();

    /** A kept body: closing it gives the body back, once. */
    interface Lease extends AutoCloseable {
        @Override
        void close();
    }
}
