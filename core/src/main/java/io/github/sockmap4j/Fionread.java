package io.github.sockmap4j;

/**
 * What {@code ioctl(FIONREAD)} reports for a registered socket on this kernel, as the start-up probe
 * measured it ({@link Sockmap#fionread()}; docs/kernel.md, "Wake-ups and FIONREAD"). FIONREAD is
 * what {@code InputStream.available()} of a {@link java.net.Socket} (and of
 * {@link java.nio.channels.Channels#newInputStream} over a {@code SocketChannel}) returns; sockmap4j's
 * own channels and its Netty transport (and so gRPC over it) never call it. Reads return every byte
 * in order whatever this says: only the count differs.
 */
public enum Fionread {
    /** TCP and redirected bytes are counted: {@code available()} is exact. */
    ALL_BYTES,
    /**
     * Only bytes that came by TCP are counted: while redirected bytes wait, {@code available()} of a
     * {@code java.net.Socket} on an opted-in port says 0 (or the TCP bytes behind them); a read
     * returns them. Kernels before the 2026 sockmap FIONREAD change, e.g. 6.1 and 6.12.74.
     */
    TCP_BYTES_ONLY,
    /**
     * Only redirected bytes are counted: while bytes that came by TCP wait (a sender over its
     * in-flight bound sends by TCP), {@code available()} of a registered {@code java.net.Socket}
     * says 0 (or the redirected bytes before them); a read returns them. Kernels with the 2026
     * sockmap FIONREAD change and without its follow-up, e.g. 6.18.44.
     */
    REDIRECTED_BYTES_ONLY,
    /** Neither: FIONREAD says 0 for every registered socket; reads return the bytes. */
    NO_BYTES,
    /** The probe did not run: skipped by configuration, this process outside the cgroup, or the fast path off. */
    NOT_PROBED;

    /** The name of what the start-up probe counted; {@link #NOT_PROBED} for null (it did not run). */
    static Fionread of(io.github.sockmap4j.linux.bpf.KernelProbe.Counts c) {
        if (c == null) {
            return NOT_PROBED;
        }
        return c.redirected() && c.tcp() ? ALL_BYTES : c.tcp() ? TCP_BYTES_ONLY : c.redirected() ? REDIRECTED_BYTES_ONLY
                : NO_BYTES;
    }
}
