package io.github.sockmap4j.linux.sys;

import io.github.sockmap4j.linux.ffi.Errno;
import io.github.sockmap4j.linux.ffi.LibC;
import io.github.sockmap4j.linux.ffi.Linux;
import io.github.sockmap4j.linux.ffi.NativeIOException;
import io.github.sockmap4j.linux.ffi.NativeLayouts;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * sock_diag over netlink (what {@code ss -tm} reads): the memory of one TCP socket found by
 * its 4-tuple, in the network namespace its netlink socket was made in.
 *
 * <pre>
 * request:  struct nlmsghdr (16) + struct inet_diag_req_v2 (56)
 *           { u8 family, protocol, ext, pad; u32 states;
 *             struct inet_diag_sockid { be16 sport, dport; be32 src[4], dst[4]; u32 if; u32 cookie[2]; } }
 * reply:    struct nlmsghdr (16) + struct inet_diag_msg (72), then attributes (struct rtattr,
 *           4-aligned); INET_DIAG_SKMEMINFO holds u32[SK_MEMINFO_VARS].
 * </pre>
 *
 * <p><b>Note:</b> not threadsafe: one instance per thread.
 */
public final class SockDiag implements AutoCloseable {
    private static final int AF_NETLINK = 16;
    private static final int NETLINK_SOCK_DIAG = 4;
    private static final int SOCK_DGRAM = 2;
    private static final short SOCK_DIAG_BY_FAMILY = 20;
    private static final short NLMSG_ERROR = 2;
    private static final short NLM_F_REQUEST = 1;
    private static final int INET_DIAG_SKMEMINFO = 7;
    private static final long HDR = NativeLayouts.NLMSGHDR.byteSize();
    private static final int REQ_SIZE = (int) (HDR + NativeLayouts.INET_DIAG_REQ_V2.byteSize());
    /** Attributes follow the header and the inet_diag_msg. */
    private static final long ATTR_OFFSET = HDR + NativeLayouts.INET_DIAG_MSG.byteSize();
    private static final long NLA_HDR = NativeLayouts.NLATTR.byteSize();
    /** Indexes into the SKMEMINFO array. */
    public static final int RMEM_ALLOC = 0;
    public static final int RCVBUF = 1;
    public static final int WMEM_ALLOC = 2;
    public static final int WMEM_QUEUED = 5;
    private static final ValueLayout.OfShort BE16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    private final Arena arena = Arena.ofConfined();
    private final int fd;
    private final MemorySegment req;
    private final MemorySegment resp;
    private int seq;

    private SockDiag(int fd) {
        this.fd = fd;
        this.req = arena.allocate(REQ_SIZE, 8);
        this.resp = arena.allocate(8192, 8);
    }

    public static SockDiag open() throws NativeIOException {
        return of(openSocket());
    }

