package io.github.sockmap4j.linux.sys;

import io.github.sockmap4j.linux.ffi.Errno;
import io.github.sockmap4j.linux.ffi.LibC;
import io.github.sockmap4j.linux.ffi.Linux;
import io.github.sockmap4j.linux.ffi.SysCalls;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

/**
 * Pin and lock directories that nobody else can have prepared, or can change under us.
 * {@code /sys/fs/bpf} is world-writable (mode 1777) on many hosts, so any user can create
 * {@code /sys/fs/bpf/NAME} before the agent does, or own a directory above the one configured;
 * whoever owns the directory, or any directory above it, can later unlink or move the pins in it
 * (the cgroup link, the policy map) and so detach the fast path, or pin objects of their own there.
 *
 * <p>{@link #ensureDirectory} walks the path from {@code /} one component at a time with
 * {@code openat(O_PATH | O_NOFOLLOW)}, creates what is missing with {@code mkdirat}, and checks
 * each directory through the descriptor it opened, after any creation: there is no window between
 * the check and the directory checked. A directory passes when it is owned by root or by this
 * process's user and writable by nobody else; above the target, a root-owned directory with the
 * sticky bit (like {@code /sys/fs/bpf} or {@code /tmp}) passes too, since nobody but the owner of
 * an entry may then remove or rename it. Once the walk has passed, the path names exactly the
 * directory checked for as long as its owners keep it so, and the callers go on by path.
 */
public final class Ownership {
    private static final int STICKY = 01000;

    private Ownership() {
    }

    /**
     * Makes {@code dir} (and any missing directory above it) with {@code mode}, or checks the
     * one there, as described above.
     *
     * @param what what the directory is for, e.g. "pin directory"; it names it in the message
     * @param mode the permission bits of what is created (e.g. 0750); the umask does not narrow them
     * @return the file system type of {@code dir} ({@code statfs f_type})
     * @throws IOException naming the directory that fails, why, and what to do
     */
    public static long ensureDirectory(Path dir, String what, int mode) throws IOException {
        return walk(dir, what, mode, true);
    }

    /**
     * Checks the part of {@code dir} that exists, creating nothing: a caller that has to refuse a
     * directory does so before it makes anything else (a lock directory) for it.
     *
     * @return the file system type of the deepest directory of the path that exists
     */
    public static long checkExisting(Path dir, String what) throws IOException {
        return walk(dir, what, 0, false);
    }

    private static long walk(Path dir, String what, int mode, boolean create) throws IOException {
        Path abs = dir.toAbsolutePath().normalize();
        int fd = SysCalls.open("/", Linux.O_PATH | Linux.O_DIRECTORY, 0);
        Path at = abs.getRoot();
        try {
            check(fd, at, abs, what, abs.getNameCount() == 0);
            for (int i = 0; i < abs.getNameCount(); i++) {
                String name = abs.getName(i).toString();
                at = at.resolve(name);
                boolean target = i == abs.getNameCount() - 1;
                int next = SysCalls.tryOpenat(fd, name, Linux.O_PATH | Linux.O_DIRECTORY | Linux.O_NOFOLLOW);
                boolean created = false;
                if (next == -Errno.ENOENT) {
                    if (!create) {
                        return SysCalls.fstatfsType(fd);
                    }
                    int r = SysCalls.tryMkdirat(fd, name, mode);
                    if (r < 0 && -r != Errno.EEXIST) {
                        throw new IOException("cannot create the " + what + " " + abs + ": mkdir " + at + ": "
                                + Errno.describe(-r) + hint(-r));
                    }
                    created = r == 0;
                    next = SysCalls.tryOpenat(fd, name, Linux.O_PATH | Linux.O_DIRECTORY | Linux.O_NOFOLLOW);
                }
                if (next == -Errno.ELOOP || next == -Errno.ENOTDIR) {
                    throw new IOException("refusing the " + what + " " + abs + ": " + at + " is "
                            + (next == -Errno.ELOOP ? "a symbolic link" : "not a directory") + "; give the real path of "
                            + "a directory (realpath " + abs + "), or choose another one");
                }
                if (next < 0) {
                    throw Errno.error("open", next, at.toString());
                }
                LibC.close(fd);
                fd = next;
                if (created) {
                    // mkdir's mode went through the umask; the mode asked for is the one meant.
                    Files.setPosixFilePermissions(Path.of("/proc/self/fd/" + fd), permissions(mode));
                }
                check(fd, at, abs, what, target);
            }
            return SysCalls.fstatfsType(fd);
        } finally {
            LibC.close(fd);
        }
    }

    /** Refuses the directory {@code fd} refers to ({@code at}, on the way to {@code dir}) unless it is safe. */
    private static void check(int fd, Path at, Path dir, String what, boolean target) throws IOException {
        Path opened = Path.of("/proc/self/fd/" + fd); // follows to the very directory opened
        int uid = (Integer) Files.getAttribute(opened, "unix:uid");
        int mode = (Integer) Files.getAttribute(opened, "unix:mode");
        int euid = SysCalls.geteuid();
        String problem = null;
        if (uid != 0 && uid != euid) {
            problem = "is owned by uid " + uid + ", not by root or by this user (uid " + euid + ")";
        } else if ((mode & 0022) != 0 && (target || uid != 0 || (mode & STICKY) == 0)) {
            problem = "is writable by " + ((mode & 0002) != 0 ? "every user" : "its group") + " (mode "
                    + Integer.toOctalString(mode & 07777) + ")";
        }
        if (problem == null) {
            return;
        }
        boolean self = at.equals(dir);
        String fix = self
                ? "If nobody uses it, remove it (as root: rm -r " + dir + ") and sockmap4j creates it safely; or "
                + "choose another directory"
                : "Choose a directory whose every parent is root's and writable only by root, or fix " + at
                + " (as root: chown root " + at + "; chmod go-w " + at + ")";
        throw new IOException("refusing the " + what + " " + dir + ": " + (self ? "it" : at + ", above it,") + " "
                + problem + ", so another user could remove or replace what sockmap4j puts there. " + fix);
    }

    private static String hint(int errno) {
        return errno == Errno.EACCES || errno == Errno.EPERM ? " (run as root, or choose a directory this user may write)"
                : "";
    }

    static Set<PosixFilePermission> permissions(int mode) {
        Set<PosixFilePermission> s = EnumSet.noneOf(PosixFilePermission.class);
        PosixFilePermission[] order = {PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE,
            PosixFilePermission.OTHERS_READ, PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.GROUP_WRITE,
            PosixFilePermission.GROUP_READ, PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE,
            PosixFilePermission.OWNER_READ};
        for (int bit = 0; bit < order.length; bit++) {
            if ((mode & (1 << bit)) != 0) {
                s.add(order[bit]);
            }
        }
        return s;
    }
}
