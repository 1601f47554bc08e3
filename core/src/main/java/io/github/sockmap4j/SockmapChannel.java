package io.github.sockmap4j;

import io.github.sockmap4j.internal.flow.ConnectionFlow;
import io.github.sockmap4j.linux.ffi.Errno;
import io.github.sockmap4j.linux.ffi.Linux;
import io.github.sockmap4j.linux.net.NativeSocket;
import io.github.sockmap4j.linux.net.SocketOptions;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketAddress;
import java.net.SocketOption;
import java.nio.ByteBuffer;
import java.nio.channels.AlreadyConnectedException;
import java.nio.channels.AsynchronousCloseException;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.ConnectionPendingException;
import java.nio.channels.NoConnectionPendingException;
import java.nio.channels.NotYetConnectedException;
import java.nio.channels.SocketChannel;
import java.nio.channels.spi.SelectorProvider;
import java.util.Objects;
import java.util.Set;

/**
 * A TCP stream channel whose connection takes the sockmap fast path when both ends are
 * registered, and plain TCP otherwise: the code is the same either way.
 *
 * <p>It is a {@link SocketChannel}: blocking or non-blocking, selectable with a selector from
 * {@link Sockmap#openSelector()}. Besides {@link ByteBuffer}s it reads and writes
 * {@link MemorySegment}s; native memory and direct buffers go to {@code recv}/{@code send} as
 * they are, and so do heap buffers (through a critical downcall): no copy through the JVM heap.
 * The kernel still copies once on each side (docs/zero-copy.md).
 *
 * <p>{@link #socket()} is not supported: there is no {@code java.net.Socket} adaptor.
 *
 * <p><b>Note:</b> this class is threadsafe: one reader and one writer may work at once, as with
 * any {@code SocketChannel}.
 */
public final class SockmapChannel extends SocketChannel {
    private enum State { UNCONNECTED, PENDING, CONNECTED }

    private final Sockmap sockmap;
    /** The socket, and the state lock (the object itself) that guards the fields below. */
    private final ChannelSocket io;
    private final NativeSocket socket;
    private State state;
    private boolean inputShutdown;
    private boolean outputShutdown;
    private InetSocketAddress remote;
    /** The connection's read slot and write credit. */
    private final ConnectionFlow flow;
    /** Reads and writes, each inside the enter/exit guard. */
    private final StreamIo transfer;
    /** Whether this end was accepted (its local side is the server, whose port has the policy). */
    private final boolean serverSide;

    SockmapChannel(SelectorProvider provider, Sockmap sockmap) throws IOException {
        this(provider, sockmap, NativeSocket.newStream(), false, false);
    }

    /** A new socket, or (accepted) a connected one; in blocking mode either way, as new channels are. */
    SockmapChannel(SelectorProvider provider, Sockmap sockmap, NativeSocket socket, boolean accepted,
                   boolean rcvbufSet) throws IOException {
        super(provider);
        this.sockmap = Objects.requireNonNull(sockmap, "sockmap");
        this.socket = socket.blockingOrClose();
        this.flow = new ConnectionFlow(sockmap::fastPath, socket, this);
        this.io = new ChannelSocket(this, socket, SocketOptions.STREAM_OPTIONS, rcvbufSet, flow::close);
        this.transfer = new StreamIo(this, socket, flow);
        this.serverSide = accepted;
        this.state = accepted ? State.CONNECTED : State.UNCONNECTED;
        if (accepted) {
            this.remote = socket.remoteAddress();
            flow.connected(serverSide, io.rcvbufSet());
        }
    }

    /**
     * A new unconnected channel over the process-wide {@link Sockmap#global()}.
     *
     * @return the channel, in blocking mode
     * @throws SockmapUnavailableException when {@code sockmap4j.require=true} and the fast path is off
     */
    public static SockmapChannel open() throws IOException {
        return Sockmap.global().openChannel();
    }

    /**
     * Opens a channel and connects it (blocking).
     *
     * @param remote the server, an {@link InetSocketAddress}
     * @return the connected channel
     * @throws java.net.ConnectException when the connection is refused
     */
    public static SockmapChannel open(SocketAddress remote) throws IOException {
        SockmapChannel ch = open();
        try {
            ch.connect(remote);
        } catch (IOException | RuntimeException e) {
            ch.close();
            throw e;
        }
        return ch;
    }

    /** @return the fast path this channel belongs to */
    public Sockmap sockmap() {
        return sockmap;
    }

