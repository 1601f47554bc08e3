package io.github.sockmap4j.linux.sys;

import io.github.sockmap4j.linux.ffi.LibC;
import io.github.sockmap4j.linux.ffi.Linux;
import io.github.sockmap4j.linux.ffi.SysCalls;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Whose a process's user namespace is, as the kernel keeps it (ioctl_ns(2)): the uid that made
 * the outermost user namespace between the process and this one. A user who maps a range of
 * subordinate uids (or any number of nested namespaces) is that one uid here.
 *
 * <p><b>Note:</b> this class is threadsafe; a process that exits meanwhile gives -1 or {@link #GONE}.
 */
public final class UserNamespaces {
    /** _IO(0xb7, 0x2): a descriptor of the parent user namespace. */
    static final long NS_GET_PARENT = 0xb702L;
    /** _IO(0xb7, 0x4): the uid owning a user namespace, in the caller's namespace. */
    static final long NS_GET_OWNER_UID = 0xb704L;
    /** Deeper than the kernel allows (32 levels): the walk stops there whatever happens. */
    private static final int MAX_DEPTH = 33;

    private UserNamespaces() {
    }

    /** {@link #ownerBelowOurs}: the process has gone (its /proc entry with it). */
    public static final int GONE = -2;

    /**
     * The uid owning the outermost user namespace of process {@code pid} below this process's
     * own (0 for one root made); -1 when {@code pid} is in this process's user namespace or the
     * kernel does not say; {@link #GONE} when the process has gone.
     */
    public static int ownerBelowOurs(int pid) {
        try {
            String ours = Files.readSymbolicLink(Path.of("/proc/self/ns/user")).toString();
            Path theirs = Path.of("/proc", Integer.toString(pid), "ns", "user");
            String link;
            try {
                link = Files.readSymbolicLink(theirs).toString();
            } catch (java.nio.file.NoSuchFileException gone) {
                return GONE;
            }
            if (link.equals(ours)) {
                return -1;
            }
            int fd = SysCalls.open(theirs.toString(), Linux.O_RDONLY | Linux.O_CLOEXEC, 0);
            try {
                for (int depth = 0; depth < MAX_DEPTH; depth++) {
                    int parent = LibC.tryIoctlNoArg(fd, NS_GET_PARENT);
                    if (parent < 0) {
                        return -1; // not below ours after all
                    }
                    boolean top = Files.readSymbolicLink(Path.of("/proc/self/fd/" + parent)).toString().equals(ours);
                    if (top) {
                        LibC.close(parent);
                        return LibC.ioctlIntOut("ioctl(NS_GET_OWNER_UID)", fd, NS_GET_OWNER_UID);
                    }
                    LibC.close(fd);
                    fd = parent;
                }
                return -1;
            } finally {
                LibC.close(fd);
            }
        } catch (IOException | RuntimeException e) {
            return -1;
        }
    }
}
