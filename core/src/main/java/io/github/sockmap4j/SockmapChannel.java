package io.github.sockmap4j;

import io.github.sockmap4j.internal.ffi.Errno;
import io.github.sockmap4j.internal.ffi.LibC;
import io.github.sockmap4j.internal.flow.FastPath;
import io.github.sockmap4j.internal.flow.PeerCredit;
import io.github.sockmap4j.internal.flow.ReadPublisher;
import io.github.sockmap4j.internal.flow.SocketWriter;
import io.github.sockmap4j.internal.jfr.ConnectionEvent;
import io.github.sockmap4j.internal.net.Buffers;
import io.github.sockmap4j.internal.net.NativeFd;
import io.github.sockmap4j.internal.net.SocketOptions;
import io.github.sockmap4j.internal.net.SocketReader;
import io.github.sockmap4j.internal.net.Sockets;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketAddress;
import java.net.SocketOption;
import java.nio.ByteBuffer;
import java.nio.channels.AlreadyConnectedException;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.ConnectionPendingException;
import java.nio.channels.NoConnectionPendingException;
import java.nio.channels.NotYetConnectedException;
import java.nio.channels.SocketChannel;
import java.nio.channels.spi.SelectorProvider;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BooleanSupplier;

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
    private final ReentrantLock readLock = new ReentrantLock();
    private final SocketReader reader = new SocketReader(); // recv(2); guarded by readLock
    private final ReentrantLock writeLock = new ReentrantLock();
    private final Object stateLock = new Object();
    private final int fd;
    /** The fd, closed by the last of: close(), the last thread in I/O, the last selector. */
    private final NativeFd nativeFd;
    private State state;
    private boolean inputShutdown;
    private boolean outputShutdown;
    private InetSocketAddress remote;
    /** Where this channel publishes its reads for the in-flight bound; null when it does not. */
    private ReadPublisher readSlot;
    /** Single and gathering sends within the receiver's credit; guarded by the write lock. */
    private final SocketWriter writer = new SocketWriter();
    private final BooleanSupplier open = this::isOpen; // made once: no allocation per read or write
    /** Whether this end was accepted (its local side is the server, whose port has the policy). */
    private boolean serverSide;
    /** Whether the application fixed SO_RCVBUF (here or on the listening channel). */
    private volatile boolean rcvbufSet;

    SockmapChannel(SelectorProvider provider, Sockmap sockmap) throws IOException {
        this(provider, sockmap, Sockets.newStreamSocket(), false, false);
    }

    /** A new socket, or (accepted) a connected one; in blocking mode either way, as new channels are. */
    SockmapChannel(SelectorProvider provider, Sockmap sockmap, int fd, boolean accepted, boolean rcvbufSet)
            throws IOException {
        super(provider);
        this.sockmap = Objects.requireNonNull(sockmap, "sockmap");
        this.fd = fd;
        this.nativeFd = new NativeFd(fd, this::releaseReadSlot);
        this.rcvbufSet = rcvbufSet;
        this.serverSide = accepted;
        this.state = accepted ? State.CONNECTED : State.UNCONNECTED;
        Sockets.blockingOrClose(fd);
        if (accepted) {
            this.remote = Sockets.remoteAddress(fd);
            claimReadSlot(true);
        }
    }

    /** Called once connected, before any read: joins the in-flight bound as a receiver. */
    private void claimReadSlot(boolean serverSide) {
        FastPath fp = sockmap.fastPath();
        try {
            readSlot = fp == null ? null : fp.claimReadSlot(fd, serverSide, rcvbufSet);
        } catch (IOException e) {
            org.slf4j.LoggerFactory.getLogger(SockmapChannel.class)
                    .warn("{} receives without an in-flight bound: {}", this, e.getMessage());
        }
        ConnectionEvent.record(fp, fd, readSlot == null ? -1 : readSlot.bound());
    }

    private void releaseReadSlot() {
        ReadPublisher p = readSlot;
        if (p != null) {
            readSlot = null;
            p.close();
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
        synchronized (stateLock) {
            FastPath fp = sockmap.fastPath();
            return state == State.CONNECTED && !nativeFd.isClosed() && fp != null && fp.isAccelerated(fd);
        }
    }

    /**
     * The in-flight bound this channel sets as a receiver: how many bytes its peer may redirect
     * to it that it has not read; past that the peer sends by TCP, whose window blocks it.
     *
     * @return bytes; -1 when it sets none (fast path off, the connection not registered, or bound off)
     */
    public int inFlightBound() {
        synchronized (stateLock) {
            ReadPublisher p = readSlot;
            return p == null || nativeFd.isClosed() || sockmap.fastPath() == null ? -1 : p.bound();
        }
    }

    /** This socket's side of the bound, for the tests' diagnostics. */
    String flowState() {
        FastPath fp = sockmap.fastPath();
        return nativeFd.isClosed() ? "closed" : fp == null ? "off" : fp.flowState(fd);
    }

    /** What a selector uses of this channel: its ready ops follow its state. */
    Selectable selectable() {
        return new Selectable(fd, (events, interest) -> {
            synchronized (stateLock) {
                return Selectable.streamReadyOps(events, interest, state == State.PENDING, state == State.CONNECTED);
            }
        }, this::kill, writer::held, () -> writer.returned(writeLock));
    }

    @Override
    public SocketChannel bind(SocketAddress local) throws IOException {
        synchronized (stateLock) {
            ensureOpen();
            if (state != State.UNCONNECTED) {
                throw new AlreadyConnectedException();
            }
            Sockets.bind(fd, local == null ? new InetSocketAddress(0) : SocketOptions.checkAddress(local));
        }
        return this;
    }

    @Override
    public boolean connect(SocketAddress addr) throws IOException {
        InetSocketAddress isa = SocketOptions.connectTarget(addr);
        synchronized (stateLock) {
            ensureOpen();
            if (state == State.CONNECTED) {
                throw new AlreadyConnectedException();
            }
            if (state == State.PENDING) {
                throw new ConnectionPendingException();
            }
            // connect(2) always runs non-blocking, so that no thread waits in it holding the state lock.
            int r = Sockets.connectNow(fd, isa, isBlocking());
            remote = isa;
            if (r == 0) {
                state = State.CONNECTED;
                claimReadSlot(false);
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
        boolean done = false;
        enterIo();
        try {
            begin();
            if (isOpen()) {
                Sockets.await(fd, LibC.POLLOUT, -1);
            }
            done = finishPending();
            return done;
        } finally {
            try {
                end(done && isOpen());
            } finally {
                exitIo();
            }
        }
    }

    @Override
    public boolean finishConnect() throws IOException {
        synchronized (stateLock) {
            ensureOpen();
            if (state == State.CONNECTED) {
                return true;
            }
            if (state != State.PENDING) {
                throw new NoConnectionPendingException();
            }
        }
        if (!isBlocking()) {
            if (!Sockets.await(fd, LibC.POLLOUT, 0)) {
                return false;
            }
            return finishPending();
        }
        return awaitConnected();
    }

    private boolean finishPending() throws IOException {
        synchronized (stateLock) {
            ensureOpen();
            int err = Sockets.connectResult(fd, isBlocking());
            if (err != 0) {
                throw SocketOptions.connectFailure(err, remote);
            }
            state = State.CONNECTED;
            claimReadSlot(false);
            return true;
        }
    }

    @Override
    public boolean isConnected() {
        synchronized (stateLock) {
            return state == State.CONNECTED && isOpen();
        }
    }

    @Override
    public boolean isConnectionPending() {
        synchronized (stateLock) {
            return state == State.PENDING && isOpen();
        }
    }

    @Override
    public SocketAddress getLocalAddress() throws IOException {
        synchronized (stateLock) {
            ensureOpen();
            InetSocketAddress a = Sockets.localAddress(fd);
            return a.getPort() == 0 && state == State.UNCONNECTED ? null : a;
        }
    }

    @Override
    public SocketAddress getRemoteAddress() throws IOException {
        synchronized (stateLock) {
            ensureOpen();
            return state == State.CONNECTED ? remote : null;
        }
    }

    @Override
    public SocketChannel shutdownInput() throws IOException {
        return shutdown(LibC.SHUT_RD);
    }

    @Override
    public SocketChannel shutdownOutput() throws IOException {
        return shutdown(LibC.SHUT_WR);
    }

    private SocketChannel shutdown(int how) throws IOException {
        synchronized (stateLock) {
            ensureConnected();
            if (how == LibC.SHUT_RD ? !inputShutdown : !outputShutdown) {
                LibC.shutdown(fd, how);
                inputShutdown |= how == LibC.SHUT_RD;
                outputShutdown |= how == LibC.SHUT_WR;
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
        synchronized (stateLock) {
            ensureOpen();
            SocketOptions.setOption(fd, SocketOptions.STREAM_OPTIONS, name, value);
            if (name == java.net.StandardSocketOptions.SO_RCVBUF) {
                rcvbufSet = true;
            }
        }
        return this;
    }

    @Override
    public <T> T getOption(SocketOption<T> name) throws IOException {
        synchronized (stateLock) {
            ensureOpen();
            return SocketOptions.getOption(fd, SocketOptions.STREAM_OPTIONS, name);
        }
    }

    @Override
    public Set<SocketOption<?>> supportedOptions() {
        return SocketOptions.STREAM_OPTIONS;
    }

    private void ensureOpen() throws ClosedChannelException {
        if (!isOpen()) {
            throw new ClosedChannelException();
        }
    }

    /** Open and connected, or the exception that says which not. */
    private void ensureConnected() throws ClosedChannelException {
        ensureOpen();
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
        return read(dst, Objects.requireNonNull(dst, "dst").isReadOnly(), isBlocking());
    }

    @Override
    public int read(ByteBuffer dst) throws IOException {
        int n = (int) read(MemorySegment.ofBuffer(dst), dst.isReadOnly(), isBlocking());
        if (n > 0) {
            dst.position(dst.position() + n);
        }
        return n;
    }

    @Override
    public long read(ByteBuffer[] dsts, int offset, int length) throws IOException {
        Objects.checkFromIndexSize(offset, length, dsts.length);
        readLock.lock();
        try {
            return Buffers.scatter(dsts, offset, length, isBlocking(), this::readLocked);
        } finally {
            readLock.unlock();
        }
    }

    private long read(MemorySegment dst, boolean readOnly, boolean blocking) throws IOException {
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

    private long readLocked(MemorySegment dst, boolean blocking) throws IOException {
        synchronized (stateLock) {
            ensureConnected();
            if (inputShutdown) {
                return -1;
            }
            nativeFd.enter(); // the fd stays open until exitIo
        }
        try {
            long n = readIo(dst, blocking);
            if (n > 0 && readSlot != null) {
                readSlot.onRead((int) n);
            }
            return n;
        } finally {
            exitIo();
        }
    }

    private long readIo(MemorySegment dst, boolean blocking) throws IOException {
        if (dst.byteSize() == 0) {
            return 0;
        }
        if (!blocking) {
            return reader.readNow(fd, dst, readSlot != null, open);
        }
        boolean completed = false;
        try {
            begin();
            long n = reader.readWaiting(fd, dst, open);
            completed = n != 0; // 0: woken by close(), the operation did not complete
            return n;
        } finally {
            end(completed && isOpen());
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
        return write(Objects.requireNonNull(src, "src"), isBlocking());
    }

    @Override
    public int write(ByteBuffer src) throws IOException {
        int n = (int) write(MemorySegment.ofBuffer(src), isBlocking());
        src.position(src.position() + n);
        return n;
    }

    private long write(MemorySegment src, boolean blocking) throws IOException {
        writeLock.lock();
        try {
            return writeLocked(src, blocking);
        } finally {
            writeLock.unlock();
        }
    }

    @Override
    public long write(ByteBuffer[] srcs, int offset, int length) throws IOException {
        Objects.checkFromIndexSize(offset, length, srcs.length);
        writeLock.lock();
        try {
            boolean blocking = isBlocking();
            if (SocketWriter.gatherable(srcs, offset, length)) {
                return send(null, srcs, offset, length, blocking);
            }
            return Buffers.spread(srcs, offset, length, blocking, this::writeLocked);
        } finally {
            writeLock.unlock();
        }
    }

    /** The connection's write credit, resolved at the first write; null for none. */
    private PeerCredit credit() {
        return writer.credit(sockmap, fd, serverSide, this);
    }

    /** Checks the channel can write and keeps its fd open until {@link #exitIo()}. */
    private void enterWrite() throws IOException {
        synchronized (stateLock) {
            ensureConnected();
            if (outputShutdown) {
                throw new ClosedChannelException();
            }
            nativeFd.enter(); // the fd stays open until exitIo
        }
    }

    private long writeLocked(MemorySegment src, boolean blocking) throws IOException {
        return send(src, null, 0, 0, blocking);
    }

    /** One send of {@code src}, or a gathering one of {@code srcs} when it is not null. */
    private long send(MemorySegment src, ByteBuffer[] srcs, int offset, int length, boolean blocking)
            throws IOException {
        enterWrite();
        boolean completed = !blocking;
        try {
            if (blocking) {
                begin();
            }
            long n = srcs == null ? writer.write(fd, src, blocking, open, credit())
                    : writer.gather(fd, srcs, offset, length, blocking, open, credit());
            completed = true;
            return n;
        } finally {
            try {
                if (blocking) {
                    end(completed && isOpen()); // throws when closed or interrupted meanwhile
                }
            } finally {
                exitIo();
            }
        }
    }

    @Override
    protected void implConfigureBlocking(boolean block) throws IOException {
        synchronized (stateLock) {
            ensureOpen();
            LibC.setNonBlocking(fd, !block);
        }
    }

    @Override
    protected void implCloseSelectableChannel() throws IOException {
        writer.closed();
        synchronized (stateLock) {
            if (!nativeFd.isClosed()) {
                Sockets.wakeWaiters(fd); // a reader or writer waiting in recv(2) or poll(2)
            }
        }
        kill(); // the fd is closed by the last of: this, the last thread in I/O, the last selector
    }

    /** Marks the start of an operation that uses the fd; the fd stays open until {@link #exitIo}. */
    private void enterIo() throws ClosedChannelException {
        synchronized (stateLock) {
            ensureOpen();
            nativeFd.enter();
        }
    }

    private void exitIo() {
        synchronized (stateLock) {
            nativeFd.exit();
            nativeFd.closeIfUnused(!isOpen() && !isRegistered());
        }
    }

    /** Called by a selector once it dropped its last key of this channel. */
    void kill() {
        synchronized (stateLock) {
            nativeFd.closeIfUnused(!isOpen() && !isRegistered());
        }
    }

    @Override
    public String toString() {
        synchronized (stateLock) {
            return "SockmapChannel[" + (isOpen() ? state.name().toLowerCase(java.util.Locale.ROOT) : "closed")
                    + (remote != null ? " remote=" + remote : "") + "]";
        }
    }
}