    /**
     * Whether this connection's sends go through the redirect now: both sockets are in the
     * SOCKHASH (looked up, not assumed) and this socket is not sending by TCP (as it does when
     * its peer was not registered yet, or has left too much unread: see {@link #inFlightBound()}).
     *
     * @return false too while unconnected, once closed, and where the fast path is off
     */
    public boolean isAccelerated() {
        synchronized (io) {
            return state == State.CONNECTED && !io.isClosed() && flow.isAccelerated();
        }
    }

    /**
     * The in-flight bound this channel sets as a receiver: how many bytes its peer may redirect
     * to it that it has not read; past that the peer sends by TCP, whose window blocks it.
     *
     * @return bytes; -1 when it sets none (fast path off, the connection not registered, or bound off)
     */
    public int inFlightBound() {
        synchronized (io) {
            return io.isClosed() ? -1 : flow.bound();
        }
    }

    /** This socket's side of the bound, for the tests' diagnostics. */
    String flowState() {
        return io.isClosed() ? "closed" : flow.state();
    }

    /** What a selector uses of this channel: its ready ops follow its state. */
    Selectable selectable() {
        return new Selectable(socket, (events, interest) -> {
            synchronized (io) {
                return Selectable.streamReadyOps(events, interest, state == State.PENDING, state == State.CONNECTED);
            }
        }, io::kill, transfer::creditHeld, transfer::creditReturned);
    }

    @Override
    public SocketChannel bind(SocketAddress local) throws IOException {
        synchronized (io) {
            io.ensureOpen();
            if (state != State.UNCONNECTED) {
                throw new AlreadyConnectedException();
            }
            socket.bind(local == null ? new InetSocketAddress(0) : SocketOptions.checkAddress(local));
        }
        return this;
    }

    @Override
    public boolean connect(SocketAddress addr) throws IOException {
        InetSocketAddress isa = SocketOptions.connectTarget(addr);
        synchronized (io) {
            io.ensureOpen();
            if (state == State.CONNECTED) {
                throw new AlreadyConnectedException();
            }
            if (state == State.PENDING) {
                throw new ConnectionPendingException();
            }
            // connect(2) always runs non-blocking, so that no thread waits in it holding the state lock.
            int r = socket.connectNow(isa, isBlocking());
            remote = isa;
            if (r == 0) {
                state = State.CONNECTED;
                flow.connected(serverSide, io.rcvbufSet());
                return true;
            }
            if (-r != Errno.EINPROGRESS) {
                throw SocketOptions.connectFailure(-r, isa);
            }
            state = State.PENDING;
            if (!isBlocking()) {
                return false;
            }
        }
        return awaitConnected();
    }

    /** Blocking: waits until the pending connect completes, then finishes it. */
    private boolean awaitConnected() throws IOException {
        io.enter();
        boolean done = false;
        beginIo(true);
        try {
            if (isOpen()) {
                socket.await(Linux.POLLOUT, -1);
            }
            done = finishPending();
            return done;
        } finally {
            endIo(true, done);
        }
    }

    /** After entering the socket: a blocking operation begins a wait that close and interrupts end. */
    void beginIo(boolean blocking) {
        if (blocking) {
            begin();
        }
    }

    /**
     * Ends an operation that entered the socket (and, {@code blocking}, began an interruptible
     * wait): throws when the channel was closed or interrupted meanwhile, and lets the fd go.
     */
    void endIo(boolean blocking, boolean completed) throws AsynchronousCloseException {
        try {
            if (blocking) {
                end(completed && isOpen());
            }
        } finally {
            io.exit();
        }
    }

    @Override
    public boolean finishConnect() throws IOException {
        synchronized (io) {
            io.ensureOpen();
            if (state == State.CONNECTED) {
                return true;
            }
            if (state != State.PENDING) {
                throw new NoConnectionPendingException();
            }
        }
        if (!isBlocking()) {
            if (!socket.await(Linux.POLLOUT, 0)) {
                return false;
            }
            return finishPending();
        }
        return awaitConnected();
    }

    private boolean finishPending() throws IOException {
        synchronized (io) {
            io.ensureOpen();
            int err = socket.connectResult(isBlocking());
            if (err != 0) {
                throw SocketOptions.connectFailure(err, remote);
            }
            state = State.CONNECTED;
            flow.connected(serverSide, io.rcvbufSet());
            return true;
        }
    }

    @Override
    public boolean isConnected() {
        synchronized (io) {
            return state == State.CONNECTED && isOpen();
        }
    }

    @Override
    public boolean isConnectionPending() {
        synchronized (io) {
            return state == State.PENDING && isOpen();
        }
    }

    @Override
    public SocketAddress getLocalAddress() throws IOException {
        synchronized (io) {
            io.ensureOpen();
            InetSocketAddress a = socket.localAddress();
            return a.getPort() == 0 && state == State.UNCONNECTED ? null : a;
        }
    }

