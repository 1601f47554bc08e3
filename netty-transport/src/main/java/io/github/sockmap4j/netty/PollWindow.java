package io.github.sockmap4j.netty;

/**
 * How long an event loop polls before it blocks, learnt from how long its blocks last: the rule
 * of Linux's guest halt-polling, per loop. A block that ended within {@code max} would have been
 * caught by polling that long, so the window doubles towards it (from {@code start}); a block
 * longer than {@code max} could not have been, so the window halves, and below {@code start} it
 * is 0: a loop whose events come seldom, or late, polls not at all. A poll that found work
 * leaves the window as it is, unless the poller reports it ({@link #found}: it then doubles).
 *
 * <p>Pure: the loop measures, this decides. Used from one event loop thread.
 */
final class PollWindow {
    private final long maxNanos;
    private final long startNanos;
    private long windowNanos;

    /**
     * @param maxNanos   the longest poll, 0 for none
     * @param startNanos the first window after a short block (no more than {@code maxNanos})
     */
    PollWindow(long maxNanos, long startNanos) {
        if (maxNanos < 0 || startNanos <= 0) {
            throw new IllegalArgumentException("need 0 <= max and 0 < start: max=" + maxNanos + " start=" + startNanos);
        }
        this.maxNanos = maxNanos;
        this.startNanos = maxNanos == 0 ? startNanos : Math.min(startNanos, maxNanos);
    }

    /** How long to poll before the next block, 0 for not at all. */
    long nanos() {
        return windowNanos;
    }

    long maxNanos() {
        return maxNanos;
    }

    /**
     * A poll found work before its window ended: the window doubles, up to the most. For a
     * poller whose work comes in bursts (the steps of a call, then a pause before the next call),
     * so that the pause's sleep, which halves the window, does not close it while most polls pay.
     */
    void found() {
        if (windowNanos > 0) {
            windowNanos = Math.min(maxNanos, windowNanos << 1);
        }
    }

    /**
     * A block has ended.
     *
     * @param blockedNanos how long the loop slept (polling included), not counting the work it woke for
     */
    void blocked(long blockedNanos) {
        if (maxNanos == 0) {
            return;
        }
        if (blockedNanos > maxNanos) {
            long half = windowNanos >>> 1;
            windowNanos = half < startNanos ? 0 : half;
        } else if (windowNanos < blockedNanos) {
            windowNanos = Math.min(maxNanos, Math.max(startNanos, windowNanos << 1));
        }
    }
}
