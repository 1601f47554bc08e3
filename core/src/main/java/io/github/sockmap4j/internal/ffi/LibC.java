package io.github.sockmap4j.internal.ffi;

import static io.github.sockmap4j.internal.ffi.Native.C_INT;
import static io.github.sockmap4j.internal.ffi.Native.C_LONG;
import static io.github.sockmap4j.internal.ffi.Native.C_PTR;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * Every C library call sockmap4j makes. Each wrapper returns the call's result and throws
 * {@link NativeIOException} naming the call and the errno when it fails; the {@code try*}
 * variants return {@code -errno} instead, for callers that handle EAGAIN and friends.
 *
 * <p><b>Note:</b> this class is threadsafe; errno is captured per thread.
 */
@SuppressWarnings("restricted")
public final class LibC {
    public static final int AF_UNIX = 1;
    public static final int AF_INET = 2;
    public static final int AF_INET6 = 10;
    public static final int SOCK_STREAM = 1;
    public static final int SOCK_NONBLOCK = 0x800;
    public static final int SOCK_CLOEXEC = 0x80000;
    public static final int IPPROTO_TCP = 6;
    public static final int IPPROTO_IPV6 = 41;
    public static final int SOL_SOCKET = 1;
    public static final int SO_REUSEADDR = 2;
    public static final int SO_ERROR = 4;
    public static final int SO_SNDBUF = 7;
    public static final int SO_RCVBUF = 8;
    public static final int SO_KEEPALIVE = 9;
    public static final int SO_LINGER = 13;
    public static final int SO_REUSEPORT = 15;
    public static final int SO_COOKIE = 57;
    public static final int SO_NETNS_COOKIE = 71;
    public static final int SO_PEERCRED = 17;
    /** The supplementary groups of a Unix socket's peer, as they were when it connected (since 4.13). */
    public static final int SO_PEERGROUPS = 59;
    public static final int TCP_NODELAY = 1;
    public static final int IPV6_V6ONLY = 26;
    public static final int SHUT_RD = 0;
    public static final int SHUT_WR = 1;
    public static final int SHUT_RDWR = 2;
    public static final int MSG_NOSIGNAL = 0x4000;
    public static final int MSG_DONTWAIT = 0x40;
    public static final long FIONREAD = 0x541B;
    public static final long FIONBIO = 0x5421;
    public static final short POLLIN = 0x1;
    public static final short POLLOUT = 0x4;
    public static final short POLLERR = 0x8;
    public static final short POLLHUP = 0x10;
    public static final int EPOLL_CLOEXEC = 0x80000;
    public static final int EPOLL_CTL_ADD = 1;
    public static final int EPOLL_CTL_DEL = 2;
    public static final int EPOLL_CTL_MOD = 3;
    public static final int EPOLLIN = 0x1;
    public static final int EPOLLOUT = 0x4;
    public static final int EPOLLERR = 0x8;
    public static final int EPOLLHUP = 0x10;
    public static final int EPOLLRDHUP = 0x2000;
    public static final int EPOLLET = 1 << 31;
    public static final int EFD_NONBLOCK = 0x800;
    public static final int EFD_CLOEXEC = 0x80000;
    public static final int O_RDONLY = 0;
    public static final int O_RDWR = 2;
    public static final int O_CREAT = 0x40;
    public static final int O_DIRECTORY = Platform.current().oDirectory();
    public static final int O_CLOEXEC = 0x80000;
    public static final int O_NOFOLLOW = Platform.current().oNofollow();
    /** A handle on a path only (no read or write): enough to walk, stat and statfs through. */
    public static final int O_PATH = 0x200000;
    /** statfs f_type of a BPF file system (include/uapi/linux/magic.h). */
    public static final long BPF_FS_MAGIC = 0xcafe4a11L;
    public static final int PROT_READ = 1;
    public static final int PROT_WRITE = 2;
    public static final int MAP_SHARED = 1;
    public static final int LOCK_SH = 1;
    public static final int LOCK_EX = 2;
    public static final int LOCK_NB = 4;
    public static final int LOCK_UN = 8;

    private static final SymbolLookup LIBC = Native.LINKER.defaultLookup();

