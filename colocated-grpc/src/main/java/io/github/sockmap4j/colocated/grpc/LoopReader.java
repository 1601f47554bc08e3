package io.github.sockmap4j.colocated.grpc;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.LongAdder;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * A co-located connection's inbound ring read on an event loop ({@link ReadLoop}) instead of a
 * thread of its own: the loop watches the ring's bell and runs a pass of the connection's reads
 * ({@link ColocatedConnection#readPass}) each time it rings, as it reads a socket, waiting among
 * its other descriptors in between. This class orders the passes: when they run, what happens
 * where a borrowing caller holds the ring, and when the bell may be closed.
 */
final class LoopReader {
    private static final Logger log = Logger.getLogger(LoopReader.class.getName());
    /** Polls a pass takes at most before it lets the loop's other work run (then it comes back). */
    static final int POLLS = 16;
    /** How soon the loop looks again where writes wait for room. */
    private static final long RETRY_NANOS = TimeUnit.MILLISECONDS.toNanos(1);
    /** Connections read on a loop, in this process so far: for tests and benches. */
    private static final LongAdder STARTED = new LongAdder();

    /** How a pass ended. */
    enum After {
        /** The ring is empty and the loop waits for the bell. */
        IDLE,
        /** Something came as the pass ended: another pass, soon. */
        AGAIN,
        /** Writes of the loop wait for room in the peer's ring: a look within a millisecond. */
        WRITES_WAIT,
        /** The connection ended: it unmaps, the role given back. */
        ENDED
    }

    private final ColocatedConnection connection;
    private final ReadLoop loop;
    private final CompletableFuture<ReadLoop.Watch> watch = new CompletableFuture<>();
    /** Whether the loop was asked to watch the bell: from here a close leaves the unmapping to the answer. */
    private volatile boolean asked;
    /** Whether the loop reads (from its asking until a loop that cannot watch leaves it to a thread). */
    private volatile boolean reading;
    /** Whether the loop came to read while a borrower held the ring: the borrower then runs a pass for it. */
    private final AtomicBoolean missed = new AtomicBoolean();
    /** Whether a look for waiting writes is scheduled. */
    private final AtomicBoolean retryScheduled = new AtomicBoolean();

    LoopReader(ColocatedConnection connection, ReadLoop loop) {
        this.connection = connection;
        this.loop = loop;
    }

    /** Says the loop is about to be asked (before the connection looks whether it closed). */
    void asking() {
        asked = true;
    }

    /**
     * Asks the loop to watch {@code bell}; once it does, a pass at once (for what came before).
     * A loop that cannot watch it leaves the reading to the connection's thread.
     */
    void start(int bell) {
        reading = true; // from here writes on the loop's thread do not wait, and nobody else starts a thread
        try {
            loop.watch(bell, this::pass, connection::loopEnded).whenComplete((ok, e) -> {
                if (e != null) {
                    watch.completeExceptionally(e);
                } else {
                    watch.complete(ok);
                }
            });
        } catch (RuntimeException e) {
            watch.completeExceptionally(e);
        }
        watch.whenComplete((ok, e) -> {
            if (e != null) {
                log.log(Level.FINE, "co-located connection " + connection.name() + ": its event loop cannot read it; "
                        + "a thread does", e);
                reading = false;
                connection.unwatched();
                return;
            }
            STARTED.increment();
            if (connection.isClosed()) {
                connection.endedOnLoop(); // closed while the loop was asked: the close left the unmapping here
                return;
            }
            passSoon();
        });
    }

    /** Connections read on an event loop in this process so far. */
    static long started() {
        return STARTED.sum();
    }

    /** Whether the calling thread is the loop that reads (there, a write never waits). */
    boolean inLoop() {
        return reading && loop.inLoop();
    }

    /** Whether the loop was asked and has not answered: the answer then unmaps a closed connection. */
    boolean settling() {
        return asked && !watch.isDone();
    }

    /**
     * One pass when the bell rang or the loop came back. Where a borrowing caller holds the ring
     * it says so, and the borrower runs a pass for it once it gives the ring back ({@link
     * #afterBorrow}): the bell that brought the loop may have been for what the borrower leaves,
     * and the ring's word may say the loop reads, so that no writer rings again.
     */
    void pass() {
        if (!connection.tryReadRole()) {
            missed.set(true);
            if (!connection.tryReadRole()) {
                return;
            }
            missed.set(false);
        }
        After after;
        try {
            after = connection.readPass(POLLS);
        } finally {
            connection.giveReadRole();
        }
        switch (after) {
            case AGAIN -> passSoon();
            case WRITES_WAIT -> retryLater();
            case ENDED -> connection.endedOnLoop();
            case IDLE -> {
            }
        }
    }

    /** A borrower gave the ring back: the pass the loop missed meanwhile, if it did. */
    void afterBorrow() {
        if (missed.getAndSet(false)) {
            passSoon();
        }
    }

    /** A pass on the loop, soon; a loop that ended ends the connection. */
    void passSoon() {
        try {
            loop.execute(this::pass);
        } catch (RejectedExecutionException gone) {
            connection.loopEnded();
        }
    }

    /** The loop looks again within a millisecond: writes wait for room the peer's reader makes. */
    void retryLater() {
        if (retryScheduled.compareAndSet(false, true)) {
            loop.schedule(() -> {
                retryScheduled.set(false);
                pass();
            }, RETRY_NANOS);
        }
    }

    /**
     * Runs {@code closeRegion} once the bell is out of the loop's set (at once where it never was
     * in): a descriptor closed while still in the set, its number then reused, would have the loop
     * take the new one's events for it.
     */
    void release(Runnable closeRegion) {
        if (watch.isDone() && !watch.isCompletedExceptionally()) {
            watch.join().cancel().whenComplete((x, e) -> closeRegion.run());
        } else {
            closeRegion.run();
        }
    }
}
