package io.github.sockmap4j.internal.flow;

import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BooleanSupplier;

/**
 * A channel's side of credit (docs/in-flight-bound.md), a driver of the connection's
 * {@link CreditEngine} (which {@link ConnectionFlow} resolves) with no rule of its own: a write
 * asks the engine, and a non-blocking writer that the engine stops is remembered for the
 * selector, which then polls for it instead of waiting for EPOLLOUT.
 *
 * <p><b>Note:</b> {@link #await} runs under the channel's write lock; a selector
 * calls {@link #held} from any thread and {@link #returned} takes the lock itself.
 */
public final class ChannelCredit {
    /** Channels of this process held for credit now: a selector looks for them only when any is. */
    private static final AtomicInteger HELD = new AtomicInteger();

    /** A non-blocking write stopped for credit: the selector polls for it instead of EPOLLOUT. */
    private volatile boolean held;
    /** When the write that set {@link #held} stopped, for the wait statistics. */
    private volatile long heldSince;

    /**
     * Credit for a send of up to {@code remaining} bytes, as {@link CreditEngine#await} decides; a
     * non-blocking write that gets none is held until the selector sees credit return (OP_WRITE).
     *
     * @param open whether the channel is still open (looked at each time a blocking wait parks)
     * @return the credit, {@link PeerCredit#UNLIMITED} when the receiver is not waited for
     */
    public long await(CreditEngine credit, long remaining, boolean blocking, BooleanSupplier open) {
        long a = credit.await(remaining, blocking, open);
        if (a > 0) {
            release(credit);
        } else if (!blocking && !held) {
            heldSince = System.nanoTime();
            held = true;
            HELD.incrementAndGet();
        }
        return a;
    }

    /**
     * For the selector: whether a non-blocking writer held for credit may write again. Looks at
     * the kernel only when no write is running.
     */
    public boolean returned(ReentrantLock writeLock, CreditEngine credit) {
        if (!held) {
            return true;
        }
        if (!writeLock.tryLock()) {
            return false;
        }
        try {
            if (credit == null || credit.mayWriteAgain()) {
                release(credit);
                return true;
            }
            return false;
        } finally {
            writeLock.unlock();
        }
    }

    /** A non-blocking writer held for credit has it again: the wait is counted. */
    private void release(CreditEngine credit) {
        if (held) {
            held = false;
            HELD.decrementAndGet();
            if (credit != null) {
                credit.receiver().waited(System.nanoTime() - heldSince);
            }
        }
    }

    /** The channel closed: it is held for nothing any more. */
    public void closed() {
        release(null);
    }

    /** Whether any channel of this process is held for credit now (one volatile read). */
    public static boolean anyHeld() {
        return HELD.get() > 0;
    }

    /** Whether this channel's non-blocking writer is held for credit now. */
    public boolean held() {
        return held;
    }
}
