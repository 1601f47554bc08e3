package io.github.sockmap4j.colocated.grpc;

import io.github.sockmap4j.colocated.MessageRing;
import io.github.sockmap4j.colocated.RingCorruptException;
import io.grpc.Status;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A co-located connection's writes onto its outbound ring, from any thread, one at a time under
 * {@link #lock} (which the unmapping takes too). A writer that finds the ring full waits for room.
 * The reading side never waits to write (it would stop draining, and a peer in the same state
 * would never make room): a frame it cannot write at once waits in order, and whoever writes
 * next, or the reader between reads, sends it first. The same holds for the loop that reads,
 * which comes back for what waits within a millisecond.
 */
final class FrameWriter {
    /** How long a writer waiting for room sleeps before it looks whether the connection closed. */
    private static final long SLEEP_NANOS = TimeUnit.MILLISECONDS.toNanos(200);
    private static final long WRITE_TIMEOUT_NANOS = TimeUnit.SECONDS.toNanos(30);

    /** Taken for every write and by the unmapping: a write never touches an unmapped ring. */
    final ReentrantLock lock = new ReentrantLock();
    private final ColocatedConnection connection;
    private final MessageRing.Writer out;
    private final int maxFrame;
    /** Frames that wait, in order, for room the reading side could not wait for. */
    private final ConcurrentLinkedQueue<Queued> pending = new ConcurrentLinkedQueue<>();

    private record Queued(int kind, byte[] bytes) {
    }

    FrameWriter(ColocatedConnection connection, MessageRing.Writer out, int maxFrame) {
        this.connection = connection;
        this.out = out;
        this.maxFrame = maxFrame;
    }

    /** Whether frames wait for room. */
    boolean hasPending() {
        return !pending.isEmpty();
    }

    /**
     * Publishes what was written and wakes the other end's reader if it sleeps: the end of a
     * batch. {@code reading}: the caller holds the read role, under which the region stays mapped.
     */
    void flush(boolean reading) {
        if (reading) {
            out.wakeIfAsleep(); // the region stays mapped while the read role is held: the unmapping takes it
            return;
        }
        whileMapped(out::wakeIfAsleep);
    }

    /** Runs {@code r}, a native call on the mapping, under the lock the unmapping takes, unless it is unmapped. */
    void whileMapped(Runnable r) {
        lock.lock();
        try {
            if (!connection.isUnmapped()) {
                r.run();
            }
        } finally {
            lock.unlock();
        }
    }

    /**
     * Writes one frame, after any frame still waiting; where {@code wake} is false, without waking
     * the reader now: for a frame that more of its batch follows (a call's headers before its
     * message, a message before its half-close or trailers), which then wakes it once, or {@link
     * #flush} does. Where the frame has to wait for room (or, on the reading thread, for the
     * lock), the reader is woken as for any frame.
     *
     * @return false when the connection is closed (nothing written)
     */
    boolean write(int kind, byte[] frame, boolean wake) {
        if (frame.length > maxFrame) {
            throw new IllegalArgumentException("a frame of " + frame.length + " bytes; at most " + maxFrame);
        }
        if (connection.closedStatus() != null) {
            return false;
        }
        boolean reading = connection.isReading();
        if (reading || connection.onReadingLoop()) {
            // a handler or callback run by the reader (a direct executor), or other work of the loop that reads:
            // never waits, so never for the lock
            if (!wake && pending.isEmpty() && tryUnderLock(() -> offer(kind, frame, false))) {
                return true;
            }
            if (connection.closedStatus() != null) {
                return false;
            }
            pending.add(new Queued(kind, frame));
            flushPending();
            if (!reading && !pending.isEmpty() && connection.closedStatus() == null) {
                connection.retryWritesLater(); // not in a pass, which would look at them as it ends
            }
            return true;
        }
        Status failure;
        lock.lock();
        try {
            if (connection.isUnmapped()) {
                return false;
            }
            if (pending.isEmpty() && offer(kind, frame, wake)) {
                failure = null;
            } else {
                pending.add(new Queued(kind, frame));
                failure = drainBlocking();
            }
        } catch (RingCorruptException e) {
            failure = corrupt(e);
        } finally {
            lock.unlock();
        }
        if (failure != null) {
            connection.close(failure); // never under the lock: the reader takes it to unmap as it ends
            return false;
        }
        if (!pending.isEmpty()) {
            flushPending();
        }
        return connection.closedStatus() == null;
    }

    private Status corrupt(RingCorruptException e) {
        return Status.UNAVAILABLE.withDescription("co-located connection " + connection.name() + " closed: "
                + e.getMessage());
    }

    /** Under the write lock: one frame into the ring if it fits now, waking the reader where {@code wake}. */
    private boolean offer(int kind, byte[] frame, boolean wake) throws RingCorruptException {
        return out.offer(kind, MemorySegment.ofArray(frame), 0, frame.length, wake); // copied once, into the ring
    }

    /** Under the write lock: every waiting frame out, waiting for room; why it could not, or null. */
    private Status drainBlocking() throws RingCorruptException {
        long start = System.nanoTime();
        Queued p;
        while (connection.closedStatus() == null && (p = pending.peek()) != null) {
            if (offer(p.kind(), p.bytes(), true)) {
                pending.poll();
                start = System.nanoTime();
                continue;
            }
            out.wakeIfAsleep(); // what quiet writes left in the ring is what its reader must take to make room
            out.awaitSpace(p.bytes().length, SLEEP_NANOS);
            if (System.nanoTime() - start > WRITE_TIMEOUT_NANOS) {
                return Status.UNAVAILABLE.withDescription("co-located connection " + connection.name()
                        + ": the peer took nothing for " + TimeUnit.NANOSECONDS.toSeconds(WRITE_TIMEOUT_NANOS) + " s");
            }
        }
        return null;
    }

    /** Whatever waiting frames fit now, in order, if no other thread is writing. */
    void flushPending() {
        boolean emptied = true;
        while (emptied && !pending.isEmpty() && connection.closedStatus() == null) {
            emptied = tryUnderLock(() -> {
                Queued p;
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
        if (!lock.tryLock()) {
            return false;
        }
        Status failure = null;
        try {
            return !connection.isUnmapped() && w.run();
        } catch (RingCorruptException e) {
            failure = corrupt(e);
            return false;
        } finally {
            lock.unlock();
            if (failure != null) {
                connection.close(failure);
            }
        }
    }
}
