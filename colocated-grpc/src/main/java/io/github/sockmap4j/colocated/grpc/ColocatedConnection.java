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
 * <p>Writes come from any thread ({@link FrameWriter}): one at a time, a writer that finds the
 * ring full waits for room, and the reading side never waits.
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
    private final MessageRing.Reader in;
    private final int maxFrame;
    /** The outbound ring's writes; null for a connection that ended before it began. */
    private final FrameWriter writer;
    /**
     * Held by whoever reads the inbound ring now (one at a time): the reader's thread between its
     * sleeps, or a borrower ({@link #readOwn}). The unmapping takes it too, so that a borrower
     * never reads an unmapped ring. Taken before the writer's lock ({@link FrameWriter#lock}), never after it.
     */
    private final ReentrantLock readRole = new ReentrantLock();
    /** Frames a borrower read that were not its stream's, for the reader's thread to dispatch first, in order. */
    private final ConcurrentLinkedQueue<Pending> handoff = new ConcurrentLinkedQueue<>();
    /** Calls whose end their waiting caller read itself ({@link #readOwn}), in this process: for tests and benches. */
    private static final java.util.concurrent.atomic.LongAdder CALLER_READS = new java.util.concurrent.atomic.LongAdder();
    /** The reader's full polls in a row (under the read role). */
    private int fullPolls;
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

    /** The heap's halves, where the region has a heap (its ends agreed on lending); else null. */
    private final Lending lending;
    /** The connection's hold on the mapping, and kept lent bodies'; null for a connection that ended before it began. */
    private final MappingHolds holds;

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
        this.in = region.inbound().reader();
        this.maxFrame = region.outbound().maxMessage();
        this.writer = new FrameWriter(this, region.outbound().writer(), maxFrame);
        this.onLoop = loop != null && region.inbound().bell() >= 0 ? new LoopReader(this, loop) : null;
        this.lending = Lending.of(region);
        this.holds = new MappingHolds(region);
    }

    private ColocatedConnection(String name, Status ended) {
        this.region = null;
        this.name = name;
        this.in = null;
        this.maxFrame = 0;
        this.writer = null;
        this.closed = ended;
        this.onLoop = null;
        this.lending = null;
        this.holds = null;
    }

    /** A connection that ended before it began: a transport over it fails every call with {@code status}. */
    static ColocatedConnection ended(String name, Status status) {
        return new ColocatedConnection(name, status);
    }

    /** Why the connection ended; null while open. */
    Status closedStatus() {
        return closed;
    }

    /** The heap's halves, where this connection's ends agreed on lending; null where they did not. */
    Lending lending() {
        return lending;
    }

    /** Who holds the region mapped (a lent body kept past its stream holds it too). */
    MappingHolds holds() {
        return holds;
    }

    /** Tells the peer this end is done with a body it lent (no wake: the peer needs it only when it next lends). */
    void giveBack(long at, long bytes) {
        if (closed == null) {
            writeQuiet(Frames.RETURNED, new Frames.Writer(0).putLong(at).putLong(bytes).bytes());
        }
    }

    /** The largest frame this connection writes; a larger message goes in several. */
    int maxFrame() {
        return maxFrame;
    }

    String name() {
        return name;
    }

    /** The handler reading this connection; null before {@link #start}. */
    Handler handler() {
        return handler;
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
        return writer.hasPending() ? LoopReader.After.WRITES_WAIT : LoopReader.After.IDLE;
    }

    /** Whether the calling thread is the loop that reads this connection (there, a write never waits). */
    boolean onReadingLoop() {
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
    boolean isReading() {
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
                in.awaitMessages(writer.hasPending() ? TimeUnit.MILLISECONDS.toNanos(1) : READER_SLEEP_NANOS,
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
        writer.flushPending();
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
            wakeReader = in.hasMessages() || !handoff.isEmpty() || !afterReads.isEmpty() || writer.hasPending()
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
     * Writes one frame, after any frame still waiting: from the reader without waiting (left in
     * order for later if the ring is full), from any other thread waiting for room ({@link FrameWriter}).
     *
     * @return false when the connection is closed (nothing written)
     */
    boolean write(int kind, byte[] frame) {
        return writer != null && writer.write(kind, frame, true);
    }

    /** As {@link #write(int, byte[])}, without waking the reader now ({@link FrameWriter#write}). */
    boolean writeQuiet(int kind, byte[] frame) {
        return writer != null && writer.write(kind, frame, false);
    }

    /** Wakes the other end's reader if it sleeps: the end of a batch written with {@link #writeQuiet}. */
    void flush() {
        if (closed != null || region == null) {
            return;
        }
        writer.flush(isReading());
    }

    /** Runs {@code r}, a native call on the mapping, under the lock the unmapping takes, unless it is unmapped. */
    private void whileMapped(Runnable r) {
        writer.whileMapped(r);
    }

    /** The loop looks again within a millisecond for writes that wait (where a loop reads). */
    void retryWritesLater() {
        onLoop.retryLater();
    }

    /** Whether the region is unmapped (or being unmapped): nothing may touch it then. */
    boolean isUnmapped() {
        return unmapped.get();
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
            writer.lock.lock();
            try {
                region.markClosed();
                if (onLoop == null) {
                    holds.release();
                }
            } finally {
                writer.lock.unlock();
            }
        } finally {
            readRole.unlock();
        }
        if (onLoop != null) {
            // once the bell is out of the loop's set; meanwhile nobody touches the mapping: every use looks
            // at unmapped (or closed, set before it) first, under the read role or the write lock
            onLoop.release(holds::release);
        }
    }
}
