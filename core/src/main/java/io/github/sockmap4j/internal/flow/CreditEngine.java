package io.github.sockmap4j.internal.flow;

import java.util.function.BooleanSupplier;
import java.util.function.LongSupplier;

/**
 * One writer's credit (docs/in-flight-bound.md): the one place that decides what a cooperating
 * writer sends now, when it holds, how it waits and when it stops waiting, whatever drives it. Its
 * drivers hold no rule of their own: {@link ChannelCredit} (a {@code SockmapChannel} write,
 * blocking in {@link #await} or held for a selector), {@code spi.WriteCredit} (an event loop's
 * writer, Netty's {@code HoldForCredit}: {@link #admit}, {@link #next}, {@link #retry}). What it
 * reads of the receiver ({@link Receiver}), the clock and the way a blocking wait idles
 * ({@link Idle}) are given to it, so that every decision runs in a unit test without a kernel or
 * a sleep.
 *
 * <ul>
 *   <li><b>What goes now</b> ({@link #fits}): all of a message, or, for one that can be split, a part
 *       worth sending ({@link #worthSending}); one that cannot be split and is larger than the
 *       bound goes once the receiver has read everything.</li>
 *   <li><b>A stalled receiver</b> ({@link #watch}): one that reads nothing at all for
 *       {@value #STALLED_RECEIVER_MILLIS} ms, and sends this writer's socket nothing either, is
 *       not waited for until it reads again, so that nothing waits on a peer that waits on this
 *       writer (the kernel's bound then sends by TCP, whose buffers take it). A receiver that
 *       still sends is running and not waiting on this writer (a busy event loop writing its
 *       replies): it is waited for, as a TCP writer waits for a peer that sends but has not read
 *       yet. Time in which this writer itself did not run (a pause longer than
 *       {@value #OWN_PAUSE_MILLIS} ms between two looks: a collection, a busy event loop) is not
 *       counted against the receiver, which could not run either.</li>
 *   <li><b>How to wait</b>: a blocking writer idles ({@link BackoffIdle}: spin, yield, then park
 *       from 1 µs doubling to 1 ms) and counts a stall only once it parks the longest; an event
 *       loop retries from 50 µs doubling to 1 ms ({@link #retryNanos}).</li>
 * </ul>
 *
 * <p><b>Note:</b> not threadsafe: one per writer, used by the thread that writes.
 */
public final class CreditEngine {
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
    /** Credit when nothing holds the writer (the receiver has gone, or sets no bound). */
    public static final long UNLIMITED = Long.MAX_VALUE;
    /** {@link #next}: the whole message goes. */
    public static final long WHOLE = Long.MAX_VALUE;

    /**
     * What a writer sees of its receiver: {@link PeerCredit} (shared memory and the kernel's maps),
     * or a model in a test.
     */
    public interface Receiver {
        /** Bytes that may be sent now (the bound minus what is unread), as far as seen without a system call. */
        long available();

        /** As {@link #available()}, after looking again at what the kernel holds: system calls. */
        long refresh();

        /** The receiver's bound as last seen. */
        long bound();

        /** What the receiver has read as last seen. */
        long receiverRead();

        /**
         * What this writer's own socket has read of what its receiver sent, as that socket
         * publishes it (-1 when it publishes nothing): a receiver that still sends is running.
         * No system call once found.
         */
        long readFromReceiver();

        /** Whether the kernel sends this writer by TCP now, after a bound hit. A system call. */
        boolean onTcp();

        /** Whether the receiver has closed or died. A system call. */
        boolean receiverGone();

        /** After {@code bytes > 0} were sent. */
        void sent(long bytes);

        /** Counts a wait of {@code nanos} for credit in this process's statistics. */
        void waited(long nanos);
    }

    /** How a blocking wait spends the time between looks (Agrona's {@code IdleStrategy} shape). */
    public interface Idle {
        /** A wait begins: the shortest pauses again. */
        void reset();

        /** One step of a wait; whether it paused (then the writer looks at the kernel again). */
        boolean idle();

        /** Whether the pauses have reached their longest (the receiver had time to read). */
        boolean waitedLongest();
    }