    private static final MethodHandle SOCKET = Native.downcall(LIBC, "socket",
            FunctionDescriptor.of(C_INT, C_INT, C_INT, C_INT));
    private static final MethodHandle BIND = Native.downcall(LIBC, "bind",
            FunctionDescriptor.of(C_INT, C_INT, C_PTR, C_INT));
    private static final MethodHandle LISTEN = Native.downcall(LIBC, "listen",
            FunctionDescriptor.of(C_INT, C_INT, C_INT));
    private static final MethodHandle ACCEPT4 = Native.downcall(LIBC, "accept4",
            FunctionDescriptor.of(C_INT, C_INT, C_PTR, C_PTR, C_INT));
    private static final MethodHandle CONNECT = Native.downcall(LIBC, "connect",
            FunctionDescriptor.of(C_INT, C_INT, C_PTR, C_INT));
    private static final MethodHandle GETSOCKNAME = Native.downcall(LIBC, "getsockname",
            FunctionDescriptor.of(C_INT, C_INT, C_PTR, C_PTR));
    private static final MethodHandle GETPEERNAME = Native.downcall(LIBC, "getpeername",
            FunctionDescriptor.of(C_INT, C_INT, C_PTR, C_PTR));
    private static final MethodHandle SETSOCKOPT = Native.downcall(LIBC, "setsockopt",
            FunctionDescriptor.of(C_INT, C_INT, C_INT, C_INT, C_PTR, C_INT));
    private static final MethodHandle GETSOCKOPT = Native.downcall(LIBC, "getsockopt",
            FunctionDescriptor.of(C_INT, C_INT, C_INT, C_INT, C_PTR, C_PTR));
    private static final MethodHandle RECV = Native.downcall(LIBC, "recv",
            FunctionDescriptor.of(C_LONG, C_INT, C_PTR, C_LONG, C_INT));
    private static final MethodHandle SEND = Native.downcall(LIBC, "send",
            FunctionDescriptor.of(C_LONG, C_INT, C_PTR, C_LONG, C_INT));
    /*
     * Heap arrays go to recv/send without a copy: the socket is non-blocking, so the call is
     * short, which is what a critical downcall with heap access requires.
     */
    private static final MethodHandle RECV_HEAP = Native.downcall(LIBC, "recv",
            FunctionDescriptor.of(C_LONG, C_INT, C_PTR, C_LONG, C_INT), Linker.Option.critical(true));
    private static final MethodHandle SENDMSG = Native.downcall(LIBC, "sendmsg",
            FunctionDescriptor.of(C_LONG, C_INT, C_PTR, C_INT));
    private static final MethodHandle SEND_HEAP = Native.downcall(LIBC, "send",
            FunctionDescriptor.of(C_LONG, C_INT, C_PTR, C_LONG, C_INT), Linker.Option.critical(true));
    private static final MethodHandle SHUTDOWN = Native.downcall(LIBC, "shutdown",
            FunctionDescriptor.of(C_INT, C_INT, C_INT));
    private static final MethodHandle CLOSE = Native.downcall(LIBC, "close",
            FunctionDescriptor.of(C_INT, C_INT));
    private static final MethodHandle POLL = Native.downcall(LIBC, "poll",
            FunctionDescriptor.of(C_INT, C_PTR, C_LONG, C_INT));
    private static final MethodHandle IOCTL = Native.downcall(LIBC, "ioctl",
            FunctionDescriptor.of(C_INT, C_INT, C_LONG, C_PTR), Linker.Option.firstVariadicArg(2));
    private static final MethodHandle READ = Native.downcall(LIBC, "read",
            FunctionDescriptor.of(C_LONG, C_INT, C_PTR, C_LONG));
    private static final MethodHandle WRITE = Native.downcall(LIBC, "write",
            FunctionDescriptor.of(C_LONG, C_INT, C_PTR, C_LONG));
    private static final MethodHandle OPEN = Native.downcall(LIBC, "open",
            FunctionDescriptor.of(C_INT, C_PTR, C_INT, C_INT), Linker.Option.firstVariadicArg(2));
    private static final MethodHandle OPENAT = Native.downcall(LIBC, "openat",
            FunctionDescriptor.of(C_INT, C_INT, C_PTR, C_INT, C_INT), Linker.Option.firstVariadicArg(3));
    private static final MethodHandle MKDIRAT = Native.downcall(LIBC, "mkdirat",
            FunctionDescriptor.of(C_INT, C_INT, C_PTR, C_INT));
    private static final MethodHandle FSTATFS = Native.downcall(LIBC, "fstatfs",
            FunctionDescriptor.of(C_INT, C_INT, C_PTR));
    private static final MethodHandle GETEUID = Native.plain(LIBC, "geteuid",
            FunctionDescriptor.of(C_INT));
    private static final MethodHandle FLOCK = Native.downcall(LIBC, "flock",
            FunctionDescriptor.of(C_INT, C_INT, C_INT));
    private static final MethodHandle MMAP = Native.downcall(LIBC, "mmap",
            FunctionDescriptor.of(C_PTR, C_PTR, C_LONG, C_INT, C_INT, C_INT, C_LONG));
    private static final MethodHandle MUNMAP = Native.downcall(LIBC, "munmap",
            FunctionDescriptor.of(C_INT, C_PTR, C_LONG));

