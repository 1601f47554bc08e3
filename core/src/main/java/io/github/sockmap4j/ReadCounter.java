package io.github.sockmap4j;

/**
 * A receiving socket's side of the in-flight bound, for integrations that read a socket
 * themselves (Netty's epoll channels): call {@link #onRead} with every count of bytes taken
 * from the socket, in order, from one thread at a time; {@link #close()} when the socket
 * closes. Each call is one store into memory the kernel's verdict reads: no syscall.
 */
public interface ReadCounter extends AutoCloseable {
    /** After {@code bytes > 0} bytes were read from the socket. */
    void onRead(int bytes);

    /** The bound this receiver sets now, in bytes. */
    int bound();

    @Override
    void close();
}
