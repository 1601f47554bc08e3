package io.github.sockmap4j.internal.flow;

/**
 * The one rule by which a cooperating writer waits for its receiver's credit
 * (docs/in-flight-bound.md), whatever drives the wait: a blocking {@code SockmapChannel} write
 * (which spends the time between looks in a {@link BackoffIdle}), or an event loop that retries
 * later ({@link #nextRetryNanos}). It is pure: time comes in as {@code now}.
 *
 * <ul>
 *   <li><b>What goes now</b> ({@link #fits}): all of a message, or, for one that can be split, a part
 *       worth sending ({@link #worthSending}); one that cannot be split and is larger than the
 *       bound goes once the receiver has read everything.</li>
 *   <li><b>A stalled receiver</b> ({@link #watch}): one that reads nothing at all for
 *       {@value #STALLED_RECEIVER_MILLIS} ms is not waited for until it reads again, so that
 *       nothing waits on a peer that waits on this writer (the kernel's bound then sends by TCP,
 *       whose buffers take it). Time in which this writer itself did not run (a pause longer than
 *       {@value #OWN_PAUSE_MILLIS} ms between two looks: a collection, a busy event loop) is not
 *       counted against the receiver, which could not run either.</li>
 *   <li><b>How to wait</b>: a blocking writer idles in a {@link BackoffIdle} (spin, yield, then park
 *       from 1 µs doubling to 1 ms) and counts a stall only once it parks the longest; an event
 *       loop retries from 50 µs doubling to 1 ms ({@link #nextRetryNanos}).</li>
 * </ul>
 *
 * <p><b>Note:</b> not threadsafe: one per writer, used by the thread that writes.
 */
public final class CreditRule {
    static final long STALLED_RECEIVER_MILLIS = 200;
    static final long OWN_PAUSE_MILLIS = 50;
    /** A receiver that reads nothing for this long is not waited for. */
    public static final long STALLED_RECEIVER_NANOS = STALLED_RECEIVER_MILLIS * 1_000_000L;
    private static final long OWN_PAUSE_NANOS = OWN_PAUSE_MILLIS * 1_000_000L;
    /** Sends smaller than this (unless they are all that is left) wait for more credit. */
    public static final long MIN_SEND = 16 * 1024;
    /** The longest park and the longest event-loop retry delay. */
    public static final long MAX_WAIT_NANOS = 1_000_000;
    private static final long MIN_RETRY_NANOS = 50_000;

    private long progressRead = -1;
    private long progressAt;
    private long lastLook;
    private long stalledAt = -1;
    private long retry = MIN_RETRY_NANOS;

    /**
     * The credit worth a send of {@code remaining} bytes: all of it, or enough for a message that
     * is not tiny (tiny redirected messages cost more than they carry).
     *
     * @param bound the receiver's bound as last seen
     * @return at least 1, at most {@code remaining}
     */
    public static long worthSending(long remaining, long bound) {
        return Math.max(1, Math.min(remaining, Math.min(MIN_SEND, bound / 4)));
    }

    /**
     * Whether a message of {@code size} bytes goes now, whole or in a worthwhile part.
     *
     * @param splittable whether the message can go in parts
     * @param available  the credit now
     * @param bound      the receiver's bound as last seen
     */
    public static boolean fits(long size, boolean splittable, long available, long bound) {
        return available >= size || (splittable ? available >= worthSending(size, bound) : available >= bound);
    }

    /** A wait begins, with the receiver's read count at {@code read}. */
    public void begin(long read, long now) {
        progressRead = read;
        progressAt = now;
        lastLook = now;
    }

    /**
     * A look at the receiver during a wait: whether it has read nothing for
     * {@link #STALLED_RECEIVER_NANOS} of this writer's running time. Once it has, the writer is
     * released ({@link #released}) until the receiver reads again.
     */
    public boolean watch(long read, long now) {
        if (read != progressRead) {
            progressRead = read;
            progressAt = now;
        } else if (now - lastLook > OWN_PAUSE_NANOS) {
            progressAt += now - lastLook; // this writer did not run: its receiver may not have either
        }
        lastLook = now;
        if (now - progressAt > STALLED_RECEIVER_NANOS) {
            stalledAt = read;
            return true;
        }
        return false;
    }

    /**
     * Whether the writer is released from holding because its receiver stalled and has read
     * nothing since ({@code read} is its read count now); a receiver that reads again ends it.
     */
    public boolean released(long read) {
        if (stalledAt < 0) {
            return false;
        }
        if (read == stalledAt) {
            return true;
        }
        stalledAt = -1;
        return false;
    }

    /** The delay before an event loop's next retry, doubling from 50 µs to 1 ms. */
    public long nextRetryNanos() {
        long r = retry;
        retry = Math.min(retry * 2, MAX_WAIT_NANOS);
        return r;
    }

    /** The retry delay as it stands, without advancing it. */
    public long retryNanos() {
        return retry;
    }

    /** Something was written: the next retry is soon again. */
    public void progressed() {
        retry = MIN_RETRY_NANOS;
    }
}