    /** What an event loop's retry does ({@link #retry}). */
    public enum Retry {
        /** Nothing goes yet: the kernel sends this writer by TCP until its receiver has read everything. */
        WAIT,
        /** Send what the credit covers ({@link #next} with {@code force} false). */
        DRAIN,
        /** The receiver is gone or stalled at the longest retry: send everything held. */
        DRAIN_ALL
    }

    private final Receiver receiver;
    private final LongSupplier clock;
    private final Idle idle;

    private long progressRead = -1;
    private long progressHeard = -1;
    private long progressAt;
    private long lastLook;
    private long stalledAt = -1;
    private long retry = MIN_RETRY_NANOS;
    /** When the current hold began (an event loop's writer). */
    private long heldSince;

    /**
     * @param receiver what the writer sees of its receiver
     * @param clock    nanoseconds, {@link System#nanoTime()} in production
     * @param idle     how a blocking wait idles
     */
    public CreditEngine(Receiver receiver, LongSupplier clock, Idle idle) {
        this.receiver = receiver;
        this.clock = clock;
        this.idle = idle;
    }

    /** With the receiver {@code receiver}, the system's clock and a {@link BackoffIdle}. */
    public static CreditEngine of(Receiver receiver) {
        return new CreditEngine(receiver, System::nanoTime, new BackoffIdle());
    }

    /** What the writer sees of its receiver. */
    public Receiver receiver() {
        return receiver;
    }

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

