package io.github.sockmap4j.linux.ffi;

/**
 * The C library's and the kernel's constants sockmap4j passes to {@link LibC}: each field is
 * named as its C macro, and a test compiles every name against the installed headers and
 * compares (NativeLayoutsTest), so a wrong value fails the build on the architecture it runs on.
 */
public final class Linux {
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
    public static final int SO_PEERCRED = 17;
    public static final int SO_COOKIE = 57;
    /** The supplementary groups of a Unix socket's peer, as they were when it connected (since 4.13). */
    public static final int SO_PEERGROUPS = 59;
    public static final int SO_NETNS_COOKIE = 71;
    public static final int TCP_NODELAY = 1;
    public static final int IPV6_V6ONLY = 26;
    public static final int SHUT_RD = 0;
    public static final int SHUT_WR = 1;
    public static final int SHUT_RDWR = 2;
    public static final int MSG_NOSIGNAL = 0x4000;
    public static final int MSG_DONTWAIT = 0x40;
    public static final int MSG_CMSG_CLOEXEC = 0x40000000;
    public static final int SCM_RIGHTS = 1;
    /** The most iovecs one sendmsg takes. */
    public static final int IOV_MAX = 1024;
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
    /** With O_CREAT: fail with EEXIST where the file is there already (0200 on x86-64 and arm64 alike). */
    public static final int O_EXCL = 0x80;
    public static final int O_DIRECTORY = Platform.current().oDirectory();
    public static final int O_CLOEXEC = 0x80000;
    public static final int O_NOFOLLOW = Platform.current().oNofollow();
    /** A handle on a path only (no read or write): enough to walk, stat and statfs through. */
    public static final int O_PATH = 0x200000;
    /** statfs f_type of a BPF file system (linux/magic.h). */
    public static final long BPF_FS_MAGIC = 0xcafe4a11L;
    public static final int PROT_READ = 1;
    public static final int PROT_WRITE = 2;
    public static final int MAP_SHARED = 1;
    public static final int MFD_CLOEXEC = 1;
    public static final int MFD_ALLOW_SEALING = 2;
    public static final int F_ADD_SEALS = 1033;
    public static final int F_GET_SEALS = 1034;
    public static final int F_DUPFD_CLOEXEC = 1030;
    /** open(2)'s and fcntl(F_GETFL)'s non-blocking flag (04000, as EFD_NONBLOCK). */
    public static final int O_NONBLOCK = 0x800;
    public static final int F_SEAL_SEAL = 1;
    public static final int F_SEAL_SHRINK = 2;
    public static final int F_SEAL_GROW = 4;
    public static final int SEEK_END = 2;
    public static final int FUTEX_WAIT = 0;
    public static final int FUTEX_WAKE = 1;
    public static final int LOCK_SH = 1;
    public static final int LOCK_EX = 2;
    public static final int LOCK_NB = 4;
    public static final int LOCK_UN = 8;
    /** setns's namespace type for a network namespace. */
    public static final int CLONE_NEWNET = 0x40000000;

    private Linux() {
    }
}
