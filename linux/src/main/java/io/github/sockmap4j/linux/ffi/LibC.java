package io.github.sockmap4j.linux.ffi;

import static io.github.sockmap4j.linux.ffi.Linux.MSG_DONTWAIT;
import static io.github.sockmap4j.linux.ffi.Linux.MSG_NOSIGNAL;
import static io.github.sockmap4j.linux.ffi.Native.C_INT;
import static io.github.sockmap4j.linux.ffi.Native.C_LONG;
import static io.github.sockmap4j.linux.ffi.Native.C_PTR;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * Every C library call sockmap4j makes. Each {@code try*} call returns the call's result, or
 * {@code -errno} when it failed, for callers that handle EAGAIN and friends; each throwing
 * wrapper is that call through {@link Errno#ok}, which throws {@link NativeIOException} naming
 * the call and the errno. errno is read only when a call failed. Constants: {@link Linux}.
 *
 * <p><b>Note:</b> this class is threadsafe; errno is captured per thread.
 */
@SuppressWarnings("restricted")
public final class LibC {
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
    static final MethodHandle SENDMSG = Native.downcall(LIBC, "sendmsg",
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

    /** Strerror: only an error message. */
    private static final class Errors {
        static final MethodHandle STRERROR = Native.plain(LIBC, "strerror",
                FunctionDescriptor.of(C_PTR, C_INT));
    }

    private LibC() {
    }

    /** {@code res}, or {@code -errno} of the call whose call state is {@code st} when it failed. */
    static int result(int res, MemorySegment st) {
        return res < 0 ? -Native.errno(st) : res;
    }

    static long result(long res, MemorySegment st) {
        return res < 0 ? -Native.errno(st) : res;
    }

    public static String strerror(int errno) {
        try {
            MemorySegment s = (MemorySegment) Errors.STRERROR.invokeExact(errno);
            return s.reinterpret(256).getString(0);
        } catch (Throwable t) {
            return "errno " + errno;
        }
    }

    public static int trySocket(int family, int type, int protocol) {
        MemorySegment st = Native.callState();
        try {
            return result((int) SOCKET.invokeExact(st, family, type, protocol), st);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public static int socket(int family, int type, int protocol) throws NativeIOException {
        return Errno.ok("socket", trySocket(family, type, protocol));
    }

    public static int tryBind(int fd, MemorySegment addr) {
        MemorySegment st = Native.callState();
        try {
            return result((int) BIND.invokeExact(st, fd, addr, (int) addr.byteSize()), st);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public static void bind(int fd, MemorySegment addr) throws NativeIOException {
        Errno.ok("bind", tryBind(fd, addr));
    }

    public static int tryListen(int fd, int backlog) {
        MemorySegment st = Native.callState();
        try {
            return result((int) LISTEN.invokeExact(st, fd, backlog), st);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public static void listen(int fd, int backlog) throws NativeIOException {
        Errno.ok("listen", tryListen(fd, backlog));
    }

    /** accept4 with SOCK_NONBLOCK|SOCK_CLOEXEC; {@code -errno} on failure. */
    public static int tryAccept(int fd) {
        MemorySegment st = Native.callState();
        try {
            return result((int) ACCEPT4.invokeExact(st, fd, MemorySegment.NULL, MemorySegment.NULL,
                    Linux.SOCK_NONBLOCK | Linux.SOCK_CLOEXEC), st);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** connect; 0 on success, {@code -errno} on failure. */
    public static int tryConnect(int fd, MemorySegment addr) {
        MemorySegment st = Native.callState();
        try {
            return result((int) CONNECT.invokeExact(st, fd, addr, (int) addr.byteSize()), st);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** Fills {@code addr} (at least 28 bytes) and returns the address length. */
    public static int getsockname(int fd, MemorySegment addr) throws NativeIOException {
        return Errno.ok("getsockname", trySockName(GETSOCKNAME, fd, addr));
    }

    public static int getpeername(int fd, MemorySegment addr) throws NativeIOException {
        return Errno.ok("getpeername", trySockName(GETPEERNAME, fd, addr));
    }

    private static int trySockName(MethodHandle mh, int fd, MemorySegment addr) {
        MemorySegment st = Native.callState();
        try {
            MemorySegment len = Native.scratch();
            len.set(ValueLayout.JAVA_INT, 0, (int) addr.byteSize());
            int res = result((int) mh.invokeExact(st, fd, addr, len), st);
            return res < 0 ? res : len.get(ValueLayout.JAVA_INT, 0);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public static int trySetsockopt(int fd, int level, int name, MemorySegment value) {
        MemorySegment st = Native.callState();
        try {
            return result((int) SETSOCKOPT.invokeExact(st, fd, level, name, value, (int) value.byteSize()), st);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public static void setsockopt(int fd, int level, int name, MemorySegment value) throws NativeIOException {
        sockopt("setsockopt", trySetsockopt(fd, level, name, value), level, name);
    }

    public static void setsockoptInt(int fd, int level, int name, int value) throws NativeIOException {
        MemorySegment v = Native.scratch().asSlice(0, 4);
        v.set(ValueLayout.JAVA_INT, 0, value);
        setsockopt(fd, level, name, v);
    }

    /** getsockopt into {@code out}: the length the kernel wrote, or {@code -errno}. */
    public static int tryGetsockopt(int fd, int level, int name, MemorySegment out) {
        MemorySegment st = Native.callState();
        try {
            MemorySegment len = Native.scratch().asSlice(Native.SCRATCH_BYTES - 4, 4);
            len.set(ValueLayout.JAVA_INT, 0, (int) out.byteSize());
            int res = result((int) GETSOCKOPT.invokeExact(st, fd, level, name, out, len), st);
            return res < 0 ? res : len.get(ValueLayout.JAVA_INT, 0);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** getsockopt into {@code out}; returns the length the kernel wrote. */
    public static int getsockopt(int fd, int level, int name, MemorySegment out) throws NativeIOException {
        return sockopt("getsockopt", tryGetsockopt(fd, level, name, out), level, name);
    }

    public static int getsockoptInt(int fd, int level, int name) throws NativeIOException {
        MemorySegment v = Native.scratch().asSlice(0, 4);
        getsockopt(fd, level, name, v);
        return v.get(ValueLayout.JAVA_INT, 0);
    }

    public static long getsockoptLong(int fd, int level, int name) throws NativeIOException {
        MemorySegment v = Native.scratch().asSlice(0, 8);
        getsockopt(fd, level, name, v);
        return v.get(ValueLayout.JAVA_LONG, 0);
    }

    private static int sockopt(String op, int res, int level, int name) throws NativeIOException {
        return res < 0 ? Errno.ok(op, res, "level " + level + ", option " + name) : res;
    }

    /**
     * recv into native or heap memory; bytes read, 0 at end of stream, {@code -errno} on
     * failure. Native memory may block on a blocking fd; heap memory never does (MSG_DONTWAIT:
     * a critical downcall must be short).
     */
    public static long tryRecv(int fd, MemorySegment buf, int flags) {
        MemorySegment st = Native.callState();
        try {
            return result(buf.isNative()
                    ? (long) RECV.invokeExact(st, fd, buf, buf.byteSize(), flags)
                    : (long) RECV_HEAP.invokeExact(st, fd, buf, buf.byteSize(), flags | MSG_DONTWAIT), st);
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
            return result(buf.isNative()
                    ? (long) SEND.invokeExact(st, fd, buf, buf.byteSize(), flags | MSG_NOSIGNAL)
                    : (long) SEND_HEAP.invokeExact(st, fd, buf, buf.byteSize(), flags | MSG_NOSIGNAL | MSG_DONTWAIT),
                    st);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

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
            return result((long) SENDMSG.invokeExact(st, fd, msghdr, flags | MSG_NOSIGNAL), st);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public static int tryShutdown(int fd, int how) {
        MemorySegment st = Native.callState();
        try {
            return result((int) SHUTDOWN.invokeExact(st, fd, how), st);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** shutdown; ENOTCONN is not an error here (the peer may be gone already). */
    public static void shutdown(int fd, int how) throws NativeIOException {
        int res = tryShutdown(fd, how);
        Errno.ok("shutdown", res == -Errno.ENOTCONN ? 0 : res);
    }

    /** close, ignoring errors (there is nothing a caller can do about them). */
    public static void close(int fd) {
        if (fd < 0) {
            return;
        }
        MemorySegment st = Native.callState();
        try {
            int res = result((int) CLOSE.invokeExact(st, fd), st);
            assert res != -Errno.EBADF : "close of a bad fd " + fd;
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
            int res = result((int) POLL.invokeExact(st, pfd, 1L, timeoutMillis), st);
            return res <= 0 ? res : pfd.get(ValueLayout.JAVA_SHORT, NativeLayouts.POLLFD_REVENTS) & 0xffff;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** ioctl with an int argument in and out: the int after the call, or {@code -errno}. */
    private static long tryIoctlInt(int fd, long request, int in) {
        MemorySegment st = Native.callState();
        try {
            MemorySegment v = Native.scratch();
            v.set(ValueLayout.JAVA_INT, 0, in);
            int res = result((int) IOCTL.invokeExact(st, fd, request, v), st);
            return res < 0 ? res : v.get(ValueLayout.JAVA_INT, 0);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** ioctl without an argument: its result (a new descriptor, for NS_GET_PARENT), or {@code -errno}. */
    public static int tryIoctlNoArg(int fd, long request) {
        MemorySegment st = Native.callState();
        try {
            return result((int) IOCTL.invokeExact(st, fd, request, MemorySegment.NULL), st);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** ioctl that writes an int (NS_GET_OWNER_UID): that int. */
    public static int ioctlIntOut(String operation, int fd, long request) throws NativeIOException {
        return (int) Errno.ok(operation, tryIoctlInt(fd, request, 0));
    }

    /** FIONREAD: bytes the next read would return. */
    public static int fionread(int fd) throws NativeIOException {
        return (int) Errno.ok("ioctl(FIONREAD)", tryIoctlInt(fd, Linux.FIONREAD, 0));
    }

    /** FIONBIO: switches O_NONBLOCK on or off. */
    public static void setNonBlocking(int fd, boolean on) throws NativeIOException {
        Errno.ok("ioctl(FIONBIO)", tryIoctlInt(fd, Linux.FIONBIO, on ? 1 : 0));
    }

    /** read; bytes or {@code -errno}. */
    public static long tryRead(int fd, MemorySegment buf) {
        MemorySegment st = Native.callState();
        try {
            return result((long) READ.invokeExact(st, fd, buf, buf.byteSize()), st);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** write; bytes or {@code -errno}. */
    public static long tryWrite(int fd, MemorySegment buf) {
        MemorySegment st = Native.callState();
        try {
            return result((long) WRITE.invokeExact(st, fd, buf, buf.byteSize()), st);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }
}
