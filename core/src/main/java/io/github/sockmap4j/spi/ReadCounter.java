package io.github.sockmap4j.spi;

import io.github.sockmap4j.internal.flow.ReadPublisher;

/**
 * A receiving socket's side of the in-flight bound, for integrations that read a socket
 * themselves ({@link RawSockets#readCounter}): call {@link #onRead} with every count of bytes
 * taken from the socket, in order, from one thread at a time; {@link #close()} when the socket
 * closes. Each call is one store into memory the kernel's verdict reads: no system call.
 *
 * <p><b>Note:</b> {@link #onRead} from one thread at a time; the rest from any.
 */
public final class ReadCounter implements AutoCloseable {
    private final ReadPublisher publisher;

    ReadCounter(ReadPublisher publisher) {
        this.publisher = publisher;
    }

    /**
     * After bytes were read from the socket.
     *
     * @param bytes how many, more than 0
     */
    public void onRead(int bytes) {
        publisher.onRead(bytes);
    }

    /**
     * The bound this receiver sets now.
     *
     * @return bytes, or -1 once the fast path has closed
     */
    public int bound() {
        return publisher.bound();
    }

    /** The socket closed: its slot is free for another. */
    @Override
    public void close() {
        publisher.close();
    }
}
