package io.github.sockmap4j.linux.ffi;

import static io.github.sockmap4j.linux.ffi.Native.C_INT;
import static io.github.sockmap4j.linux.ffi.Native.C_LONG;
import static io.github.sockmap4j.linux.ffi.Native.C_PTR;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * A descriptor handed to another process over a Unix stream socket ({@code SCM_RIGHTS}): sent
 * with a message's bytes, received close-on-exec. A receiver takes at most a few descriptors a
 * message and closes every one it did not ask for, so a peer that sends many leaks none here.
 */
public final class FdPassing {
    private static final SymbolLookup LIBC = Native.LINKER.defaultLookup();
    private static final MethodHandle RECVMSG = Native.downcall(LIBC, "recvmsg",
            FunctionDescriptor.of(C_LONG, C_INT, C_PTR, C_INT));
    /** sizeof(struct cmsghdr): size_t len, int level, int type. */
    private static final long CMSG_HEADER = 16;
    /** The most descriptors one receive takes in; more are closed by the kernel (MSG_CTRUNC). */
    public static final int MAX_FDS = 8;
    private static final long CONTROL_BYTES = CMSG_HEADER + 4L * MAX_FDS;

    private FdPassing() {
    }

    private static MemorySegment message(Arena a, MemorySegment data, MemorySegment control) {
        MemorySegment iov = a.allocate(NativeLayouts.IOVEC);
        iov.set(ValueLayout.ADDRESS, NativeLayouts.IOVEC_BASE, data);
        iov.set(ValueLayout.JAVA_LONG, NativeLayouts.IOVEC_LEN, data.byteSize());
        MemorySegment msg = a.allocate(NativeLayouts.MSGHDR);
        msg.set(ValueLayout.ADDRESS, NativeLayouts.MSGHDR_IOV, iov);
        msg.set(ValueLayout.JAVA_LONG, NativeLayouts.MSGHDR_IOVLEN, 1);
        msg.set(ValueLayout.ADDRESS, NativeLayouts.MSGHDR_CONTROL, control);
        msg.set(ValueLayout.JAVA_LONG, NativeLayouts.MSGHDR_CONTROLLEN, control.byteSize());
        return msg;
    }

    /**
     * Sends {@code data} (native memory, at least one byte) with a copy of each of {@code fds}
     * attached (at least one), on the blocking Unix stream socket {@code socket}, without
     * SIGPIPE: bytes sent or {@code -errno}.
     */
    public static long trySendFds(int socket, MemorySegment data, int... fds) {
        MemorySegment st = Native.callState();
        try (Arena a = Arena.ofConfined()) {
            long len = CMSG_HEADER + 4L * fds.length;
            MemorySegment control = a.allocate((len + 7) & ~7L, 8);
            control.set(ValueLayout.JAVA_LONG, 0, len);
            control.set(ValueLayout.JAVA_INT, 8, Linux.SOL_SOCKET);
            control.set(ValueLayout.JAVA_INT, 12, Linux.SCM_RIGHTS);
            for (int i = 0; i < fds.length; i++) {
                control.set(ValueLayout.JAVA_INT, CMSG_HEADER + 4L * i, fds[i]);
            }
            long r = (long) LibC.SENDMSG.invokeExact(st, socket, message(a, data, control), Linux.MSG_NOSIGNAL);
            return LibC.result(r, st);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /**
     * Receives into {@code data} (native memory) on a blocking Unix stream socket, with any
     * descriptors that came with those bytes put in {@code fds} (the rest of it -1, close-on-exec;
     * the caller owns them): bytes received, 0 at the end of the stream, or {@code -errno}.
     * Descriptors past {@code fds.length} are closed here.
     */
    public static long tryRecvFds(int socket, MemorySegment data, int[] fds) {
        java.util.Arrays.fill(fds, -1);
        MemorySegment st = Native.callState();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment control = a.allocate(CONTROL_BYTES, 8);
            MemorySegment msg = message(a, data, control);
            long r = (long) RECVMSG.invokeExact(st, socket, msg, Linux.MSG_CMSG_CLOEXEC);
            r = LibC.result(r, st);
            long len = msg.get(ValueLayout.JAVA_LONG, NativeLayouts.MSGHDR_CONTROLLEN);
            int taken = 0;
            for (long off = 0; r >= 0 && off + CMSG_HEADER <= len; ) {
                long cmsgLen = control.get(ValueLayout.JAVA_LONG, off);
                if (cmsgLen < CMSG_HEADER || off + cmsgLen > len) {
                    break;
                }
                if (control.get(ValueLayout.JAVA_INT, off + 8) == Linux.SOL_SOCKET
                        && control.get(ValueLayout.JAVA_INT, off + 12) == Linux.SCM_RIGHTS) {
                    for (long p = off + CMSG_HEADER; p + 4 <= off + cmsgLen; p += 4) {
                        int fd = control.get(ValueLayout.JAVA_INT, p);
                        if (taken < fds.length) {
                            fds[taken++] = fd;
                        } else {
                            LibC.close(fd);
                        }
                    }
                }
                off += (cmsgLen + 7) & ~7L;
            }
            return r;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }
}
