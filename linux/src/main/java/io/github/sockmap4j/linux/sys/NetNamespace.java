package io.github.sockmap4j.linux.sys;

import io.github.sockmap4j.linux.ffi.Errno;
import io.github.sockmap4j.linux.ffi.LibC;
import io.github.sockmap4j.linux.ffi.Linux;
import io.github.sockmap4j.linux.ffi.SysCalls;
import io.github.sockmap4j.linux.net.SockAddr;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collection;

/**
 * A network namespace held by a descriptor of its own ({@code /proc/PID/ns/net}, opened once):
 * which user namespace owns it (ioctl_ns(2)), and, entered on a short-lived thread, its cookie
 * and whether it holds given addresses. Every answer is about the namespace the descriptor holds:
 * a process that exits, or a pid reused meanwhile, changes none of them.
 *
 * <p><b>Note:</b> not threadsafe; close it when done (it keeps the namespace alive while open).
 */
public final class NetNamespace implements AutoCloseable {
    /** _IO(0xb7, 0x1): a descriptor of the user namespace that owns a namespace. */
    static final long NS_GET_USERNS = 0xb701L;

    /**
     * The user namespace owning a network namespace.
     *
     * @param userns   its identity ({@code user:[inode]}, as /proc shows it)
     * @param parent   its parent's identity, or null where the kernel does not say (the initial one
     *                 has none; one above the caller's is not shown)
     * @param ownerUid the uid that made it, as the caller sees it (-1 where the kernel does not say)
     */
    public record Owner(String userns, String parent, int ownerUid) {
    }

    private final int fd;
    private final String id;
    private final String of;

    private NetNamespace(int fd, String id, String of) {
        this.fd = fd;
        this.id = id;
        this.of = of;
    }

    /**
     * The network namespace process {@code pid} is in now.
     *
     * @throws IOException naming the pid where it is gone or its namespace cannot be opened
     */
    public static NetNamespace ofProcess(long pid) throws IOException {
        String path = "/proc/" + pid + "/ns/net";
        int fd = SysCalls.open(path, Linux.O_RDONLY | Linux.O_CLOEXEC, 0);
        try {
            return new NetNamespace(fd, link(fd), "pid " + pid);
        } catch (IOException | RuntimeException e) {
            LibC.close(fd);
            throw e;
        }
    }

    /** This process's own network namespace's identity ({@code net:[inode]}). */
    public static String ownId() throws IOException {
        return Files.readSymbolicLink(Path.of("/proc/self/ns/net")).toString();
    }

    /** This process's own user namespace's identity ({@code user:[inode]}). */
    public static String ownUserNamespace() throws IOException {
        return Files.readSymbolicLink(Path.of("/proc/self/ns/user")).toString();
    }

    /** Its identity, {@code net:[inode]}: equal for two descriptors of one namespace. */
    public String id() {
        return id;
    }

    /** The user namespace that owns it: the one it was made in. */
    public Owner owner() throws IOException {
        int user = Errno.ok("ioctl(NS_GET_USERNS) of " + of, LibC.tryIoctlNoArg(fd, NS_GET_USERNS));
        try {
            String userns = link(user);
            int uid;
            try {
                uid = LibC.ioctlIntOut("ioctl(NS_GET_OWNER_UID)", user, UserNamespaces.NS_GET_OWNER_UID);
            } catch (IOException e) {
                uid = -1;
            }
            int parent = LibC.tryIoctlNoArg(user, UserNamespaces.NS_GET_PARENT);
            if (parent < 0) {
                return new Owner(userns, null, uid); // the initial one, or above ours: no parent to see
            }
            try {
                return new Owner(userns, link(parent), uid);
            } finally {
                LibC.close(parent);
            }
        } finally {
            LibC.close(user);
        }
    }

    /** Its cookie (SO_NETNS_COOKIE, what the programs compare with {@code bpf_get_netns_cookie}). */
    public long cookie() throws IOException {
        return NetnsCookie.inNamespace(fd, of, NetnsCookie::here);
    }

    /**
     * Whether it holds every one of {@code addresses}: a socket made there binds to each (port 0).
     * Only EADDRNOTAVAIL says an address is not there; a bind that fails because every port is
     * taken (EADDRINUSE) still says it is.
     */
    public boolean holdsAll(Collection<InetAddress> addresses) throws IOException {
        return NetnsCookie.inNamespace(fd, of, () -> {
            for (InetAddress a : addresses) {
                int s = LibC.socket(Linux.AF_INET6, Linux.SOCK_STREAM | Linux.SOCK_CLOEXEC, 0);
                try (Arena arena = Arena.ofConfined()) {
                    int res = LibC.tryBind(s, SockAddr.encode6(arena, new InetSocketAddress(a, 0)));
                    if (res == -Errno.EADDRNOTAVAIL) {
                        return false;
                    }
                    if (res < 0 && res != -Errno.EADDRINUSE) {
                        throw Errno.error("bind to " + a.getHostAddress() + " in the network namespace of " + of, res);
                    }
                } finally {
                    LibC.close(s);
                }
            }
            return true;
        });
    }

    private static String link(int fd) throws IOException {
        return Files.readSymbolicLink(Path.of("/proc/self/fd/" + fd)).toString();
    }

    @Override
    public void close() {
        LibC.close(fd);
    }

    @Override
    public String toString() {
        return id + " (of " + of + ")";
    }
}