    @Override
    public SocketAddress getRemoteAddress() throws IOException {
        synchronized (io) {
            io.ensureOpen();
            return state == State.CONNECTED ? remote : null;
        }
    }

    @Override
    public SocketChannel shutdownInput() throws IOException {
        return shutdown(Linux.SHUT_RD);
    }

    @Override
    public SocketChannel shutdownOutput() throws IOException {
        return shutdown(Linux.SHUT_WR);
    }

    private SocketChannel shutdown(int how) throws IOException {
        synchronized (io) {
            ensureConnected();
            if (how == Linux.SHUT_RD ? !inputShutdown : !outputShutdown) {
                socket.shutdown(how);
                inputShutdown |= how == Linux.SHUT_RD;
                outputShutdown |= how == Linux.SHUT_WR;
            }
        }
        return this;
    }

    @Override
    public Socket socket() {
        throw new UnsupportedOperationException(
                "SockmapChannel has no java.net.Socket adaptor: use the channel's own methods");
    }

    @Override
    public <T> SocketChannel setOption(SocketOption<T> name, T value) throws IOException {
        io.setOption(name, value);
        return this;
    }

    @Override
    public <T> T getOption(SocketOption<T> name) throws IOException {
        return io.getOption(name);
    }

    @Override
    public Set<SocketOption<?>> supportedOptions() {
        return io.supportedOptions();
    }

    /** Open and connected, or the exception that says which not. */
    private void ensureConnected() throws ClosedChannelException {
        io.ensureOpen();
        if (state != State.CONNECTED) {
            throw new NotYetConnectedException();
        }
    }

    /**
     * Reads into native or heap memory without an intermediate copy.
     *
     * @param dst where the bytes go, from its start
     * @return bytes read, 0 when non-blocking and nothing is there, -1 at end of stream
     * @throws IllegalArgumentException when {@code dst} is read-only
     * @throws java.nio.channels.NotYetConnectedException when the channel is not connected
     * @throws ClosedChannelException when the channel is closed
     */
    public long read(MemorySegment dst) throws IOException {
        return transfer.read(dst, Objects.requireNonNull(dst, "dst").isReadOnly(), isBlocking());
    }

    @Override
    public int read(ByteBuffer dst) throws IOException {
        int n = (int) transfer.read(MemorySegment.ofBuffer(dst), dst.isReadOnly(), isBlocking());
        if (n > 0) {
            dst.position(dst.position() + n);
        }
        return n;
    }

    @Override
    public long read(ByteBuffer[] dsts, int offset, int length) throws IOException {
        return transfer.read(dsts, offset, length, isBlocking());
    }

    /** Checks the channel can read and keeps its fd open until {@link #endIo}; false once input is shut down. */
    boolean enterRead() throws ClosedChannelException {
        synchronized (io) {
            ensureConnected();
            if (inputShutdown) {
                return false;
            }
            socket.enter();
            return true;
        }
    }

    /**
     * Writes native or heap memory without an intermediate copy. Blocking mode writes all of
     * it; non-blocking mode writes what the socket and the receiver's credit take now.
     *
     * @param src the bytes, from its start
     * @return bytes written, possibly 0 in non-blocking mode
     * @throws ClosedChannelException when the channel or its output is closed
     */
    public long write(MemorySegment src) throws IOException {
        return transfer.write(Objects.requireNonNull(src, "src"), isBlocking());
    }

    @Override
    public int write(ByteBuffer src) throws IOException {
        int n = (int) transfer.write(MemorySegment.ofBuffer(src), isBlocking());
        src.position(src.position() + n);
        return n;
    }

    @Override
    public long write(ByteBuffer[] srcs, int offset, int length) throws IOException {
        return transfer.write(srcs, offset, length, isBlocking());
    }

    /** Checks the channel can write and keeps its fd open until {@link #endIo}. */
    void enterWrite() throws IOException {
        synchronized (io) {
            ensureConnected();
            if (outputShutdown) {
                throw new ClosedChannelException();
            }
            socket.enter();
        }
    }

    @Override
    protected void implConfigureBlocking(boolean block) throws IOException {
        io.configureBlocking(block);
    }

    @Override
    protected void implCloseSelectableChannel() throws IOException {
        transfer.closed();
        io.closed(true); // the fd is closed by the last of: this, the last thread in I/O, the last selector
    }

    @Override
    public String toString() {
        synchronized (io) {
            return "SockmapChannel[" + (isOpen() ? state.name().toLowerCase(java.util.Locale.ROOT) : "closed")
                    + (remote != null ? " remote=" + remote : "") + "]";
        }
    }
}
