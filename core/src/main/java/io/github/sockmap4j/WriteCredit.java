package io.github.sockmap4j;

/**
 * A sending socket's side of the in-flight bound when it cooperates (docs/in-flight-bound.md):
 * it knows what it sent and can see what its receiver has read, so it holds its bytes back
 * before the kernel would throw it off the fast path. Credit is the receiver's bound minus what
 * is unread; a writer that sends no more than its credit is never sent by TCP for the bound.
 *
 * <p>For a receiver that publishes its reads (a sockmap4j channel, a Netty channel of this
 * transport) {@link #available()} reads shared memory: no system call. For one that publishes
 * nothing (a JDK socket, C, Rust) the credit follows the watcher's estimate, which
 * {@link #refresh()} reads from the kernel.
 *
 * <p><b>Note:</b> not threadsafe: one writer thread at a time, as for the socket's writes.
 */
public interface WriteCredit {
    /** Credit when nothing holds the writer (the receiver has gone, or sets no bound). */
    long UNLIMITED = Long.MAX_VALUE;

    /** Bytes that may be sent now; no system call for a receiver that publishes its reads. */
    long available();

    /**
     * As {@link #available()}, after looking again at what the kernel holds (the receiver's slot,
     * which it may claim late, or the watcher's estimate): one or two system calls. For a writer
     * whose {@link #available()} fell short, at a back-off pace.
     */
    long refresh();

    /**
     * The credit worth a send of {@code remaining} bytes: all of it, or enough for a message that
     * is not tiny (tiny redirected messages cost more than they carry). Below it, wait.
     */
    long worthSending(long remaining);

    /**
     * What the receiver has read as this credit last saw it: a writer that waits can tell a slow
     * receiver from one that reads nothing.
     */
    long receiverRead();

    /**
     * The receiver's bound as this credit last saw it: a message that cannot be split and is
     * larger goes once the receiver has read everything ({@link #available()} reaches it).
     */
    long bound();

    /**
     * Whether the kernel sends this socket by TCP now (after a bound hit): it comes back to the
     * redirect at a send once its receiver has read everything sent, so a writer that has it
     * sends nothing more until {@link #available()} reaches {@link #bound()}. A system call; for
     * a writer that waits for credit, at its back-off pace. False where it cannot be told.
     */
    default boolean onTcp() {
        return false;
    }

    /** After {@code bytes > 0} were sent. */
    void sent(long bytes);

    /**
     * Whether the receiver has closed or died (its socket left the socket map): the writer then
     * stops waiting and sends, meeting the close or error a TCP writer meets. A system call.
     */
    boolean receiverGone();

    /** Records that a writer waited {@code nanos} for credit (the process's {@link FlowStats}). */
    void waited(long nanos);
}