    /**
     * A sock_diag netlink socket of the calling thread's network namespace; it keeps answering
     * for that namespace whichever thread uses it later (see {@link NetnsDiags}).
     */
    static int openSocket() throws NativeIOException {
        return LibC.socket(AF_NETLINK, SOCK_DGRAM | Linux.SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    }

    /** Queries through {@code fd} (from {@link #openSocket}), which this instance then owns. */
    static SockDiag of(int fd) {
        return new SockDiag(fd);
    }

    /**
     * SKMEMINFO of the TCP socket whose own side is {@code local} (16-byte address, IPv4
     * v4-mapped) and peer {@code remote}; null when no such socket is in this namespace.
     */
    public long[] memInfo(byte[] local, int localPort, byte[] remote, int remotePort) throws NativeIOException {
        long[] r = query(Linux.AF_INET6, local, localPort, remote, remotePort);
        if (r == null && isV4Mapped(local) && isV4Mapped(remote)) {
            r = query(Linux.AF_INET, local, localPort, remote, remotePort); // an AF_INET socket
        }
        return r;
    }

    private static boolean isV4Mapped(byte[] a) {
        for (int i = 0; i < 10; i++) {
            if (a[i] != 0) {
                return false;
            }
        }
        return a[10] == (byte) 0xff && a[11] == (byte) 0xff;
    }

    /**
     * The uid that owns the TCP socket whose own side is {@code local} and peer {@code remote}
     * (16-byte addresses, IPv4 v4-mapped), as the kernel keeps it (the creator's, seen from the
     * initial user namespace); -1 when no such socket is in this namespace.
     */
    public int ownerUid(byte[] local, int localPort, byte[] remote, int remotePort) throws NativeIOException {
        boolean found = ask(Linux.AF_INET6, local, localPort, remote, remotePort);
        if (!found && isV4Mapped(local) && isV4Mapped(remote)) {
            found = ask(Linux.AF_INET, local, localPort, remote, remotePort);
        }
        return found ? resp.get(ValueLayout.JAVA_INT, HDR + IDIAG_UID) : -1;
    }

    /** Where struct inet_diag_msg keeps idiag_uid: after family, state, timer, retrans, the id, expires, queues. */
    private static final long IDIAG_UID = 4 + 48 + 4 + 4 + 4;

    private long[] query(int family, byte[] local, int localPort, byte[] remote, int remotePort)
            throws NativeIOException {
        if (!ask(family, local, localPort, remote, remotePort)) {
            return null;
        }
        int len = Math.min(resp.get(ValueLayout.JAVA_INT, NativeLayouts.NLMSG_LEN), (int) resp.byteSize());
        long off = ATTR_OFFSET;
        while (off + NLA_HDR <= len) {
            int alen = resp.get(ValueLayout.JAVA_SHORT, off + NativeLayouts.NLA_LEN) & 0xffff;
            int atype = resp.get(ValueLayout.JAVA_SHORT, off + NativeLayouts.NLA_TYPE) & 0xffff;
            if (alen < NLA_HDR) {
                break;
            }
            if (atype == INET_DIAG_SKMEMINFO) {
                // SK_MEMINFO_*: an array of __u32, indexed by the constants above.
                int count = (int) ((alen - NLA_HDR) / 4);
                long[] out = new long[count];
                for (int i = 0; i < count; i++) {
                    out[i] = resp.get(ValueLayout.JAVA_INT, off + NLA_HDR + 4L * i) & 0xffffffffL;
                }
                return out;
            }
            off += (alen + 3) & ~3; // NLA_ALIGN
        }
        return null;
    }

    /** Asks for the one socket of {@code family} with this id: whether {@code resp} now holds its message. */
    private boolean ask(int family, byte[] local, int localPort, byte[] remote, int remotePort)
            throws NativeIOException {
        req.fill((byte) 0);
        req.set(ValueLayout.JAVA_INT, NativeLayouts.NLMSG_LEN, REQ_SIZE);
        req.set(ValueLayout.JAVA_SHORT, NativeLayouts.NLMSG_TYPE, SOCK_DIAG_BY_FAMILY);
        req.set(ValueLayout.JAVA_SHORT, NativeLayouts.NLMSG_FLAGS, NLM_F_REQUEST);
        req.set(ValueLayout.JAVA_INT, NativeLayouts.NLMSG_SEQ, ++seq);
        long r = HDR;
        req.set(ValueLayout.JAVA_BYTE, r + NativeLayouts.REQ_FAMILY, (byte) family);
        req.set(ValueLayout.JAVA_BYTE, r + NativeLayouts.REQ_PROTOCOL, (byte) Linux.IPPROTO_TCP);
        req.set(ValueLayout.JAVA_BYTE, r + NativeLayouts.REQ_EXT, (byte) (1 << (INET_DIAG_SKMEMINFO - 1)));
        req.set(ValueLayout.JAVA_INT, r + NativeLayouts.REQ_STATES, -1); // every state
        long id = r + NativeLayouts.REQ_ID;
        req.set(BE16, id + NativeLayouts.ID_SPORT, (short) localPort);
        req.set(BE16, id + NativeLayouts.ID_DPORT, (short) remotePort);
        // IPv6 fills the 16-byte fields; IPv4 their first 4 bytes.
        int from = family == Linux.AF_INET6 ? 0 : 12;
        MemorySegment.copy(local, from, req, ValueLayout.JAVA_BYTE, id + NativeLayouts.ID_SRC, 16 - from);
        MemorySegment.copy(remote, from, req, ValueLayout.JAVA_BYTE, id + NativeLayouts.ID_DST, 16 - from);
        req.set(ValueLayout.JAVA_INT, id + NativeLayouts.ID_COOKIE, -1); // INET_DIAG_NOCOOKIE
        req.set(ValueLayout.JAVA_INT, id + NativeLayouts.ID_COOKIE + 4, -1);
        long sent = LibC.trySend(fd, req, 0);
        if (sent < 0) {
            throw Errno.error("send(sock_diag)", sent);
        }
        long n = LibC.tryRecv(fd, resp, 0);
        if (n < 0) {
            throw Errno.error("recv(sock_diag)", n);
        }
        short type = resp.get(ValueLayout.JAVA_SHORT, NativeLayouts.NLMSG_TYPE);
        if (type == NLMSG_ERROR) {
            int err = -resp.get(ValueLayout.JAVA_INT, HDR); // struct nlmsgerr starts with the error
            if (err == Errno.ENOENT || err == 0) {
                return false;
            }
            throw Errno.error("sock_diag", -err);
        }
        return type == SOCK_DIAG_BY_FAMILY && n >= HDR + IDIAG_UID + 4;
    }

    @Override
    public void close() {
        LibC.close(fd);
        arena.close();
    }
}
