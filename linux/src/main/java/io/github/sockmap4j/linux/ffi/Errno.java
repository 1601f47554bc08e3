package io.github.sockmap4j.linux.ffi;

import java.lang.foreign.MemorySegment;

/** errno values this library reacts to (x86_64 and aarch64 Linux share them). */
public final class Errno {
    public static final int EPERM = 1;
    public static final int ENOENT = 2;
    public static final int EINTR = 4;
    public static final int E2BIG = 7;
    public static final int EBADF = 9;
    public static final int EAGAIN = 11;
    public static final int ENOMEM = 12;
    public static final int EACCES = 13;
    public static final int EBUSY = 16;
    public static final int EEXIST = 17;
    public static final int ENOTDIR = 20;
    public static final int EINVAL = 22;
    public static final int ENFILE = 23;
    public static final int EMFILE = 24;
    public static final int ENOSPC = 28;
    public static final int EPIPE = 32;
    public static final int ERANGE = 34;
    public static final int ELOOP = 40;
    public static final int EOPNOTSUPP = 95;
    public static final int EADDRINUSE = 98;
    public static final int EADDRNOTAVAIL = 99;
    public static final int ECONNABORTED = 103;
    public static final int ECONNRESET = 104;
    public static final int EISCONN = 106;
    public static final int ENOTCONN = 107;
    public static final int ETIMEDOUT = 110;
    public static final int ECONNREFUSED = 111;
    public static final int EALREADY = 114;
    public static final int EINPROGRESS = 115;

    private Errno() {
    }

    /**
     * The one errno check of every throwing wrapper: {@code res}, the result of a {@code try*}
     * call, when it is not negative; otherwise the call failed with errno {@code -res}.
     *
     * @throws NativeIOException naming {@code op} and the errno
     */
    public static int ok(String op, int res) throws NativeIOException {
        if (res < 0) {
            throw error(op, res);
        }
        return res;
    }

    /** As {@link #ok(String, int)}, for calls that return a size. */
    public static long ok(String op, long res) throws NativeIOException {
        if (res < 0) {
            throw error(op, res);
        }
        return res;
    }

    /** As {@link #ok(String, int)}, with what the call was about (a path, a size) in the message. */
    public static int ok(String op, int res, String detail) throws NativeIOException {
        if (res < 0) {
            throw error(op, res, detail);
        }
        return res;
    }

    /**
     * The one way a failed native call becomes an exception (Netty's {@code Errors.ioResult}
     * shape): {@code res} is what the {@code try*} call returned, {@code -errno}. Callers that
     * react to some errno values (EAGAIN, EINTR, ENOENT) test those first and hand the rest here.
     *
     * @throws IllegalArgumentException when {@code res} is not negative (no failure to report)
     */
    public static NativeIOException error(String op, long res) {
        return new NativeIOException(op, errnoOf(op, res));
    }

    /** As {@link #error(String, long)}, with what the call was about (a path, a size) in the message. */
    public static NativeIOException error(String op, long res, String detail) {
        return new NativeIOException(op, errnoOf(op, res), detail);
    }

    /**
     * The check of a call that returns a pointer: {@code p}, unless it is the call's failure value
     * ({@code failed}: 0 for NULL, -1 for mmap's MAP_FAILED); then the errno the call left in its
     * call state {@code st}.
     */
    static MemorySegment okPointer(String op, MemorySegment p, long failed, MemorySegment st, String detail)
            throws NativeIOException {
        if (p.address() == failed) {
            throw detail == null ? error(op, -Native.errno(st)) : error(op, -Native.errno(st), detail);
        }
        return p;
    }

    private static int errnoOf(String op, long res) {
        if (res >= 0 || res < -4095) {
            throw new IllegalArgumentException(op + ": " + res + " is not a failed call's -errno");
        }
        return (int) -res;
    }

    /** "ENOENT (No such file or directory)", from the C library's own text. */
    public static String describe(int errno) {
        String name = switch (errno) {
            case EPERM -> "EPERM";
            case ENOENT -> "ENOENT";
            case EINTR -> "EINTR";
            case E2BIG -> "E2BIG";
            case EBADF -> "EBADF";
            case EAGAIN -> "EAGAIN";
            case ENOMEM -> "ENOMEM";
            case EACCES -> "EACCES";
            case EBUSY -> "EBUSY";
            case EEXIST -> "EEXIST";
            case ENOTDIR -> "ENOTDIR";
            case EINVAL -> "EINVAL";
            case ENFILE -> "ENFILE";
            case EMFILE -> "EMFILE";
            case ELOOP -> "ELOOP";
            case ERANGE -> "ERANGE";
            case ENOSPC -> "ENOSPC";
            case EPIPE -> "EPIPE";
            case EOPNOTSUPP -> "EOPNOTSUPP";
            case EADDRINUSE -> "EADDRINUSE";
            case EADDRNOTAVAIL -> "EADDRNOTAVAIL";
            case ECONNRESET -> "ECONNRESET";
            case EISCONN -> "EISCONN";
            case ENOTCONN -> "ENOTCONN";
            case ECONNREFUSED -> "ECONNREFUSED";
            case EALREADY -> "EALREADY";
            case EINPROGRESS -> "EINPROGRESS";
            default -> "errno " + errno;
        };
        return name + " (" + LibC.strerror(errno) + ")";
    }
}