    // Linked when first used, each group by its holder's initialisation (a static final in an
    // initialised class is as fast to call as any): every downcall of a new shape linked costs
    // the JVM memory, and most processes never call these.

    /** Epoll and eventfd: only a SockmapSelectorProvider selector uses them. */
    private static final class Selecting {
        static final MethodHandle EPOLL_CREATE1 = Native.downcall(LIBC, "epoll_create1",
                FunctionDescriptor.of(C_INT, C_INT));
        static final MethodHandle EPOLL_CTL = Native.downcall(LIBC, "epoll_ctl",
                FunctionDescriptor.of(C_INT, C_INT, C_INT, C_INT, C_PTR));
        static final MethodHandle EPOLL_WAIT = Native.downcall(LIBC, "epoll_wait",
                FunctionDescriptor.of(C_INT, C_INT, C_PTR, C_INT, C_INT));
        static final MethodHandle EVENTFD = Native.downcall(LIBC, "eventfd",
                FunctionDescriptor.of(C_INT, C_INT, C_INT));
    }

    /** Mount: only mounting bpffs. */
    private static final class Mounting {
        static final MethodHandle MOUNT = Native.downcall(LIBC, "mount",
                FunctionDescriptor.of(C_INT, C_PTR, C_PTR, C_PTR, C_LONG, C_PTR));
    }

    /** If_nametoindex: only XDP attachment. */
    private static final class Interfaces {
        static final MethodHandle IF_NAMETOINDEX = Native.downcall(LIBC, "if_nametoindex",
                FunctionDescriptor.of(C_INT, C_PTR));
    }

    /** Strerror: only an error message. */
    private static final class Errors {
        static final MethodHandle STRERROR = Native.plain(LIBC, "strerror",
                FunctionDescriptor.of(C_PTR, C_INT));
    }

    /** Setns: only entering another network namespace. */
    private static final class Namespaces {
        static final MethodHandle SETNS = Native.downcall(LIBC, "setns",
                FunctionDescriptor.of(C_INT, C_INT, C_INT));
    }

    private LibC() {
    }

    private static int check(String op, int res, MemorySegment state) throws NativeIOException {
        if (res < 0) {
            throw new NativeIOException(op, Native.errno(state));
        }
        return res;
    }

    private static long check(String op, long res, MemorySegment state) throws NativeIOException {
        if (res < 0) {
            throw new NativeIOException(op, Native.errno(state));
        }
        return res;
    }

    public static String strerror(int errno) {
        try {
            MemorySegment s = (MemorySegment) Errors.STRERROR.invokeExact(errno);
            return s.reinterpret(256).getString(0);
        } catch (Throwable t) {
            return "errno " + errno;
        }
    }

