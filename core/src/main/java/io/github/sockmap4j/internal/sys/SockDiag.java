package io.github.sockmap4j.internal.sys;

import io.github.sockmap4j.internal.ffi.Errno;
import io.github.sockmap4j.internal.ffi.LibC;
import io.github.sockmap4j.internal.ffi.NativeIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * sock_diag over netlink (what {@code ss -tm} reads): the memory of one TCP socket found by
 * its 4-tuple, in this process's network namespace.
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
    private static final int REQ_SIZE = 16 + 56;
    private static final int MSG_OFFSET = 16;
    private static final int ATTR_OFFSET = 16 + 72;
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
        int fd = LibC.socket(AF_NETLINK, SOCK_DGRAM | LibC.SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
        return new SockDiag(fd);
    }

    /**
     * SKMEMINFO of the TCP socket whose own side is {@code local} (16-byte address, IPv4
     * v4-mapped) and peer {@code remote}; null when no such socket is in this namespace.
     */
    public long[] memInfo(byte[] local, int localPort, byte[] remote, int remotePort) throws NativeIOException {
        long[] r = query(LibC.AF_INET6, local, localPort, remote, remotePort);
        if (r == null && isV4Mapped(local) && isV4Mapped(remote)) {
            r = query(LibC.AF_INET, local, localPort, remote, remotePort); // an AF_INET socket
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

    private long[] query(int family, byte[] local, int localPort, byte[] remote, int remotePort)
            throws NativeIOException {
        req.fill((byte) 0);
        req.set(ValueLayout.JAVA_INT, 0, REQ_SIZE);
        req.set(ValueLayout.JAVA_SHORT, 4, SOCK_DIAG_BY_FAMILY);
        req.set(ValueLayout.JAVA_SHORT, 6, NLM_F_REQUEST);
        req.set(ValueLayout.JAVA_INT, 8, ++seq);
        long r = 16;
        req.set(ValueLayout.JAVA_BYTE, r, (byte) family);
        req.set(ValueLayout.JAVA_BYTE, r + 1, (byte) LibC.IPPROTO_TCP);
        req.set(ValueLayout.JAVA_BYTE, r + 2, (byte) (1 << (INET_DIAG_SKMEMINFO - 1)));
        req.set(ValueLayout.JAVA_INT, r + 4, -1); // every state
        long id = r + 8;
        req.set(BE16, id, (short) localPort);
        req.set(BE16, id + 2, (short) remotePort);
        if (family == LibC.AF_INET6) {
            MemorySegment.copy(local, 0, req, ValueLayout.JAVA_BYTE, id + 4, 16);
            MemorySegment.copy(remote, 0, req, ValueLayout.JAVA_BYTE, id + 20, 16);
        } else {
            MemorySegment.copy(local, 12, req, ValueLayout.JAVA_BYTE, id + 4, 4);
            MemorySegment.copy(remote, 12, req, ValueLayout.JAVA_BYTE, id + 20, 4);
        }
        req.set(ValueLayout.JAVA_INT, id + 40, -1); // INET_DIAG_NOCOOKIE
        req.set(ValueLayout.JAVA_INT, id + 44, -1);
        long sent = LibC.trySend(fd, req, 0);
        if (sent < 0) {
            throw new NativeIOException("send(sock_diag)", (int) -sent);
        }
        long n = LibC.tryRecv(fd, resp, 0);
        if (n < 0) {
            throw new NativeIOException("recv(sock_diag)", (int) -n);
        }
        short type = resp.get(ValueLayout.JAVA_SHORT, 4);
        if (type == NLMSG_ERROR) {
            int err = -resp.get(ValueLayout.JAVA_INT, 16);
            if (err == Errno.ENOENT || err == 0) {
                return null;
            }
            throw new NativeIOException("sock_diag", err);
        }
        if (type != SOCK_DIAG_BY_FAMILY) {
            return null;
        }
        int len = Math.min((int) n, resp.get(ValueLayout.JAVA_INT, 0));
        long off = ATTR_OFFSET;
        while (off + 4 <= len) {
            int alen = resp.get(ValueLayout.JAVA_SHORT, off) & 0xffff;
            int atype = resp.get(ValueLayout.JAVA_SHORT, off + 2) & 0xffff;
            if (alen < 4) {
                break;
            }
            if (atype == INET_DIAG_SKMEMINFO) {
                int count = (alen - 4) / 4;
                long[] out = new long[count];
                for (int i = 0; i < count; i++) {
                    out[i] = resp.get(ValueLayout.JAVA_INT, off + 4 + 4L * i) & 0xffffffffL;
                }
                return out;
            }
            off += (alen + 3) & ~3;
        }
        assert MSG_OFFSET == 16;
        return null;
    }

    @Override
    public void close() {
        LibC.close(fd);
        arena.close();
    }
}