    /** {@link #worthSending(long, long)} with the receiver's bound as last seen. */
    public long worthSending(long remaining) {
        return worthSending(remaining, receiver.bound());
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

    // ---- A writer that blocks, or stops for a selector (ChannelCredit) ----

    /**
     * Credit for a send of up to {@code remaining} bytes: at once when there is enough
     * ({@link #worthSending}); else 0 when not {@code blocking}; or, blocking, after waiting for
     * it, idling between looks. A receiver that closes or dies ends the wait ({@link #UNLIMITED}:
     * the send meets what a TCP send meets), and so does one that reads nothing at all for
     * {@value #STALLED_RECEIVER_MILLIS} ms of the writer's running time, looked at only once the
     * pauses are at their longest; {@code open} turning false ends it with 0.
     */
    public long await(long remaining, boolean blocking, BooleanSupplier open) {
        long want = worthSending(remaining);
        long a = receiver.available();
        if (a >= want) {
            return a;
        }
        if (blocking && released(receiver.receiverRead())) {
            return UNLIMITED; // still reading nothing: no holding again
        }
        a = receiver.refresh();
        if (a >= want || !blocking) {
            return a >= want ? a : 0;
        }
        long start = clock.getAsLong();
        begin(receiver.receiverRead(), receiver.readFromReceiver(), start);
        idle.reset();
        while (true) {
            if (idle.idle()) {
                if (!open.getAsBoolean()) {
                    return 0;
                }
                a = receiver.refresh();
                if (a < want && idle.waitedLongest()
                        && (watch(receiver.receiverRead(), receiver.readFromReceiver(), clock.getAsLong())
                                || receiver.receiverGone())) {
                    // Gone: the send meets its close. Reading nothing at all: stop holding, and let
                    // the kernel's bound send the rest by TCP, whose buffers take it as they would
                    // without the fast path (a protocol that relies on them does not deadlock).
                    a = UNLIMITED;
                }
            } else {
                a = receiver.available();
            }
            if (a >= want) {
                receiver.waited(clock.getAsLong() - start);
                return a;
            }
        }
    }

    /**
     * For a selector: whether a writer held for credit may write again (the credit is worth a
     * send, or the receiver has gone). System calls.
     */
    public boolean mayWriteAgain() {
        return receiver.refresh() >= worthSending(Long.MAX_VALUE) || receiver.receiverGone();
    }

    // ---- A writer driven by an event loop (spi.WriteCredit, Netty's HoldForCredit) ----

    /**
     * A message of {@code size} bytes (-1: not data) with nothing held before it: whether it goes
     * now (then it is counted as sent), because it fits or because the receiver stalled and has
     * read nothing since; otherwise the writer holds it and the hold begins.
     */
    public boolean admit(long size, boolean splittable) {
        long a = receiver.available();
        if (released(receiver.receiverRead())
                || size < 0 || a >= size || !splittable && fits(size, false, a, receiver.bound())) {
            if (size > 0) {
                receiver.sent(size);
            }
            return true;
        }
        heldSince = clock.getAsLong();
        begin(receiver.receiverRead(), receiver.readFromReceiver(), heldSince);
        return false;
    }

    /**
     * How much of the held message at the head, {@code size} bytes (0 or less: not data), goes
     * now: {@link #WHOLE}; a part of that many bytes (a message that can be split, when a part
     * worth sending fits); or 0, nothing yet. Everything when {@code force}. The writer counts
     * what it sends with {@link #sent}.
     */
    public long next(long size, boolean splittable, boolean force) {
        if (force || size <= 0) {
            return WHOLE;
        }
        long a = receiver.available();
        if (!fits(size, splittable, a, receiver.bound())) {
            a = receiver.refresh(); // the receiver may have claimed its slot, or the watcher moved on
        }
        if (a >= size || !splittable && fits(size, false, a, receiver.bound())) {
            // Whole; or a message that cannot be split and is larger than the bound, once
            // everything sent before it has been read.
            return WHOLE;
        }
        return splittable && a >= worthSending(size) ? a : 0;
    }

    /** After {@code bytes > 0} were sent. */
    public void sent(long bytes) {
        receiver.sent(bytes);
    }

    /** Everything held has gone: the hold is counted in the statistics. */
    public void drained() {
        receiver.waited(clock.getAsLong() - heldSince);
    }

    /**
     * At a scheduled retry of a holding writer. A receiver that read nothing at all for
     * {@value #STALLED_RECEIVER_MILLIS} ms is not waited for (the kernel's bound takes over, with
     * TCP's buffers), so that nothing waits on a peer that waits on this writer; with the retries
     * at their longest, a stalled or gone receiver gets everything. A writer the kernel sends by
     * TCP since a bound hit sends nothing until its receiver has read everything (it comes back to
     * the redirect at such a send; a part sent earlier would keep it on TCP): then {@link Retry#WAIT}
     * and the retries back off.
     */
    public Retry retry() {
        receiver.available();
        boolean stalled = watch(receiver.receiverRead(), receiver.readFromReceiver(), clock.getAsLong());
        boolean gone = retry >= MAX_WAIT_NANOS && (stalled || receiver.receiverGone());
        boolean drained = receiver.available() >= receiver.bound();
        if (!gone && !stalled && !drained && receiver.onTcp()) {
            backOff();
            return Retry.WAIT;
        }
        return gone ? Retry.DRAIN_ALL : Retry.DRAIN;
    }

    /** After a retry's drain: soon again when it sent something, else twice as late, up to 1 ms. */
    public void retried(boolean wrote) {
        if (wrote) {
            retry = MIN_RETRY_NANOS;
        } else {
            backOff();
        }
    }

    /** The delay before the next retry, in nanoseconds. */
    public long retryNanos() {
        return retry;
    }

    private void backOff() {
        retry = Math.min(retry * 2, MAX_WAIT_NANOS);
    }

    // ---- The stall rule ----

    /**
     * A wait begins, with the receiver's read count at {@code read} and what this writer has read
     * of it at {@code heard} (-1: not known).
     */
    void begin(long read, long heard, long now) {
        progressRead = read;
        progressHeard = heard;
        progressAt = now;
        lastLook = now;
    }

    /**
     * A look at the receiver during a wait: whether it has read nothing, and sent nothing that
     * this writer read ({@code heard}, -1 when not known), for {@link #STALLED_RECEIVER_NANOS} of
     * this writer's running time. Once it has, the writer is released ({@link #released}) until
     * the receiver reads again.
     */
    boolean watch(long read, long heard, long now) {
        if (read != progressRead || heard != progressHeard) {
            progressRead = read;
            progressHeard = heard;
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
    boolean released(long read) {
        if (stalledAt < 0) {
            return false;
        }
        if (read == stalledAt) {
            return true;
        }
        stalledAt = -1;
        return false;
    }
}
