package io.github.sockmap4j.colocated.grpc;

import io.github.sockmap4j.colocated.MessageRing;
import io.github.sockmap4j.colocated.RingCorruptException;
import io.github.sockmap4j.colocated.SharedRegion;
import io.grpc.Status;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * One co-located connection: a region's two rings, the thread that reads the inbound one and
 * hands each frame to {@link #handler}, and the writes onto the outbound one.
 *
 * <p>Writes come from any thread, one at a time under a lock; a writer that finds the ring full
 * waits for room. The reading thread never waits to write (it would stop draining, and a peer in
 * the same state would never make room): what it cannot write at once waits in order, and whoever
 * writes next, or the reader between reads, sends it first.
 *
 * <p>The reader sleeps on the ring's futex as soon as the ring is empty (or polls first for
 * {@link #SPIN_NANOS}, where set), and the writer wakes it once.
 *
 * <p>Whoever reads holds the read role ({@link #readRole}): the reader's thread while it reads (not
 * while it sleeps), or a caller that waits for its own stream's frames and reads them itself
 * ({@link #readOwn}), for as long as only that stream's frames come. Code that asks whether it runs
 * "on the reader" asks whether it holds the role.
 *
 * <p>Given a {@link ReadLoop} and a ring with a bell, there is no reader thread: the loop reads a
 * pass at a time when the bell rings ({@link LoopReader}). A write from the loop's thread then
 * never waits (the loop is what reads the peer's answers): what does not fit waits in order, and
 * the loop comes back for it within a millisecond.
 */
final class ColocatedConnection {
    private static final Logger log = Logger.getLogger(ColocatedConnection.class.getName());
    /**
     * How long the reader polls after its last frame before it sleeps ({@code
     * -Dsockmap4j.colocated.spinMicros}, default 0). Measured with gRPC's default executors
     * (docs/colocated.md): polling 5 or 50 µs cost CPU a call and gained no latency, as each call
     * already hands off to an executor thread that sleeps.
     */
    static final long SPIN_NANOS = TimeUnit.MICROSECONDS.toNanos(Long.getLong("sockmap4j.colocated.spinMicros", 0));
    /**
     * The longest a reader sleeps. A close by either end wakes it at once, and an end that dies is
     * seen through the TCP lifeline, so this only bounds a wake a misbehaving peer never sent. An
     * idle connection's reader wakes this often: 5 s was measured at about 0.04% of a CPU for 20
     * idle readers (each wake about 100 µs, with cold code), 60 s is a twelfth of that.
     */
    private static final long READER_SLEEP_NANOS = TimeUnit.SECONDS.toNanos(60);
    /** How long a writer waiting for room sleeps before it looks whether the connection closed. */
    private static final long SLEEP_NANOS = TimeUnit.MILLISECONDS.toNanos(200);
    private static final long WRITE_TIMEOUT_NANOS = TimeUnit.SECONDS.toNanos(30);
    /** Frames the reader takes a poll. */
    private static final int POLL_FRAMES = 64;
    /** Full polls after which the reader runs {@link #afterReads} tasks even though the ring is not drained. */
    private static final int AFTER_READS_POLLS = 16;

    /** What a connection's owner (a client or server transport) does with frames and the end. */
    interface Handler {
        void onFrame(int kind, Frames.Reader frame) throws Exception;

        /** The connection ended: {@code status} says why (OK for a close asked for here). */
        void onClosed(Status status);
    }

    private final SharedRegion region;
    private final String name;
    private final MessageRing.Writer out;
    private final MessageRing.Reader in;
    private final int maxFrame;
    private final ReentrantLock writeLock = new ReentrantLock();
    /**
     * Held by whoever reads the inbound ring now (one at a time): the reader's thread between its
     * sleeps, or a borrower ({@link #readOwn}). The unmapping takes it too, so that a borrower
     * never reads an unmapped ring. Taken before {@link #writeLock}, never after it.
     */
    private final ReentrantLock readRole = new ReentrantLock();
    /** Frames a borrower read that were not its stream's, for the reader's thread to dispatch first, in order. */
    private final ConcurrentLinkedQueue<Pending> handoff = new ConcurrentLinkedQueue<>();
    /** Calls whose end their waiting caller read itself ({@link #readOwn}), in this process: for tests and benches. */
    private static final java.util.concurrent.atomic.LongAdder CALLER_READS = new java.util.concurrent.atomic.LongAdder();
    /** The reader's full polls in a row (under the read role). */
    private int fullPolls;
    private final ConcurrentLinkedQueue<Pending> pending = new ConcurrentLinkedQueue<>();
    private volatile Handler handler;
    private volatile Thread reader;
    /** The loop that reads, where one was given and the ring has a bell; null: a thread of its own. */
    private final LoopReader onLoop;
    /** Whether a reader (the thread or the loop) was started. */
    private volatile boolean started;
    private final MessageRing.OwnedHandler dispatch = (kind, m) -> {
        if (this.closed == null) {
            this.handler.onFrame(kind, new Frames.Reader(m));
        }
    };
    private volatile Status closed;
    private final java.util.concurrent.atomic.AtomicBoolean unmapped = new java.util.concurrent.atomic.AtomicBoolean();
    /** Whether the handler was told of the end. */
    private final java.util.concurrent.atomic.AtomicBoolean told = new java.util.concurrent.atomic.AtomicBoolean();

    private final java.util.List<Runnable> whenClosed = new java.util.concurrent.CopyOnWriteArrayList<>();
    /** Tasks the reader runs once it has dispatched what the ring held when they came ({@link #afterReads}). */
    private final ConcurrentLinkedQueue<Runnable> afterReads = new ConcurrentLinkedQueue<>();

    private record Pending(int kind, byte[] bytes) {
    }

    /** A frame's stream id, as {@link Frames} writes it (little-endian), from its array. */
    private static final java.lang.invoke.VarHandle FRAME_INT =
            java.lang.invoke.MethodHandles.byteArrayViewVarHandle(int[].class, java.nio.ByteOrder.LITTLE_ENDIAN);

    ColocatedConnection(SharedRegion region, String name) {
        this(region, name, null);
    }

    /** As {@link #ColocatedConnection(SharedRegion, String)}, read on {@code loop} where the ring has a bell. */
    ColocatedConnection(SharedRegion region, String name, ReadLoop loop) {
        this.region = region;
        this.name = name;
        this.out = region.outbound().writer();
        this.in = region.inbound().reader();
        this.maxFrame = region.outbound().maxMessage();
        this.onLoop = loop != null && region.inbound().bell() >= 0 ? new LoopReader(this, loop) : null;
    }

    private ColocatedConnection(String name, Status ended) {
        this.region = null;
        this.name = name;
        this.out = null;
        this.in = null;
        this.maxFrame = 0;
        this.closed = ended;
        this.onLoop = null;
    }

    /** A connection that ended before it began: a transport over it fails every call with {@code status}. */
    static ColocatedConnection ended(String name, Status status) {
        return new ColocatedConnection(name, status);
    }

    /** Why the connection ended; null while open. */
    Status closedStatus() {
        return closed;
    }

    /** The largest frame this connection writes; a larger message goes in several. */
    int maxFrame() {
        return maxFrame;
    }

    String name() {
        return name;
    }

    /** Starts reading with {@code h}; frames before this wait in the ring. Not on an ended connection. */
    void start(Handler h) {
        if (region == null) {
            throw new IllegalStateException("an ended connection has nothing to read");
        }
        this.handler = h;
        if (onLoop != null) {
            onLoop.asking(); // before the look at closed: a close from here leaves the unmapping to the loop's answer
        }
        Status ended = closed;
        if (ended != null) {
            // closed before it started (a server shut down as the connection was attached): the close told
            // no handler, and a transport never told would keep its server from terminating
            tellClosed(ended);
            if (onLoop != null) {
                unmap();
            }
            return;
        }
        started = true;
        if (onLoop != null) {
            onLoop.start(region.inbound().bell());
            return;
        }
        startThread();
    }

    private void startThread() {
        Thread t = Thread.ofPlatform().daemon().name("sockmap4j-colocated-" + name).unstarted(this::readLoop);
        reader = t;
        t.start();
    }

    /** The loop could not watch the bell: a thread reads, or, closed meanwhile, nothing does and this unmaps. */
    void unwatched() {
        synchronized (this) {
            if (closed == null) {
                startThread();
                return;
            }
        }
        unmap();
    }

    /** The loop that read this connection ended (shut down, or refused a pass). */
    void loopEnded() {
        close(Status.UNAVAILABLE.withDescription("co-located connection " + name + ": the event loop that read it ended"));
    }

    /** After a loop's pass found the connection ended: the unmapping, the read role given back. */
    void endedOnLoop() {
        unmap();
    }

    boolean tryReadRole() {
        return readRole.tryLock();
    }

    void giveReadRole() {
        readRole.unlock();
    }

    /**
     * A loop's pass, under the read role: as the reader thread's loop, at most {@code polls}
     * polls and no sleep; at its end it says the reader waits for the bell and looks once more.
     */
    LoopReader.After readPass(int polls) {
        if (unmapped.get()) {
            return LoopReader.After.IDLE;
        }
        if (closed != null) {
            return LoopReader.After.ENDED;
        }
        in.awake();
        try {
            for (int i = 0; i < polls && closed == null; i++) {
                if (region.peerClosed()) {
                    close(Status.UNAVAILABLE.withDescription("the other end closed co-located connection " + name));
                    break;
                }
                if (readOnce(dispatch) < POLL_FRAMES && !in.hasMessages()) {
                    break;
                }
            }
        } catch (RingCorruptException | Frames.ProtocolException e) {
            close(Status.UNAVAILABLE.withDescription("co-located connection " + name + " closed: the peer broke "
                    + "the protocol: " + e.getMessage()));
        } catch (Throwable t) {
            log.log(Level.WARNING, "co-located connection " + name + " failed", t);
            close(Status.UNAVAILABLE.withDescription("co-located connection " + name + " failed: " + t).withCause(t));
        }
        if (closed != null) {
            return LoopReader.After.ENDED;
        }
        in.sleepOnBell();
        if (in.hasMessages() || !afterReads.isEmpty() || !handoff.isEmpty() || region.peerClosed()) {
            in.awake();
            return LoopReader.After.AGAIN;
        }
        return pending.isEmpty() ? LoopReader.After.IDLE : LoopReader.After.WRITES_WAIT;
    }

    /** Whether the calling thread is the loop that reads this connection (there, a write never waits). */
    private boolean onReadingLoop() {
        return onLoop != null && onLoop.inLoop();
    }

    /** Tells the handler of the end, once, whichever of {@link #close} and {@link #start} sees both first. */
    private void tellClosed(Status status) {
        Handler h = handler;
        if (h != null && told.compareAndSet(false, true)) {
            h.onClosed(status);
        }
    }

    boolean isClosed() {
        return closed != null;
    }

    /**
     * Runs {@code r} on the reader once it has dispatched the frames the ring holds now (at once
     * where the connection has ended, or has no reader): as an HTTP/2 transport's event loop runs a
     * command after what it has read, so that a stream's end already sent by the peer is taken
     * before, say, a cancel the stream's own callbacks asked for. From another thread it wakes
     * the reader.
     */
    void afterReads(Runnable r) {
        if (closed != null || !started) {
            r.run();
            return;
        }
        afterReads.add(r);
        if (!isReading()) {
            whileMapped(in::interrupt);
        }
        if (closed != null && afterReads.remove(r)) {
            r.run(); // the connection ended meanwhile, and its reader with it
        }
    }

    private void runAfterReads() {
        Runnable r;
        while ((r = afterReads.poll()) != null) {
            r.run();
        }
    }

    /** Runs {@code r} once the connection has ended (at once if it has), after its handler was told. */
    void whenClosed(Runnable r) {
        whenClosed.add(r);
        if (closed != null && whenClosed.remove(r)) {
            r.run();
        }
    }

    /** Whether the calling thread reads the ring now: the reader's thread between sleeps, or a borrower. */
    private boolean isReading() {
        return readRole.isHeldByCurrentThread();
    }

    private void readLoop() {
        try {
            long idleSince = System.nanoTime();
            while (true) {
                int n;
                readRole.lock(); // a borrower reads meanwhile: it gives the role back once it stops
                try {
                    if (closed != null) {
                        return;
                    }
                    if (region.peerClosed()) {
                        close(Status.UNAVAILABLE.withDescription("the other end closed co-located connection " + name));
                        return;
                    }
                    n = readOnce(dispatch);
                } finally {
                    readRole.unlock();
                }
                if (n > 0) {
                    idleSince = System.nanoTime();
                    continue;
                }
                if (System.nanoTime() - idleSince < SPIN_NANOS) {
                    Thread.onSpinWait();
                    continue;
                }
                in.awaitMessages(pending.isEmpty() ? READER_SLEEP_NANOS : TimeUnit.MILLISECONDS.toNanos(1),
                        () -> closed != null || region.peerClosed() || !afterReads.isEmpty() || !handoff.isEmpty());
            }
        } catch (RingCorruptException | Frames.ProtocolException e) {
            close(Status.UNAVAILABLE.withDescription("co-located connection " + name + " closed: the peer broke "
                    + "the protocol: " + e.getMessage()));
        } catch (Throwable t) {
            log.log(Level.WARNING, "co-located connection " + name + " failed", t);
            close(Status.UNAVAILABLE.withDescription("co-located connection " + name + " failed: " + t).withCause(t));
        } finally {
            unmap(); // a close on this thread (a frame that ended the connection) leaves the unmapping here
        }
    }

    /**
     * Under the read role: the frames a borrower handed over, the writes that waited, then up to
     * {@link #POLL_FRAMES} frames from the ring; the {@link #afterReads} tasks once the ring is
     * drained (or after a bounded run of full polls), so that a stream's end that follows the
     * frames that asked for a task, in a later poll, is taken first. How many frames it dispatched.
     */
    private int readOnce(MessageRing.OwnedHandler dispatch) throws Exception {
        int n = 0;
        Pending h;
        while ((h = handoff.poll()) != null) {
            if (closed == null) {
                handler.onFrame(h.kind(), new Frames.Reader(h.bytes()));
            }
            n++;
        }
        flushPending();
        int polled = in.pollOwned(dispatch, POLL_FRAMES);
        if (polled < POLL_FRAMES || ++fullPolls >= AFTER_READS_POLLS) {
            fullPolls = 0;
            runAfterReads();
        }
        return n + polled;
    }

    /**
     * Reads the ring on the calling thread, for up to {@code maxNanos}, while only stream {@code
     * streamId}'s frames come and until {@code ended} holds: a caller that would otherwise sleep
     * until the reader's thread hands it its reply (a blocking unary call) reads the reply itself,
     * one thread woken instead of two. It stops at once where another stream's frame comes (left
     * for the reader's thread, which it wakes: nobody else's callbacks run on this thread), where
     * a task waits for {@link #afterReads}, where the calling thread is interrupted, and where the
     * connection ends; then it gives the ring back, waking the reader's thread for what it left.
     *
     * @return false where it did not read: the reader's thread is reading, or this thread reads
     * already, or the connection ended
     */
    boolean readOwn(int streamId, java.util.function.BooleanSupplier ended, long maxNanos) {
        if (closed != null || !started || isReading() || onReadingLoop() || Thread.currentThread().isInterrupted()
                || !readRole.tryLock()) {
            return false;
        }
        Status failure;
        boolean wakeReader;
        try {
            if (closed != null || unmapped.get()) {
                return false;
            }
            in.borrow();
            try {
                failure = borrow(streamId, ended, maxNanos);
                if (failure == null && ended.getAsBoolean()) {
                    CALLER_READS.increment();
                }
            } finally {
                in.giveBack(); // then looked at: what the writer published while it saw us awake woke nobody
            }
            wakeReader = in.hasMessages() || !handoff.isEmpty() || !afterReads.isEmpty() || !pending.isEmpty()
                    || region.peerClosed();
        } finally {
            readRole.unlock();
        }
        if (onLoop != null) {
            onLoop.afterBorrow();
        }
        if (failure != null) {
            close(failure);
        } else if (wakeReader) {
            whileMapped(in::interrupt);
        }
        return true;
    }

    /** Calls whose waiting caller read their end itself, in this process so far. */
    static long callerReads() {
        return CALLER_READS.sum();
    }

    /** Under the read role, the ring lent: {@link #readOwn}'s reads; why the connection is to close, or null. */
    private Status borrow(int streamId, java.util.function.BooleanSupplier ended, long maxNanos) {
        MessageRing.OwnedHandler own = (kind, m) -> {
            if (m.length >= 4 && (int) FRAME_INT.get(m, 0) == streamId) {
                if (closed == null) {
                    handler.onFrame(kind, new Frames.Reader(m));
                }
            } else {
                handoff.add(new Pending(kind, m)); // not ours to run
            }
        };
        java.util.function.BooleanSupplier stop = () -> closed != null || ended.getAsBoolean() || !handoff.isEmpty()
                || !afterReads.isEmpty() || region.peerClosed() || Thread.currentThread().isInterrupted();
        long deadline = System.nanoTime() + maxNanos;
        try {
            while (!stop.getAsBoolean()) {
                if (in.pollOwned(own, 1) > 0) {
                    continue;
                }
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    return null;
                }
                in.awaitAsBorrower(left, stop);
            }
            return null;
        } catch (RingCorruptException | Frames.ProtocolException e) {
            return Status.UNAVAILABLE.withDescription("co-located connection " + name + " closed: the peer broke "
                    + "the protocol: " + e.getMessage());
        } catch (Throwable t) {
            log.log(Level.WARNING, "co-located connection " + name + " failed", t);
            return Status.UNAVAILABLE.withDescription("co-located connection " + name + " failed: " + t).withCause(t);
        }
    }

    /**
     * Writes one frame, after any frame still waiting: from the reader thread without waiting
     * (left in order for later if the ring is full), from any other thread waiting for room.
     *
     * @return false when the connection is closed (nothing written)
     */
    boolean write(int kind, byte[] frame) {
        return write(kind, frame, true);
    }

    /**
     * As {@link #write(int, byte[])}, without waking the reader now: for a frame that more of its
     * batch follows (a call's headers before its message, a message before its half-close or
     * trailers), which then wakes it once, or {@link #flush()} does. Where the frame has to wait
     * for room (or, on the reader's thread, for the lock), the reader is woken as for any frame.
     */
    boolean writeQuiet(int kind, byte[] frame) {
        return write(kind, frame, false);
    }

    /** Wakes the other end's reader if it sleeps: the end of a batch written with {@link #writeQuiet}. */
    void flush() {
        if (closed != null || region == null) {
            return;
        }
        if (isReading()) {
            out.wakeIfAsleep(); // the region stays mapped while the read role is held: the unmapping takes it
            return;
        }
        whileMapped(out::wakeIfAsleep);
    }

    /** Runs {@code r}, a native call on the mapping, under the lock the unmapping takes, unless it is unmapped. */
    private void whileMapped(Runnable r) {
        writeLock.lock();
        try {
            if (!unmapped.get()) {
                r.run();
            }
        } finally {
            writeLock.unlock();
        }
    }

    private boolean write(int kind, byte[] frame, boolean wake) {
        if (frame.length > maxFrame) {
            throw new IllegalArgumentException("a frame of " + frame.length + " bytes; at most " + maxFrame);
        }
        if (closed != null) {
            return false;
        }
        boolean reading = isReading();
        if (reading || onReadingLoop()) {
            // a handler or callback run by the reader (a direct executor), or other work of the loop that reads:
            // never waits, so never for the lock
            if (!wake && pending.isEmpty() && tryUnderLock(() -> offer(kind, frame, false))) {
                return true;
            }
            if (closed != null) {
                return false;
            }
            pending.add(new Pending(kind, frame));
            flushPending();
            if (!reading && !pending.isEmpty() && closed == null) {
                onLoop.retryLater(); // not in a pass, which would look at them as it ends
            }
            return true;
        }
        Status failure;
        writeLock.lock();
        try {
            if (unmapped.get()) {
                return false;
            }
            if (pending.isEmpty() && offer(kind, frame, wake)) {
                failure = null;
            } else {
                pending.add(new Pending(kind, frame));
                failure = drainBlocking();
            }
        } catch (RingCorruptException e) {
            failure = corrupt(e);
        } finally {
            writeLock.unlock();
        }
        if (failure != null) {
            close(failure); // never under the lock: the reader takes it to unmap as it ends
            return false;
        }
        if (!pending.isEmpty()) {
            flushPending();
        }
        return closed == null;
    }

    private Status corrupt(RingCorruptException e) {
        return Status.UNAVAILABLE.withDescription("co-located connection " + name + " closed: " + e.getMessage());
    }

    /** Under the write lock: one frame into the ring if it fits now, waking the reader where {@code wake}. */
    private boolean offer(int kind, byte[] frame, boolean wake) throws RingCorruptException {
        return out.offer(kind, MemorySegment.ofArray(frame), 0, frame.length, wake); // copied once, into the ring
    }

    /** Under the write lock: every waiting frame out, waiting for room; why it could not, or null. */
    private Status drainBlocking() throws RingCorruptException {
        long start = System.nanoTime();
        Pending p;
        while (closed == null && (p = pending.peek()) != null) {
            if (offer(p.kind(), p.bytes(), true)) {
                pending.poll();
                start = System.nanoTime();
                continue;
            }
            out.wakeIfAsleep(); // what quiet writes left in the ring is what its reader must take to make room
            out.awaitSpace(p.bytes().length, SLEEP_NANOS);
            if (System.nanoTime() - start > WRITE_TIMEOUT_NANOS) {
                return Status.UNAVAILABLE.withDescription("co-located connection " + name + ": the peer took nothing "
                        + "for " + TimeUnit.NANOSECONDS.toSeconds(WRITE_TIMEOUT_NANOS) + " s");
            }
        }
        return null;
    }

    /** Whatever waiting frames fit now, in order, if no other thread is writing. */
    private void flushPending() {
        boolean emptied = true;
        while (emptied && !pending.isEmpty() && closed == null) {
            emptied = tryUnderLock(() -> {
                Pending p;
                while ((p = pending.peek()) != null && offer(p.kind(), p.bytes(), true)) {
                    pending.poll();
                }
                if (pending.isEmpty()) {
                    return true; // another thread may have queued one since: looked at again
                }
                out.wakeIfAsleep(); // what quiet writes left there must be taken first
                return false; // full: the reader comes back within a millisecond, a writer waits for room
            });
        }
    }

    /** A write to the ring, under the write lock. */
    @FunctionalInterface
    private interface RingWrite {
        boolean run() throws RingCorruptException;
    }

    /**
     * Runs {@code w} if the write lock is free and the region still mapped, without waiting; a ring
     * the peer corrupted closes the connection (after the lock is released: the reader takes it to
     * unmap as it ends).
     *
     * @return what {@code w} returned; false where it did not run or the ring was corrupt
     */
    private boolean tryUnderLock(RingWrite w) {
        if (!writeLock.tryLock()) {
            return false;
        }
        Status failure = null;
        try {
            return !unmapped.get() && w.run();
        } catch (RingCorruptException e) {
            failure = corrupt(e);
            return false;
        } finally {
            writeLock.unlock();
            if (failure != null) {
                close(failure);
            }
        }
    }

    /** Ends the connection once: stops the reader, tells the handler, unmaps the region. */
    void close(Status status) {
        synchronized (this) {
            if (closed != null) {
                return;
            }
            closed = status;
        }
        if (region != null) {
            whileMapped(in::interrupt);
        }
        tellClosed(status);
        for (Runnable r : whenClosed) {
            if (whenClosed.remove(r)) {
                r.run();
            }
        }
        runAfterReads();
        Thread t = reader;
        if (t == Thread.currentThread() || isReading()) {
            return; // the read loop unmaps as it ends (after a borrower closing here gives the role back)
        }
        if (onLoop != null && onLoop.settling()) {
            return; // the loop is being asked to watch: its answer unmaps
        }
        if (t != null) {
            try {
                t.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return; // the read loop unmaps as it ends
            }
            return; // it has
        }
        unmap();
    }

    /** Tells the other end and unmaps, once: after the reader has stopped, or where there was none. */
    private void unmap() {
        if (region == null || !unmapped.compareAndSet(false, true)) {
            return;
        }
        readRole.lock(); // a borrower still reading stops as it sees the end, and gives the role back
        try {
            writeLock.lock();
            try {
                region.markClosed();
                if (onLoop == null) {
                    region.close();
                }
            } finally {
                writeLock.unlock();
            }
        } finally {
            readRole.unlock();
        }
        if (onLoop != null) {
            // once the bell is out of the loop's set; meanwhile nobody touches the mapping: every use looks
            // at unmapped (or closed, set before it) first, under the read role or the write lock
            onLoop.release(region::close);
        }
    }
}
