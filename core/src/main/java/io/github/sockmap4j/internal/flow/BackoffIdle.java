package io.github.sockmap4j.internal.flow;

import java.util.concurrent.locks.LockSupport;

/**
 * How a blocking writer waits for credit, in the shape of Agrona's {@code BackoffIdleStrategy}:
 * spin {@value #SPINS} times, yield {@value #YIELDS} times, then park from 1 µs doubling to
 * {@link CreditEngine#MAX_WAIT_NANOS}; no system call before parking. The decisions are
 * {@link CreditEngine}'s; this only spends the time between looks.
 *
 * <p><b>Note:</b> not threadsafe: one per writer, used by the thread that writes.
 */
public final class BackoffIdle implements CreditEngine.Idle {
    static final int SPINS = 20;
    static final int YIELDS = 10;
    static final long MIN_PARK_NANOS = 1_000;

    /** What idling does between looks: parks in production, records in a test. */
    @FunctionalInterface
    interface Parker {
        void park(long nanos);
    }

    private final Parker parker;
    private int idles;
    private long park = MIN_PARK_NANOS;

    public BackoffIdle() {
        this(LockSupport::parkNanos);
    }

    BackoffIdle(Parker parker) {
        this.parker = parker;
    }

    /** A wait begins: spinning again first. */
    @Override
    public void reset() {
        idles = 0;
        park = MIN_PARK_NANOS;
    }

    /**
     * One step of a wait.
     *
     * @return whether this step parked (then the writer looks at the kernel again: a system call
     *         is cheap next to the pause)
     */
    @Override
    public boolean idle() {
        int i = idles++;
        if (i < SPINS) {
            Thread.onSpinWait();
            return false;
        }
        if (i < SPINS + YIELDS) {
            Thread.yield();
            return false;
        }
        parker.park(park);
        park = Math.min(park * 2, CreditEngine.MAX_WAIT_NANOS);
        return true;
    }

    /** Whether the wait has reached its longest pause (the receiver had time to read). */
    @Override
    public boolean waitedLongest() {
        return park >= CreditEngine.MAX_WAIT_NANOS;
    }
}
