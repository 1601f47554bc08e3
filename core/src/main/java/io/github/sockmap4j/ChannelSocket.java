package io.github.sockmap4j;

import io.github.sockmap4j.linux.net.NativeSocket;
import java.io.IOException;
import java.net.SocketOption;
import java.net.StandardSocketOptions;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.spi.AbstractSelectableChannel;
import java.util.Set;

/**
 * What both channel kinds do around their {@link NativeSocket}: the state lock (this object),
 * the socket's users, options, blocking mode, and closing the fd once nothing uses it.
 *
 * <p>The fd is closed by the last of: the channel's close, the last thread in an operation
 * ({@link #exit}), the last selector ({@link #kill}).
 *
 * <p><b>Note:</b> this class is threadsafe: every method takes the lock it holds.
 */
final class ChannelSocket {
    final NativeSocket socket;
    private final AbstractSelectableChannel channel;
    private final Set<SocketOption<?>> options;
    private final Runnable onClose;
    /** Whether the application fixed SO_RCVBUF (here, or on the listening channel of an accepted one). */
    private volatile boolean rcvbufSet;

    /**
     * @param onClose run once, just before the fd is closed
     */
    ChannelSocket(AbstractSelectableChannel channel, NativeSocket socket, Set<SocketOption<?>> options,
                  boolean rcvbufSet, Runnable onClose) {
        this.channel = channel;
        this.onClose = onClose;
        this.socket = socket;
        this.options = options;
        this.rcvbufSet = rcvbufSet;
    }

    /** Throws when the channel is closed; call under this lock. */
    void ensureOpen() throws ClosedChannelException {
        if (!channel.isOpen()) {
            throw new ClosedChannelException();
        }
    }

    /** Marks the start of an operation that uses the fd: it stays open until {@link #exit}. */
    synchronized void enter() throws ClosedChannelException {
        ensureOpen();
        socket.enter();
    }

    /** An operation that {@link #enter entered} (or entered under this lock) is done. */
    synchronized void exit() {
        socket.exit();
        closeIfReleased();
    }

    /** Called once the channel closed, or a selector dropped its last key of it. */
    synchronized void kill() {
        closeIfReleased();
    }

    private void closeIfReleased() {
        if (!socket.isClosed() && !socket.inUse() && !channel.isOpen() && !channel.isRegistered()) {
            try {
                onClose.run();
            } finally {
                socket.closeNow();
            }
        }
    }

    /** The channel closed: wakes a thread waiting in the kernel when {@code mayWait}, then {@link #kill}s. */
    void closed(boolean mayWait) {
        synchronized (this) {
            if (mayWait && !socket.isClosed()) {
                socket.wakeWaiters(); // a reader, writer or acceptor waiting in recv, accept or poll
            }
        }
        kill();
    }

    boolean isClosed() {
        return socket.isClosed();
    }

    boolean rcvbufSet() {
        return rcvbufSet;
    }

    <T> void setOption(SocketOption<T> name, T value) throws IOException {
        synchronized (this) {
            ensureOpen();
            socket.setOption(options, name, value);
            if (name == StandardSocketOptions.SO_RCVBUF) {
                rcvbufSet = true;
            }
        }
    }

    <T> T getOption(SocketOption<T> name) throws IOException {
        synchronized (this) {
            ensureOpen();
            return socket.getOption(options, name);
        }
    }

    Set<SocketOption<?>> supportedOptions() {
        return options;
    }

    void configureBlocking(boolean block) throws IOException {
        synchronized (this) {
            ensureOpen();
            socket.setBlocking(block);
        }
    }
}