    public static int socket(int family, int type, int protocol) throws NativeIOException {
        MemorySegment st = Native.callState();
        try {
            return check("socket", (int) SOCKET.invokeExact(st, family, type, protocol), st);
        } catch (NativeIOException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public static void bind(int fd, MemorySegment addr) throws NativeIOException {
        MemorySegment st = Native.callState();
        try {
            check("bind", (int) BIND.invokeExact(st, fd, addr, (int) addr.byteSize()), st);
        } catch (NativeIOException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public static void listen(int fd, int backlog) throws NativeIOException {
        MemorySegment st = Native.callState();
        try {
            check("listen", (int) LISTEN.invokeExact(st, fd, backlog), st);
        } catch (NativeIOException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** accept4 with SOCK_NONBLOCK|SOCK_CLOEXEC; {@code -errno} on failure. */
    public static int tryAccept(int fd) {
        MemorySegment st = Native.callState();
        try {
            int res = (int) ACCEPT4.invokeExact(st, fd, MemorySegment.NULL, MemorySegment.NULL,
                    SOCK_NONBLOCK | SOCK_CLOEXEC);
            return res < 0 ? -Native.errno(st) : res;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** connect; 0 on success, {@code -errno} on failure. */
    public static int tryConnect(int fd, MemorySegment addr) {
        MemorySegment st = Native.callState();
        try {
            int res = (int) CONNECT.invokeExact(st, fd, addr, (int) addr.byteSize());
            return res < 0 ? -Native.errno(st) : res;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** Fills {@code addr} (at least 28 bytes) and returns the address length. */
    public static int getsockname(int fd, MemorySegment addr) throws NativeIOException {
        return sockName("getsockname", GETSOCKNAME, fd, addr);
    }

    public static int getpeername(int fd, MemorySegment addr) throws NativeIOException {
        return sockName("getpeername", GETPEERNAME, fd, addr);
    }

    private static int sockName(String op, MethodHandle mh, int fd, MemorySegment addr)
            throws NativeIOException {
        MemorySegment st = Native.callState();
        try {
            MemorySegment len = Native.scratch();
            len.set(ValueLayout.JAVA_INT, 0, (int) addr.byteSize());
            check(op, (int) mh.invokeExact(st, fd, addr, len), st);
            return len.get(ValueLayout.JAVA_INT, 0);
        } catch (NativeIOException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public static void setsockoptInt(int fd, int level, int name, int value) throws NativeIOException {
        MemorySegment st = Native.callState();
        try {
            MemorySegment v = Native.scratch();
            v.set(ValueLayout.JAVA_INT, 0, value);
            check("setsockopt(" + level + "," + name + ")",
                    (int) SETSOCKOPT.invokeExact(st, fd, level, name, v, 4), st);
        } catch (NativeIOException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public static void setsockopt(int fd, int level, int name, MemorySegment value) throws NativeIOException {
        MemorySegment st = Native.callState();
        try {
            check("setsockopt(" + level + "," + name + ")",
                    (int) SETSOCKOPT.invokeExact(st, fd, level, name, value, (int) value.byteSize()), st);
        } catch (NativeIOException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** getsockopt into {@code out}; returns the length the kernel wrote. */
    public static int getsockopt(int fd, int level, int name, MemorySegment out) throws NativeIOException {
        MemorySegment st = Native.callState();
        try {
            MemorySegment len = Native.scratch().asSlice(8, 4);
            len.set(ValueLayout.JAVA_INT, 0, (int) out.byteSize());
            check("getsockopt(" + level + "," + name + ")",
                    (int) GETSOCKOPT.invokeExact(st, fd, level, name, out, len), st);
            return len.get(ValueLayout.JAVA_INT, 0);
        } catch (NativeIOException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public static int getsockoptInt(int fd, int level, int name) throws NativeIOException {
        return (int) getsockopt(fd, level, name, 4);
    }

    public static long getsockoptLong(int fd, int level, int name) throws NativeIOException {
        return getsockopt(fd, level, name, 8);
    }

    private static long getsockopt(int fd, int level, int name, int size) throws NativeIOException {
        MemorySegment st = Native.callState();
        try {
            MemorySegment scratch = Native.scratch();
            MemorySegment v = scratch.asSlice(0, 8);
            MemorySegment len = scratch.asSlice(8, 4);
            len.set(ValueLayout.JAVA_INT, 0, size);
            check("getsockopt(" + level + "," + name + ")",
                    (int) GETSOCKOPT.invokeExact(st, fd, level, name, v, len), st);
            return size == 8 ? v.get(ValueLayout.JAVA_LONG, 0) : v.get(ValueLayout.JAVA_INT, 0);
        } catch (NativeIOException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /**
     * recv into native or heap memory; bytes read, 0 at end of stream, {@code -errno} on
     * failure. Native memory may block on a blocking fd; heap memory never does (MSG_DONTWAIT:
     * a critical downcall must be short).
     */
    public static long tryRecv(int fd, MemorySegment buf, int flags) {
        MemorySegment st = Native.callState();
        try {
            long res = buf.isNative()
                    ? (long) RECV.invokeExact(st, fd, buf, buf.byteSize(), flags)
                    : (long) RECV_HEAP.invokeExact(st, fd, buf, buf.byteSize(), flags | MSG_DONTWAIT);
            return res < 0 ? -Native.errno(st) : res;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /**
     * send from native or heap memory, with MSG_NOSIGNAL; bytes sent or {@code -errno}. As
     * with {@link #tryRecv}, only native memory may block.
     */
    public static long trySend(int fd, MemorySegment buf, int flags) {
        MemorySegment st = Native.callState();
        try {
            long res = buf.isNative()
                    ? (long) SEND.invokeExact(st, fd, buf, buf.byteSize(), flags | MSG_NOSIGNAL)
                    : (long) SEND_HEAP.invokeExact(st, fd, buf, buf.byteSize(), flags | MSG_NOSIGNAL | MSG_DONTWAIT);
            return res < 0 ? -Native.errno(st) : res;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** The most iovecs one sendmsg takes (IOV_MAX). */
    public static final int IOV_MAX = 1024;
    /** sizeof(struct iovec). */
    public static final long IOVEC_SIZE = NativeLayouts.IOVEC.byteSize();
    /** sizeof(struct msghdr). */
    public static final long MSGHDR_SIZE = NativeLayouts.MSGHDR.byteSize();

    /**
     * sendmsg of {@code count} iovecs (native memory only) in one call: one message for the
     * kernel, so one verdict and one redirected message for the whole gather. {@code msghdr} is
     * the caller's zeroed {@link #MSGHDR_SIZE}-byte scratch (no name, no control). Returns the
     * bytes sent or {@code -errno}.
     */
    public static long trySendmsg(int fd, MemorySegment msghdr, MemorySegment iovecs, int count, int flags) {
        MemorySegment st = Native.callState();
        try {
            msghdr.set(ValueLayout.ADDRESS, NativeLayouts.MSGHDR_IOV, iovecs);
            msghdr.set(ValueLayout.JAVA_LONG, NativeLayouts.MSGHDR_IOVLEN, count);
            long res = (long) SENDMSG.invokeExact(st, fd, msghdr, flags | MSG_NOSIGNAL);
            return res < 0 ? -Native.errno(st) : res;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** shutdown; ENOTCONN is not an error here (the peer may be gone already). */
    public static void shutdown(int fd, int how) throws NativeIOException {
        MemorySegment st = Native.callState();
        try {
            int res = (int) SHUTDOWN.invokeExact(st, fd, how);
            if (res < 0 && Native.errno(st) != Errno.ENOTCONN) {
                throw new NativeIOException("shutdown", Native.errno(st));
            }
        } catch (NativeIOException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** close, ignoring errors (there is nothing a caller can do about them). */
    public static void close(int fd) {
        if (fd < 0) {
            return;
        }
        MemorySegment st = Native.callState();
        try {
            int res = (int) CLOSE.invokeExact(st, fd);
            assert res == 0 || Native.errno(st) != Errno.EBADF : "close of a bad fd " + fd;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** poll one fd; the returned revents, 0 on timeout, {@code -errno} on failure. */
    public static int tryPoll(int fd, short events, int timeoutMillis) {
        MemorySegment st = Native.callState();
        try {
            MemorySegment pfd = Native.scratch().asSlice(0, NativeLayouts.POLLFD.byteSize());
            pfd.set(ValueLayout.JAVA_INT, NativeLayouts.POLLFD_FD, fd);
            pfd.set(ValueLayout.JAVA_SHORT, NativeLayouts.POLLFD_EVENTS, events);
            int res = (int) POLL.invokeExact(st, pfd, 1L, timeoutMillis);
            if (res < 0) {
                return -Native.errno(st);
            }
            return res == 0 ? 0 : pfd.get(ValueLayout.JAVA_SHORT, NativeLayouts.POLLFD_REVENTS) & 0xffff;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** FIONREAD: bytes the next read would return. */
    public static int fionread(int fd) throws NativeIOException {
        MemorySegment st = Native.callState();
        try {
            MemorySegment v = Native.scratch();
            check("ioctl(FIONREAD)", (int) IOCTL.invokeExact(st, fd, FIONREAD, v), st);
            return v.get(ValueLayout.JAVA_INT, 0);
        } catch (NativeIOException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** FIONBIO: switches O_NONBLOCK on or off. */
    public static void setNonBlocking(int fd, boolean on) throws NativeIOException {
        MemorySegment st = Native.callState();
        try {
            MemorySegment v = Native.scratch();
            v.set(ValueLayout.JAVA_INT, 0, on ? 1 : 0);
            check("ioctl(FIONBIO)", (int) IOCTL.invokeExact(st, fd, FIONBIO, v), st);
        } catch (NativeIOException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public static int epollCreate() throws NativeIOException {
        MemorySegment st = Native.callState();
        try {
            return check("epoll_create1", (int) Selecting.EPOLL_CREATE1.invokeExact(st, EPOLL_CLOEXEC), st);
        } catch (NativeIOException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** epoll_ctl with data = fd; {@code -errno} on failure. */
    public static int tryEpollCtl(int epfd, int op, int fd, int events) {
        MemorySegment st = Native.callState();
        try {
            MemorySegment ev = Native.scratch();
            EpollEvent.set(ev, 0, events, fd);
            int res = (int) Selecting.EPOLL_CTL.invokeExact(st, epfd, op, fd, ev);
            return res < 0 ? -Native.errno(st) : 0;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** epoll_wait into {@code events} (an array of {@link EpollEvent}); count or {@code -errno}. */
    public static int tryEpollWait(int epfd, MemorySegment events, int timeoutMillis) {
        MemorySegment st = Native.callState();
        try {
            int res = (int) Selecting.EPOLL_WAIT.invokeExact(st, epfd, events,
                    (int) (events.byteSize() / EpollEvent.SIZE), timeoutMillis);
            return res < 0 ? -Native.errno(st) : res;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public static int eventfd() throws NativeIOException {
        MemorySegment st = Native.callState();
        try {
            return check("eventfd", (int) Selecting.EVENTFD.invokeExact(st, 0, EFD_NONBLOCK | EFD_CLOEXEC), st);
        } catch (NativeIOException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** read; bytes or {@code -errno}. */
    public static long tryRead(int fd, MemorySegment buf) {
        MemorySegment st = Native.callState();
        try {
            long res = (long) READ.invokeExact(st, fd, buf, buf.byteSize());
            return res < 0 ? -Native.errno(st) : res;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** write; bytes or {@code -errno}. */
    public static long tryWrite(int fd, MemorySegment buf) {
        MemorySegment st = Native.callState();
        try {
            long res = (long) WRITE.invokeExact(st, fd, buf, buf.byteSize());
            return res < 0 ? -Native.errno(st) : res;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public static int open(String path, int flags, int mode) throws NativeIOException {
        MemorySegment st = Native.callState();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment p = arena.allocateFrom(path);
            int res = (int) OPEN.invokeExact(st, p, flags | O_CLOEXEC, mode);
            if (res < 0) {
                throw new NativeIOException("open", Native.errno(st), path);
            }
            return res;
        } catch (NativeIOException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** openat(2) of one path component below {@code dirFd}: the fd, or {@code -errno}. */
    public static int tryOpenat(int dirFd, String name, int flags) {
        MemorySegment st = Native.callState();
        try (Arena arena = Arena.ofConfined()) {
            int res = (int) OPENAT.invokeExact(st, dirFd, arena.allocateFrom(name), flags | O_CLOEXEC, 0);
            return res < 0 ? -Native.errno(st) : res;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** mkdirat(2): 0, or {@code -errno}. */
    public static int tryMkdirat(int dirFd, String name, int mode) {
        MemorySegment st = Native.callState();
        try (Arena arena = Arena.ofConfined()) {
            int res = (int) MKDIRAT.invokeExact(st, dirFd, arena.allocateFrom(name), mode);
            return res < 0 ? -Native.errno(st) : 0;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /**
     * The file system type ({@code f_type}) of what {@code fd} refers to. {@code f_type} is the
     * first field of {@code struct statfs}, a long, on every 64-bit Linux architecture; the struct
     * is 120 bytes on x86_64 and aarch64.
     */
    public static long fstatfsType(int fd) throws NativeIOException {
        MemorySegment st = Native.callState();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment buf = arena.allocate(256, 8);
            int res = (int) FSTATFS.invokeExact(st, fd, buf);
            if (res < 0) {
                throw new NativeIOException("fstatfs", Native.errno(st));
            }
            return buf.get(ValueLayout.JAVA_LONG, 0) & 0xffffffffL;
        } catch (NativeIOException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** CLONE_NEWNET: setns's namespace type for a network namespace. */
    public static final int CLONE_NEWNET = 0x40000000;

    /**
     * setns(2): moves the calling thread (only it) into the namespace {@code fd} refers to
     * (a {@code /proc/PID/ns/net} file). Needs CAP_SYS_ADMIN over that namespace.
     */
    public static void setns(int fd, int nstype) throws NativeIOException {
        MemorySegment st = Native.callState();
        try {
            int res = (int) Namespaces.SETNS.invokeExact(st, fd, nstype);
            if (res < 0) {
                throw new NativeIOException("setns", Native.errno(st));
            }
        } catch (NativeIOException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** This process's effective user id. */
    public static int geteuid() {
        try {
            return (int) GETEUID.invokeExact();
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** flock; 0, or {@code -errno} (EAGAIN when LOCK_NB and held elsewhere). */
    public static int tryFlock(int fd, int op) {
        MemorySegment st = Native.callState();
        try {
            int res = (int) FLOCK.invokeExact(st, fd, op);
            return res < 0 ? -Native.errno(st) : 0;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /**
     * mmap(NULL, length, prot, MAP_SHARED, fd, 0), as a segment of that length owned by
     * {@code arena}: closing the arena unmaps it.
     */
    public static MemorySegment mmapShared(int fd, long length, int prot, Arena arena) throws NativeIOException {
        MemorySegment st = Native.callState();
        try {
            MemorySegment p = (MemorySegment) MMAP.invokeExact(st, MemorySegment.NULL, length, prot, MAP_SHARED, fd, 0L);
            if (p.address() == -1L) {
                throw new NativeIOException("mmap", Native.errno(st), length + " bytes of fd " + fd);
            }
            return p.reinterpret(length, arena, LibC::munmap);
        } catch (NativeIOException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public static void munmap(MemorySegment mapping) {
        MemorySegment st = Native.callState();
        try {
            int r = (int) MUNMAP.invokeExact(st, mapping, mapping.byteSize());
            assert r == 0 : "munmap failed";
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** The interface's index in this network namespace, 0 when there is no such interface. */
    public static int ifNameToIndex(String name) {
        MemorySegment st = Native.callState();
        try (Arena arena = Arena.ofConfined()) {
            return (int) Interfaces.IF_NAMETOINDEX.invokeExact(st, arena.allocateFrom(name));
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public static void mount(String source, String target, String fstype) throws NativeIOException {
        MemorySegment st = Native.callState();
        try (Arena arena = Arena.ofConfined()) {
            int res = (int) Mounting.MOUNT.invokeExact(st, arena.allocateFrom(source), arena.allocateFrom(target),
                    arena.allocateFrom(fstype), 0L, MemorySegment.NULL);
            if (res < 0) {
                throw new NativeIOException("mount -t " + fstype, Native.errno(st), target);
            }
        } catch (NativeIOException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }
}
