package io.github.sockmap4j.spi;

import io.github.sockmap4j.internal.flow.CreditRule;
import io.github.sockmap4j.internal.flow.PeerCredit;

/**
 * A sending socket's side of the in-flight bound when it cooperates (docs/in-flight-bound.md),
 * for a writer driven by an event loop ({@link RawSockets#writeCredit}): it knows what it sent
 * and can see what its receiver has read, so it holds its bytes back before the kernel would
 * throw it off the fast path. Credit is the receiver's bound minus what is unread; a writer that
 * sends no more than its credit is never sent by TCP for the bound.
 *
 * <p>The rule is the one a blocking {@code SockmapChannel} write follows: {@link #fits} says
 * what goes now; a writer that holds calls {@link #holdBegins} once, then {@link #stalled} at each
 * retry, retrying after {@link #retryNanos()}, which {@link #backOff()} doubles to
 * {@value CreditRule#MAX_WAIT_NANOS} ns and {@link #progressed()} resets; a receiver that reads
 * nothing at all for 200 ms of the writer's running time is not waited for ({@link #released()})
 * until it reads again.
 *
 * <p>For a receiver that publishes its reads (a sockmap4j channel, a Netty channel of this
 * transport) {@link #available()} reads shared memory: no system call. For one that publishes
 * nothing (a JDK socket, C, Rust) the credit follows the kernel watcher's estimate, which
 * {@link #refresh()} reads.
 *
 * <p><b>Note:</b> not threadsafe: one writer thread at a time, as for the socket's writes.
 */
public final class WriteCredit {
    /** Credit when nothing holds the writer (the receiver has gone, or sets no bound). */
    public static final long UNLIMITED = PeerCredit.UNLIMITED;

    private final PeerCredit credit;
    private final CreditRule rule = new CreditRule();

    WriteCredit(PeerCredit credit) {
        this.credit = credit;
    }

    /**
     * Bytes that may be sent now; no system call for a receiver that publishes its reads.
     *
     * @return the credit, {@link #UNLIMITED} once the fast path closed
     */
    public long available() {
        return credit.available();
    }

    /**
     * As {@link #available()}, after looking again at what the kernel holds: one or two system
     * calls, for a writer whose {@link #available()} fell short, at its retry pace.
     *
     * @return the credit
     */
    public long refresh() {
        return credit.refresh();
    }

    /**
     * Whether a message goes now, whole or, when it can be split, in a part worth sending.
     *
     * @param size       its bytes
     * @param splittable whether it can go in parts
     * @param available  the credit now
     * @return whether to send (all of it, or {@code available} of it when split)
     */
    public boolean fits(long size, boolean splittable, long available) {
        return CreditRule.fits(size, splittable, available, credit.bound());
    }

    /**
     * The credit worth a send of {@code remaining} bytes: all of it, or enough for a message that
     * is not tiny (tiny redirected messages cost more than they carry).
     *
     * @param remaining bytes left to send
     * @return at least 1, at most {@code remaining}
     */
    public long worthSending(long remaining) {
        return credit.worthSending(remaining);
    }

    /**
     * The receiver's bound as last seen: a message that cannot be split and is larger goes once
     * the receiver has read everything ({@link #available()} reaches it).
     *
     * @return bytes
     */
    public long bound() {
        return credit.bound();
    }

    /**
     * Whether the kernel sends this socket by TCP now (after a bound hit): it comes back to the
     * redirect at a send once its receiver has read everything sent, so a writer that has it
     * sends nothing more until {@link #available()} reaches {@link #bound()}. A system call.
     *
     * @return false where it cannot be told
     */
    public boolean onTcp() {
        return credit.onTcp();
    }

    /**
     * After a send.
     *
     * @param bytes how many were sent, more than 0
     */
    public void sent(long bytes) {
        credit.sent(bytes);
    }

    /**
     * Whether the receiver has closed or died (its socket left the socket map): the writer then
     * stops waiting and sends, meeting the close or error a TCP writer meets. A system call.
     *
     * @return true when it has gone
     */
    public boolean receiverGone() {
        return credit.receiverGone();
    }

    /**
     * A writer begins to hold (its first message did not fit): the stall rule starts counting.
     *
     * @param now {@link System#nanoTime()}
     */
    public void holdBegins(long now) {
        rule.begin(credit.receiverRead(), now);
    }

    /**
     * At a retry of a holding writer: whether its receiver has stalled (read nothing for 200 ms
     * of this writer's running time). From then on {@link #released()} is true until it reads.
     *
     * @param now {@link System#nanoTime()}
     * @return whether to stop holding
     */
    public boolean stalled(long now) {
        return rule.watch(credit.receiverRead(), now);
    }

    /**
     * Whether this writer is released from holding: its receiver stalled and has read nothing
     * since (looks at the credit, no system call).
     *
     * @return true while released
     */
    public boolean released() {
        credit.available();
        return rule.released(credit.receiverRead());
    }

    /** @return the delay before the next retry, in nanoseconds */
    public long retryNanos() {
        return rule.retryNanos();
    }

    /** A retry sent nothing: the next one waits twice as long, up to 1 ms. */
    public void backOff() {
        rule.nextRetryNanos();
    }

    /** @return whether the retry delay has reached its longest (the receiver had time to read) */
    public boolean backedOffFully() {
        return rule.retryNanos() >= CreditRule.MAX_WAIT_NANOS;
    }

    /** A retry sent something: the next one is soon again. */
    public void progressed() {
        rule.progressed();
    }

    /**
     * Counts a wait for credit in this process's statistics ({@code Sockmap.flowStats()}).
     *
     * @param nanos how long the writer held
     */
    public void waited(long nanos) {
        credit.waited(nanos);
    }
}
