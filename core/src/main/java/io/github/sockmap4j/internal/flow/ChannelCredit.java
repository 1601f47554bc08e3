package io.github.sockmap4j;

import java.io.IOException;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;
import org.slf4j.LoggerFactory;

/**
 * A {@link SockmapChannel}'s side of credit (docs/in-flight-bound.md): its {@link WriteCredit},
 * resolved at the first write, how a write waits for it, and what the selector needs to know
 * about a non-blocking writer that stopped for it.
 *
 * <p><b>Note:</b> {@link #get} and {@link #await} run under the channel's write lock; the selector
 * calls {@link #held} from any thread and {@link #returned} takes the lock itself.
 */
final class ChannelCredit {
    /**
     * How long a blocking writer holds for a receiver that reads nothing at all before it stops
     * holding: longer than a reader's ordinary pauses, short enough that a protocol relying on
     * TCP's buffering does not stall for long.
     */
    static final long STALLED_RECEIVER_NANOS = 200_000_000L;

    /** Channels of this process held for credit now: a selector looks for them only when any is. */
    private static final java.util.concurrent.atomic.AtomicInteger HELD = new java.util.concurrent.atomic.AtomicInteger();

    private final SockmapChannel channel;
    private WriteCredit credit;
    private boolean resolved;
    /** The receiver's read count when a blocking writer stopped holding for it; -1 otherwise. */
    private long stalledAt = -1;
    /** A non-blocking write stopped for credit: the selector polls for it instead of EPOLLOUT. */
    private volatile boolean held;
    /** When the write that set {@link #held} stopped, for the wait statistics. */
    private volatile long heldSince;

    ChannelCredit(SockmapChannel channel) {
        this.channel = channel;
    }

    /** The channel's credit, resolved at its first write; null when nothing holds its writes. */
    WriteCredit get() {
        if (!resolved) {
            resolved = true;
            try {
                credit = channel.sockmap().writeCredit(channel.fdVal(), channel.serverSide());
            } catch (IOException e) {
                LoggerFactory.getLogger(SockmapChannel.class).warn(
                        "{} writes without credit (the in-flight bound may send it by TCP): {}", channel, e.getMessage());
            }
        }
        return credit;
    }

    /**
     * Credit for a send of up to {@code remaining} bytes: at once when there is enough
     * ({@link WriteCredit#worthSending}); else 0 in non-blocking mode (the selector reports
     * OP_WRITE when it returns), or, blocking, after waiting for it as Agrona's back-off idle
     * strategy does: spin, yield, then park from 1 µs to 1 ms, with no system call until parking
     * starts. A receiver that closes or dies ends the wait: the send then meets what a TCP send
     * meets. So does closing or interrupting the channel (0 then).
     */
    long await(WriteCredit c, long remaining, boolean blocking) {
        long want = c.worthSending(remaining);
        long a = c.available();
        if (a >= want) {
            return a;
        }
        if (blocking && stalledAt >= 0) {
            if (c.receiverRead() == stalledAt) {
                return WriteCredit.UNLIMITED; // still reading nothing: no holding again
            }
            stalledAt = -1;
        }
        a = c.refresh();
        if (a >= want) {
            release(c);
            return a;
        }
        if (!blocking) {
            if (!held) {
                heldSince = System.nanoTime();
                held = true;
                HELD.incrementAndGet();
            }
            return 0;
        }
        long start = System.nanoTime();
        long progressAt = start;
        long read = c.receiverRead();
        long park = 1_000;
        for (int i = 0; ; i++) {
            if (i < 20) {
                Thread.onSpinWait();
            } else if (i < 30) {
                Thread.yield();
            } else {
                LockSupport.parkNanos(park);
                park = Math.min(park * 2, 1_000_000);
                if (!channel.stillOpen()) {
                    return 0;
                }
                a = c.refresh();
                long now = System.nanoTime();
                if (c.receiverRead() != read) {
                    read = c.receiverRead();
                    progressAt = now;
                }
                if (a < want && park >= 1_000_000 && now - progressAt > STALLED_RECEIVER_NANOS) {
                    stalledAt = read;
                }
                if (a < want && park >= 1_000_000 && (stalledAt >= 0 || c.receiverGone())) {
                    // Gone: the send meets its close. Reading nothing at all: stop holding, and let
                    // the kernel's bound send the rest by TCP, whose buffers take it as they would
                    // without the fast path (a protocol that relies on them does not deadlock).
                    a = WriteCredit.UNLIMITED;
                }
            }
            if (i < 30) {
                a = c.available();
            }
            if (a >= want) {
                c.waited(System.nanoTime() - start);
                return a;
            }
        }
    }

    /**
     * For the selector: whether a non-blocking writer held for credit may write again. Looks at
     * the kernel only when no write is running.
     */
    boolean returned(ReentrantLock writeLock) {
        if (!held) {
            return true;
        }
        if (!writeLock.tryLock()) {
            return false;
        }
        try {
            WriteCredit c = credit;
            if (c == null || c.refresh() >= c.worthSending(Long.MAX_VALUE) || c.receiverGone()) {
                release(c);
                return true;
            }
            return false;
        } finally {
            writeLock.unlock();
        }
    }

    /** A non-blocking writer held for credit has it again: the wait is counted. */
    private void release(WriteCredit c) {
        if (held) {
            held = false;
            HELD.decrementAndGet();
            if (c != null) {
                c.waited(System.nanoTime() - heldSince);
            }
        }
    }

    /** The channel closed: it is held for nothing any more. */
    void closed() {
        release(null);
    }

    /** Whether any channel of this process is held for credit now (one volatile read). */
    static boolean anyHeld() {
        return HELD.get() > 0;
    }

    boolean held() {
        return held;
    }
}
