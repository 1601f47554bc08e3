package io.github.sockmap4j.linux.ffi;

import static io.github.sockmap4j.linux.ffi.Native.C_INT;
import static io.github.sockmap4j.linux.ffi.Native.C_PTR;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;

/**
 * epoll and eventfd, as {@link LibC} does its calls: only a selector of
 * {@code SockmapSelectorProvider} and the kernel probe use them, so they are linked (each downcall
 * of a new shape costs the JVM memory) when this class is first used.
 *
 * <p><b>Note:</b> this class is threadsafe; errno is captured per thread.
 */
@SuppressWarnings("restricted")
public final class Epoll {
    private static final SymbolLookup LIBC = Native.LINKER.defaultLookup();

    private static final MethodHandle EPOLL_CREATE1 = Native.downcall(LIBC, "epoll_create1",
            FunctionDescriptor.of(C_INT, C_INT));
    private static final MethodHandle EPOLL_CTL = Native.downcall(LIBC, "epoll_ctl",
            FunctionDescriptor.of(C_INT, C_INT, C_INT, C_INT, C_PTR));
    private static final MethodHandle EPOLL_WAIT = Native.downcall(LIBC, "epoll_wait",
            FunctionDescriptor.of(C_INT, C_INT, C_PTR, C_INT, C_INT));
    private static final MethodHandle EVENTFD = Native.downcall(LIBC, "eventfd",
            FunctionDescriptor.of(C_INT, C_INT, C_INT));
    /** write(2) without errno capture: a signal whose failure nobody could act on. */
    private static final MethodHandle WRITE = Native.plain(LIBC, "write",
            FunctionDescriptor.of(Native.C_LONG, C_INT, C_PTR, Native.C_LONG));
    /** The 8 bytes an eventfd is raised by: 1. Only ever read. */
    private static final MemorySegment ONE = java.lang.foreign.Arena.global().allocate(8, 8);

    static {
        ONE.set(java.lang.foreign.ValueLayout.JAVA_LONG, 0, 1L);
    }

    private Epoll() {
    }

    public static int epollCreate() throws NativeIOException {
        MemorySegment st = Native.callState();
        int res;
        try {
            res = LibC.result((int) EPOLL_CREATE1.invokeExact(st, Linux.EPOLL_CLOEXEC), st);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
        return Errno.ok("epoll_create1", res);
    }

    /** epoll_ctl with data = fd; {@code -errno} on failure. */
    public static int tryEpollCtl(int epfd, int op, int fd, int events) {
        MemorySegment st = Native.callState();
        try {
            MemorySegment ev = Native.scratch();
            EpollEvent.set(ev, 0, events, fd);
            return Math.min(0, LibC.result((int) EPOLL_CTL.invokeExact(st, epfd, op, fd, ev), st));
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** epoll_wait into {@code events} (an array of {@link EpollEvent}); count or {@code -errno}. */
    public static int tryEpollWait(int epfd, MemorySegment events, int timeoutMillis) {
        MemorySegment st = Native.callState();
        try {
            return LibC.result((int) EPOLL_WAIT.invokeExact(st, epfd, events,
                    (int) (events.byteSize() / EpollEvent.SIZE), timeoutMillis), st);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /**
     * Raises the eventfd {@code fd}'s count by one, waking whoever waits on it (a poll, an epoll
     * set, a read): 0, or -1 where it failed (a count at its maximum of 2^64 - 2, never reached by
     * raises of one; a descriptor that is not open).
     */
    public static int signal(int fd) {
        try {
            return (long) WRITE.invokeExact(fd, ONE, 8L) == 8 ? 0 : -1;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public static int eventfd() throws NativeIOException {
        MemorySegment st = Native.callState();
        int res;
        try {
            res = LibC.result((int) EVENTFD.invokeExact(st, 0, Linux.EFD_NONBLOCK | Linux.EFD_CLOEXEC), st);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
        return Errno.ok("eventfd", res);
    }
}
