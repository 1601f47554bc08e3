package io.github.sockmap4j;

import io.github.sockmap4j.internal.ffi.Errno;
import io.github.sockmap4j.internal.ffi.LibC;
import io.github.sockmap4j.internal.ffi.NativeIOException;
import io.github.sockmap4j.internal.ffi.NativeLayouts;
import io.github.sockmap4j.internal.net.Sockets;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
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
import java.nio.channels.SelectionKey;
import java.nio.channels.SocketChannel;
import java.nio.channels.spi.SelectorProvider;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.locks.ReentrantLock;

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
    /**
     * Non-blocking reads in a row that found nothing (guarded by readLock). From
     * {@link #SPIN_READS} on, a read of a registered socket asks poll(2) first: recv(2) of a
     * socket in the SOCKHASH takes the socket's lock even when there is nothing to read, and a
     * reader spinning on it keeps the redirecting sender, which needs the same lock to queue its
     * message, waiting and then waking (docs/benchmarks.md, busy-polling). A selector's loop, which
     * reads until nothing is left and then waits, never gets there.
     */
    private int emptyReads;
    private static final int SPIN_READS = 2;
    private final ReentrantLock writeLock = new ReentrantLock();
    private final Object stateLock = new Object();
    private int fd;
    private State state;
    private boolean inputShutdown;
    private boolean outputShutdown;
    private boolean fdClosed;
    private int activeOps;
    private InetSocketAddress remote;
    /** Where this channel publishes its reads for the in-flight bound; null when it does not. */
    private ReadPublisher readSlot;
    /** This channel's write credit (docs/in-flight-bound.md); its state is guarded by the write lock. */
    private final ChannelCredit credits = new ChannelCredit(this);
    /** Scratch of gathering writes; guarded by the write lock. */
    private final Gathering gathering = new Gathering();
    /** Whether this end was accepted (its local side is the server, whose port has the policy). */
    private boolean serverSide;
    /** Whether the application fixed SO_RCVBUF (here or on the listening channel). */
    private volatile boolean rcvbufSet;

    SockmapChannel(SelectorProvider provider, Sockmap sockmap) throws IOException {
        super(provider);
        this.sockmap = Objects.requireNonNull(sockmap, "sockmap");
        this.fd = Sockets.newStreamSocket();
        this.state = State.UNCONNECTED;
        blockingFd(fd);
    }

    /** New channels are in blocking mode, so their fd is too. */
    private static void blockingFd(int fd) throws NativeIOException {
        try {
            LibC.setNonBlocking(fd, false);
        } catch (NativeIOException e) {
            LibC.close(fd);
            throw e;
        }
    }

    /** An accepted connection. */
    SockmapChannel(SelectorProvider provider, Sockmap sockmap, int fd, boolean rcvbufSet) throws IOException {
        super(provider);
        this.rcvbufSet = rcvbufSet;
        this.sockmap = sockmap;
        this.fd = fd;
        this.state = State.CONNECTED;
        blockingFd(fd);
        this.remote = Sockets.remoteAddress(fd);
        this.serverSide = true;
        claimReadSlot(true);
    }

    /** Called once connected, before any read: joins the in-flight bound as a receiver. */
    private void claimReadSlot(boolean serverSide) {
        try {
            readSlot = sockmap.claimReadSlot(fd, serverSide, rcvbufSet);
        } catch (IOException e) {
            org.slf4j.LoggerFactory.getLogger(SockmapChannel.class)
                    .warn("{} receives without an in-flight bound: {}", this, e.getMessage());
        }
        sockmap.recordConnection(fd, readSlot == null ? -1 : readSlot.bound());
    }

    /** A new channel over the process-wide {@link Sockmap#global()}. */
    public static SockmapChannel open() throws IOException {
        return Sockmap.global().openChannel();
    }

    /** Opens a channel and connects it (blocking). */
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

    /** The fast path this channel belongs to. */
    public Sockmap sockmap() {
        return sockmap;
    }

    /**
     * Whether this connection's sends go through the redirect now: both sockets are in the
     * SOCKHASH (looked up, not assumed) and this socket is not sending by TCP (as it does when
     * its peer was not registered yet, or has left too much unread: see {@link #inFlightBound()}).
     */
    public boolean isAccelerated() {
        synchronized (stateLock) {
            if (state != State.CONNECTED || fdClosed) {
                return false;
            }
            return sockmap.isAccelerated(fd);
        }
    }

    /**
     * The in-flight bound this channel sets as a receiver: how many bytes its peer may redirect
     * to it that it has not read; past that the peer sends by TCP, whose window blocks it.
     * -1 when it sets none (fast path off, the connection not registered, or bound disabled).
     */
    public int inFlightBound() {
        synchronized (stateLock) {
            return fdClosed ? -1 : sockmap.boundOf(readSlot);
        }
    }

    String flowState() {
        synchronized (stateLock) {
            return fdClosed ? "closed" : sockmap.flowState(fd);
        }
    }

    int fdVal() {
        return fd;
    }

    // -- connection --------------------------------------------------------------------------

    @Override
    public SocketChannel bind(SocketAddress local) throws IOException {
        synchronized (stateLock) {
            ensureOpen();
            if (state != State.UNCONNECTED) {
                throw new AlreadyConnectedException();
            }
            InetSocketAddress isa = local == null ? new InetSocketAddress(0) : NativeSocketSupport.checkAddress(local);
            try (Arena arena = Arena.ofConfined()) {
                LibC.bind(fd, Sockets.encode(arena, isa));
            }
        }
        return this;
    }

    @Override
    public boolean connect(SocketAddress addr) throws IOException {
        InetSocketAddress isa = NativeSocketSupport.checkAddress(addr);
        if (isa.getAddress().isAnyLocalAddress()) {
            isa = new InetSocketAddress(java.net.InetAddress.getLoopbackAddress(), isa.getPort());
        }
        synchronized (stateLock) {
            ensureOpen();
            if (state == State.CONNECTED) {
                throw new AlreadyConnectedException();
            }
            if (state == State.PENDING) {
                throw new ConnectionPendingException();
            }
            int r;
            // connect(2) always runs non-blocking, so that no thread waits in it holding the state lock.
            if (isBlocking()) {
                LibC.setNonBlocking(fd, true);
            }
            try (Arena arena = Arena.ofConfined()) {
                r = LibC.tryConnect(fd, Sockets.encode(arena, isa));
            }
            if (isBlocking() && r != -Errno.EINPROGRESS) {
                LibC.setNonBlocking(fd, false);
            }
            remote = isa;
            if (r == 0) {
                state = State.CONNECTED;
                claimReadSlot(false);
                return true;
            }
            if (-r != Errno.EINPROGRESS) {
                throw NativeSocketSupport.connectFailure(-r, isa);
            }
            state = State.PENDING;
            if (!isBlocking()) {
                return false;
            }
        }
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

    private boolean finishPending() throws IOException {
        synchronized (stateLock) {
            ensureOpen();
            int err = LibC.getsockoptInt(fd, LibC.SOL_SOCKET, LibC.SO_ERROR);
            if (isBlocking()) {
                LibC.setNonBlocking(fd, false);
            }
            if (err != 0) {
                throw NativeSocketSupport.connectFailure(err, remote);
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
        synchronized (stateLock) {
            ensureOpen();
            ensureConnected();
            if (!inputShutdown) {
                LibC.shutdown(fd, LibC.SHUT_RD);
                inputShutdown = true;
            }
        }
        return this;
    }

    @Override
    public SocketChannel shutdownOutput() throws IOException {
        synchronized (stateLock) {
            ensureOpen();
            ensureConnected();
            if (!outputShutdown) {
                LibC.shutdown(fd, LibC.SHUT_WR);
                outputShutdown = true;
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
            NativeSocketSupport.setOption(fd, NativeSocketSupport.STREAM_OPTIONS, name, value);
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
            return NativeSocketSupport.getOption(fd, NativeSocketSupport.STREAM_OPTIONS, name);
        }
    }

    @Override
    public Set<SocketOption<?>> supportedOptions() {
        return NativeSocketSupport.STREAM_OPTIONS;
    }

    private void ensureOpen() throws ClosedChannelException {
        if (!isOpen()) {
            throw new ClosedChannelException();
        }
    }

    private void ensureConnected() {
        if (state != State.CONNECTED) {
            throw new NotYetConnectedException();
        }
    }

    // -- reading -------------------------------------------------------------------------------

    /**
     * Reads into native or heap memory without an intermediate copy.
     *
     * @return bytes read, 0 when non-blocking and nothing is there, -1 at end of stream
     */
    public long read(MemorySegment dst) throws IOException {
        Objects.requireNonNull(dst, "dst");
        if (dst.isReadOnly()) {
            throw new IllegalArgumentException("read-only destination");
        }
        readLock.lock();
        try {
            return readLocked(dst, isBlocking());
        } finally {
            readLock.unlock();
        }
    }

    @Override
    public int read(ByteBuffer dst) throws IOException {
        Objects.requireNonNull(dst, "dst");
        if (dst.isReadOnly()) {
            throw new IllegalArgumentException("read-only buffer");
        }
        readLock.lock();
        try {
            int n = (int) readLocked(MemorySegment.ofBuffer(dst), isBlocking());
            if (n > 0) {
                dst.position(dst.position() + n);
            }
            return n;
        } finally {
            readLock.unlock();
        }
    }

    @Override
    public long read(ByteBuffer[] dsts, int offset, int length) throws IOException {
        Objects.checkFromIndexSize(offset, length, dsts.length);
        readLock.lock();
        try {
            long total = 0;
            boolean blocking = isBlocking();
            for (int i = offset; i < offset + length; i++) {
                ByteBuffer b = dsts[i];
                if (b.isReadOnly()) {
                    throw new IllegalArgumentException("read-only buffer");
                }
                if (!b.hasRemaining()) {
                    continue;
                }
                long n = readLocked(MemorySegment.ofBuffer(b), blocking && total == 0);
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
        } finally {
            readLock.unlock();
        }
    }

    private long readLocked(MemorySegment dst, boolean blocking) throws IOException {
        synchronized (stateLock) {
            ensureOpen();
            ensureConnected();
            if (inputShutdown) {
                return -1;
            }
            activeOps++; // the fd stays open until exitIo
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
            if (emptyReads >= SPIN_READS && readSlot != null && !Sockets.await(fd, LibC.POLLIN, 0)) {
                return 0; // still nothing, and the socket's lock was not taken to learn it
            }
            long n = LibC.tryRecv(fd, dst, 0);
            if (n >= 0) {
                emptyReads = 0;
                return n == 0 ? -1 : n;
            }
            if (-n == Errno.EAGAIN || -n == Errno.EINTR) {
                emptyReads++;
                return 0;
            }
            throw readFailure((int) -n);
        }
        // In blocking mode the fd is blocking: one recv(2) waits, and close() wakes it with shutdown(2).
        boolean completed = false;
        try {
            begin();
            while (true) {
                if (!isOpen()) {
                    return 0;
                }
                long n = LibC.tryRecv(fd, dst, 0);
                if (n >= 0) {
                    completed = true;
                    return n == 0 ? -1 : n;
                }
                if (-n == Errno.EAGAIN) {
                    Sockets.await(fd, LibC.POLLIN, -1); // heap memory, which never waits in recv
                } else if (-n != Errno.EINTR) {
                    throw readFailure((int) -n);
                }
            }
        } finally {
            end(completed && isOpen());
        }
    }

    private IOException readFailure(int errno) {
        if (!isOpen()) {
            return new AsynchronousCloseException();
        }
        return new NativeIOException("recv", errno);
    }

    // -- writing -------------------------------------------------------------------------------

    /**
     * Writes native or heap memory without an intermediate copy. Blocking mode writes all of
     * it; non-blocking mode writes what the socket takes now.
     */
    public long write(MemorySegment src) throws IOException {
        Objects.requireNonNull(src, "src");
        writeLock.lock();
        try {
            return writeLocked(src, isBlocking());
        } finally {
            writeLock.unlock();
        }
    }

    @Override
    public int write(ByteBuffer src) throws IOException {
        Objects.requireNonNull(src, "src");
        writeLock.lock();
        try {
            int n = (int) writeLocked(MemorySegment.ofBuffer(src), isBlocking());
            src.position(src.position() + n);
            return n;
        } finally {
            writeLock.unlock();
        }
    }

    @Override
    public long write(ByteBuffer[] srcs, int offset, int length) throws IOException {
        Objects.checkFromIndexSize(offset, length, srcs.length);
        writeLock.lock();
        try {
            long total = 0;
            boolean blocking = isBlocking();
            if (Gathering.gatherable(srcs, offset, length)) {
                return writeGathering(srcs, offset, length, blocking);
            }
            for (int i = offset; i < offset + length; i++) {
                ByteBuffer b = srcs[i];
                if (!b.hasRemaining()) {
                    continue;
                }
                int n = (int) writeLocked(MemorySegment.ofBuffer(b), blocking);
                b.position(b.position() + n);
                total += n;
                if (b.hasRemaining()) {
                    break;
                }
            }
            return total;
        } finally {
            writeLock.unlock();
        }
    }

    /** See {@link Gathering#GATHER_BYTES}. */
    static final long GATHER_BYTES = Gathering.GATHER_BYTES;

    /*
     * A gathering write is one sendmsg with an iovec per buffer (up to IOV_MAX and GATHER_BYTES,
     * then the next): one message for the kernel, so one verdict run and one redirected message
     * instead of one per buffer. Small writes batched this way are what makes the redirect keep up
     * with TCP, which coalesces small writes itself (docs/kernel.md, "Small messages"). Blocking
     * mode writes everything, as SocketChannel does.
     */
    private long writeGathering(ByteBuffer[] srcs, int offset, int length, boolean blocking) throws IOException {
        enterWrite();
        long total = 0;
        boolean completed = false;
        if (blocking) {
            begin();
        }
        try {
            int max = Math.min(length, LibC.IOV_MAX);
            MemorySegment scratch = gathering.scratch(max);
            MemorySegment msghdr = scratch.asSlice(0, LibC.MSGHDR_SIZE);
            MemorySegment iov = scratch.asSlice(LibC.MSGHDR_SIZE, LibC.IOVEC_SIZE * max);
            int first = offset;
            int end = offset + length;
            WriteCredit c = credits.get();
            while (true) {
                while (first < end && !srcs[first].hasRemaining()) {
                    first++;
                }
                if (first == end) {
                    break;
                }
                long limit = Long.MAX_VALUE;
                if (c != null) {
                    limit = credits.await(c, Gathering.remaining(srcs, first, end), blocking);
                    if (limit == 0) {
                        break;
                    }
                }
                int count = 0;
                long chunk = 0;
                for (int i = first; i < end && count < max && chunk < GATHER_BYTES && chunk < limit; i++) {
                    ByteBuffer b = srcs[i];
                    if (b.hasRemaining()) {
                        MemorySegment seg = MemorySegment.ofBuffer(b);
                        long len = Math.min(seg.byteSize(), limit - chunk);
                        iov.set(ValueLayout.ADDRESS, count * LibC.IOVEC_SIZE + NativeLayouts.IOVEC_BASE, seg);
                        iov.set(ValueLayout.JAVA_LONG, count * LibC.IOVEC_SIZE + NativeLayouts.IOVEC_LEN, len);
                        chunk += len;
                        count++;
                    }
                }
                if (blocking && !isOpen()) {
                    break;
                }
                long n = LibC.trySendmsg(fd, msghdr, iov, count, 0);
                if (n >= 0) {
                    total += n;
                    if (c != null) {
                        c.sent(n);
                    }
                    boolean whole = n == chunk;
                    for (int i = first; i < end && n > 0; i++) {
                        ByteBuffer b = srcs[i];
                        int step = (int) Math.min(n, b.remaining());
                        b.position(b.position() + step);
                        n -= step;
                    }
                    if (!blocking && !whole) {
                        break; // the socket took what it could
                    }
                } else if (!sendAgain(n, blocking, "sendmsg")) {
                    break;
                }
            }
            completed = true;
            return total;
        } finally {
            if (blocking) {
                end(completed && isOpen());
            }
            exitIo();
        }
    }

    /** For {@link ChannelCredit}: whether this channel is still open. */
    boolean stillOpen() {
        return isOpen();
    }

    /** For {@link ChannelCredit}: whether this end was accepted. */
    boolean serverSide() {
        return serverSide;
    }

    /** For the selector: whether a non-blocking writer held for credit may write again. */
    boolean creditReturned() {
        return credits.returned(writeLock);
    }

    boolean creditHeld() {
        return credits.held();
    }

    /** Checks the channel can write and keeps its fd open until {@link #exitIo()}. */
    private void enterWrite() throws IOException {
        synchronized (stateLock) {
            ensureOpen();
            ensureConnected();
            if (outputShutdown) {
                throw new ClosedChannelException();
            }
            activeOps++; // the fd stays open until exitIo
        }
    }

    /**
     * After a send that failed with {@code -n}: whether to send again (EINTR; EAGAIN in blocking
     * mode, once the socket is writable: heap memory goes with MSG_DONTWAIT, which never waits in
     * the kernel) or to return what was written (EAGAIN, non-blocking).
     */
    private boolean sendAgain(long n, boolean blocking, String call) throws IOException {
        if (-n == Errno.EAGAIN) {
            if (blocking) {
                Sockets.await(fd, LibC.POLLOUT, -1);
            }
            return blocking;
        }
        if (-n == Errno.EINTR) {
            return true;
        }
        if (!isOpen()) {
            throw new AsynchronousCloseException();
        }
        throw new NativeIOException(call, (int) -n);
    }

    private long writeLocked(MemorySegment src, boolean blocking) throws IOException {
        enterWrite();
        try {
            return writeIo(src, blocking);
        } finally {
            exitIo();
        }
    }

    private long writeIo(MemorySegment src, boolean blocking) throws IOException {
        long size = src.byteSize();
        long written = 0;
        boolean completed = false;
        if (blocking) {
            begin();
        }
        try {
            WriteCredit c = credits.get();
            while (written < size) {
                if (blocking && !isOpen()) {
                    return written;
                }
                long chunk = size - written;
                if (c != null) {
                    long allowed = credits.await(c, chunk, blocking);
                    if (allowed == 0) {
                        break;
                    }
                    chunk = Math.min(chunk, allowed);
                }
                long n = LibC.trySend(fd, written == 0 && chunk == size ? src : src.asSlice(written, chunk), 0);
                if (n >= 0) {
                    written += n;
                    if (c != null) {
                        c.sent(n);
                    }
                } else if (!sendAgain(n, blocking, "send")) {
                    break;
                }
            }
            completed = true;
            return written;
        } finally {
            if (blocking) {
                end(completed && isOpen());
            }
        }
    }

    // -- selection and closing ------------------------------------------------------------------

    /** Ready ops for the epoll events reported on this channel. */
    int translateReadyOps(int events, int interest) {
        int ready = 0;
        if ((events & (LibC.EPOLLERR | LibC.EPOLLHUP)) != 0) {
            ready = interest;
        }
        if ((events & LibC.EPOLLIN) != 0) {
            ready |= interest & SelectionKey.OP_READ;
        }
        if ((events & LibC.EPOLLOUT) != 0) {
            ready |= interest & (SelectionKey.OP_WRITE | SelectionKey.OP_CONNECT);
        }
        synchronized (stateLock) {
            if (state != State.PENDING) {
                ready &= ~SelectionKey.OP_CONNECT;
            }
            if (state != State.CONNECTED) {
                ready &= ~(SelectionKey.OP_READ | SelectionKey.OP_WRITE);
            }
        }
        return ready;
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
        credits.closed();
        synchronized (stateLock) {
            if (!fdClosed) {
                try {
                    // Wakes a reader or writer waiting in poll(2) on this fd.
                    LibC.shutdown(fd, LibC.SHUT_RDWR);
                } catch (NativeIOException ignored) {
                    // Not connected: nobody can be waiting.
                }
            }
            // The fd is closed by the last of: this, the last thread in I/O, the last selector.
            maybeCloseFd();
        }
    }

    /** Marks the start of an operation that uses the fd; the fd stays open until {@link #exitIo}. */
    private void enterIo() throws ClosedChannelException {
        synchronized (stateLock) {
            ensureOpen();
            activeOps++;
        }
    }

    private void exitIo() {
        synchronized (stateLock) {
            activeOps--;
            maybeCloseFd();
        }
    }

    private void maybeCloseFd() {
        if (!isOpen() && activeOps == 0 && !isRegistered()) {
            closeFd();
        }
    }

    /** Called by a selector once it dropped its last key of this channel. */
    void kill() {
        synchronized (stateLock) {
            maybeCloseFd();
        }
    }

    private void closeFd() {
        if (!fdClosed) {
            fdClosed = true;
            if (readSlot != null) {
                sockmap.releaseReadSlot(readSlot);
                readSlot = null;
            }
            LibC.close(fd);
            fd = -1;
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
