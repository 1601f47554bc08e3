package io.github.sockmap4j.internal.flow;

import io.github.sockmap4j.internal.net.NativeSocket;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BooleanSupplier;

/**
 * A channel's side of credit (docs/in-flight-bound.md): how a write waits for its
 * {@link PeerCredit} (which {@link ConnectionFlow} resolves; the blocking driver of {@link CreditRule}), and what a
 * selector needs to know about a non-blocking writer that stopped for it.
 *
 * <p><b>Note:</b> {@link #await} runs under the channel's write lock; a selector
 * calls {@link #held} from any thread and {@link #returned} takes the lock itself.
 */
public final class ChannelCredit {
    /** Channels of this process held for credit now: a selector looks for them only when any is. */
    private static final AtomicInteger HELD = new AtomicInteger();

    private final CreditRule rule = new CreditRule();
    private final BackoffIdle idle = new BackoffIdle();
    /** A non-blocking write stopped for credit: the selector polls for it instead of EPOLLOUT. */
    private volatile boolean held;
    /** When the write that set {@link #held} stopped, for the wait statistics. */
    private volatile long heldSince;

    /**
     * Credit for a send of up to {@code remaining} bytes: at once when there is enough
     * ({@link CreditRule#worthSending}); else 0 in non-blocking mode (the selector reports
     * OP_WRITE when it returns), or, blocking, after waiting for it by {@link CreditRule}. A
     * receiver that closes or dies ends the wait: the send then meets what a TCP send meets. So
     * does closing or interrupting the channel (0 then).
     *
     * @param open whether the channel is still open (looked at each time the wait parks)
     * @return the credit, {@link PeerCredit#UNLIMITED} when the receiver is not waited for
     */
    public long await(PeerCredit c, long remaining, boolean blocking, BooleanSupplier open) {
        long want = c.worthSending(remaining);
        long a = c.available();
        if (a >= want) {
            return a;
        }
        if (blocking && rule.released(c.receiverRead())) {
            return PeerCredit.UNLIMITED; // still reading nothing: no holding again
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
        rule.begin(c.receiverRead(), start);
        idle.reset();
        while (true) {
            if (idle.idle()) {
                if (!open.getAsBoolean()) {
                    return 0;
                }
                a = c.refresh();
                if (a < want && idle.waitedLongest()
                        && (rule.watch(c.receiverRead(), System.nanoTime()) || c.receiverGone())) {
                    // Gone: the send meets its close. Reading nothing at all: stop holding, and let
                    // the kernel's bound send the rest by TCP, whose buffers take it as they would
                    // without the fast path (a protocol that relies on them does not deadlock).
                    a = PeerCredit.UNLIMITED;
                }
            } else {
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
    public boolean returned(ReentrantLock writeLock, PeerCredit credit) {
        if (!held) {
            return true;
        }
        if (!writeLock.tryLock()) {
            return false;
        }
        try {
            PeerCredit c = credit;
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
    private void release(PeerCredit c) {
        if (held) {
            held = false;
            HELD.decrementAndGet();
            if (c != null) {
                c.waited(System.nanoTime() - heldSince);
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
