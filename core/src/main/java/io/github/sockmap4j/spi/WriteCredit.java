package io.github.sockmap4j.spi;

import io.github.sockmap4j.internal.flow.CreditEngine;
import io.github.sockmap4j.internal.flow.PeerCredit;

/**
 * A sending socket's side of the in-flight bound when it cooperates (docs/in-flight-bound.md),
 * for a writer driven by an event loop ({@link RawSockets#writeCredit}): it knows what it sent
 * and can see what its receiver has read, so it holds its bytes back before the kernel would
 * throw it off the fast path. Credit is the receiver's bound minus what is unread; a writer that
 * sends no more than its credit is never sent by TCP for the bound.
 *
 * <p>The decisions are the library's one credit rule, the one a blocking {@code SockmapChannel}
 * write follows; the writer only carries them out. A message with nothing held before it goes if
 * {@link #admit} says so, else the writer holds it (and what follows). At each flush and each
 * retry, {@link #next} says how much of the oldest held message goes (all, a part, nothing yet);
 * the writer reports what it sent ({@link #sent}), and {@link #drained()} once nothing is held.
 * Retries come after {@link #retryNanos()}; at each, {@link #retry()} says whether to wait, send
 * what the credit covers, or send everything (the receiver has gone, or has read nothing at all
 * for 200 ms of the writer's running time), and {@link #retried} whether it sent anything.
 *
 * <p>For a receiver that publishes its reads (a sockmap4j channel, a Netty channel of this
 * transport) the credit is read from shared memory: no system call. For one that publishes
 * nothing (a JDK socket, C, Rust) it follows the kernel watcher's estimate.
 *
 * <p><b>Note:</b> not threadsafe: one writer thread at a time, as for the socket's writes.
 */
public final class WriteCredit {
    /** {@link #next}: the whole message goes. */
    public static final long WHOLE = CreditEngine.WHOLE;

    private final CreditEngine engine;

    WriteCredit(PeerCredit credit) {
        this.engine = CreditEngine.of(credit);
    }

    /**
     * A message with nothing held before it: whether it goes now (it is then counted as sent);
     * when not, the writer holds it, and the hold begins.
     *
     * @param size       the bytes it puts on the wire, -1 for a message that is not data
     * @param splittable whether it can go in parts
     * @return whether to write it now
     */
    public boolean admit(long size, boolean splittable) {
        return engine.admit(size, splittable);
    }

    /**
     * How much of the oldest held message goes now.
     *
     * @param size       its bytes left, 0 or less for a message that is not data
     * @param splittable whether it can go in parts
     * @param force      everything goes (the channel closes, or {@link #retry()} said so)
     * @return {@link #WHOLE}, a part of that many bytes, or 0: nothing yet
     */
    public long next(long size, boolean splittable, boolean force) {
        return engine.next(size, splittable, force);
    }

    /**
     * After a send.
     *
     * @param bytes how many were sent, more than 0
     */
    public void sent(long bytes) {
        engine.sent(bytes);
    }

    /** Nothing is held any more: the hold is counted in {@code Sockmap.flowStats()}. */
    public void drained() {
        engine.drained();
    }

    /**
     * At a retry of a holding writer: what to do now.
     *
     * @return whether to wait (retry later), send what the credit covers, or send everything
     */
    public Retry retry() {
        return switch (engine.retry()) {
            case WAIT -> Retry.WAIT;
            case DRAIN -> Retry.DRAIN;
            case DRAIN_ALL -> Retry.DRAIN_ALL;
        };
    }

    /**
     * After a retry's sends.
     *
     * @param wrote whether it sent anything (the next retry is soon again) or not (twice as late, up to 1 ms)
     */
    public void retried(boolean wrote) {
        engine.retried(wrote);
    }

    /** @return the delay before the next retry, in nanoseconds */
    public long retryNanos() {
        return engine.retryNanos();
    }

    /** What a retry does. */
    public enum Retry {
        /** Nothing goes yet: retry after {@link #retryNanos()}. */
        WAIT,
        /** Send what the credit covers: {@link #next} without force. */
        DRAIN,
        /** Send everything held: {@link #next} with force. */
        DRAIN_ALL
    }
}
