package io.github.sockmap4j.linux.bpf;

import io.github.sockmap4j.linux.ffi.Errno;
import io.github.sockmap4j.linux.ffi.LibC;
import io.github.sockmap4j.linux.ffi.Linux;
import io.github.sockmap4j.linux.ffi.NativeIOException;
import io.github.sockmap4j.linux.ffi.SysCalls;
import io.github.sockmap4j.linux.sys.Ownership;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * flock(2) files that tell processes sharing a pin directory about each other (bpffs holds no
 * regular files, so they live under /run/sockmap4j). A lock dies with its process, so a crash
 * never leaves a stale holder.
 *
 * <p><b>Note:</b> not threadsafe; {@link KernelSockmap} serialises its use.
 */
public final class LockDir implements AutoCloseable {
    private final Path dir;
    private int setupFd = -1;
    private int usersFd = -1;
    private int cgroupFd = -1;

    private LockDir(Path dir) {
        this.dir = dir;
    }

    /** The lock directory of a pin directory (under /run/sockmap4j, or -Dsockmap4j.lockDir). */
    public static Path pathFor(Path pinDir) {
        Path base = Path.of(System.getProperty("sockmap4j.lockDir", "/run/sockmap4j"));
        return base.resolve(name(pinDir.toAbsolutePath().normalize().toString()));
    }

    /**
     * One file name per pin directory, and a different one for each: '/' becomes '_', and '_' and
     * '=' are escaped ("=_", "=="), so that /sys/fs/bpf/a and /sys/fs/bpf_a never share locks,
     * journals or a control socket. The usual names read as before (/sys/fs/bpf/sockmap4j:
     * _sys_fs_bpf_sockmap4j).
     */
    static String name(String absolutePinDir) {
        StringBuilder b = new StringBuilder(absolutePinDir.length() + 8);
        for (int i = 0; i < absolutePinDir.length(); i++) {
            char c = absolutePinDir.charAt(i);
            switch (c) {
                case '/' -> b.append('_');
                case '_' -> b.append("=_");
                case '=' -> b.append("==");
                default -> b.append(c);
            }
        }
        return b.toString();
    }

    static LockDir forPinDir(Path pinDir) throws IOException {
        return new LockDir(pathFor(pinDir));
    }

    private int openLock(String name) throws NativeIOException {
        return SysCalls.open(dir.resolve(name).toString(), Linux.O_RDWR | Linux.O_CREAT, 0640);
    }

    private static void lock(int fd, int op, String what) throws NativeIOException {
        while (true) {
            int r = SysCalls.tryFlock(fd, op);
            if (r == 0) {
                return;
            }
            if (-r != Errno.EINTR) {
                throw Errno.error("flock", r, what);
            }
        }
    }

    /**
     * Takes the setup lock. The last user removes the lock files, so a waiter may wake holding
     * a lock on a file that is gone; it then retries on the new one.
     */
    void lockSetup() throws IOException {
        while (true) {
            // Searchable by all: an agent's control socket lives here (the lock files stay 0640).
            Ownership.ensureDirectory(dir.getParent(), "lock directory", 0755);
            Ownership.ensureDirectory(dir, "lock directory", 0755);
            int fd = openLock("setup.lock");
            lock(fd, Linux.LOCK_EX, "setup.lock");
            Path target = Files.readSymbolicLink(Path.of("/proc/self/fd/" + fd));
            if (!target.toString().endsWith(" (deleted)")) {
                setupFd = fd;
                return;
            }
            LibC.close(fd);
        }
    }

    void unlockSetup() {
        LibC.close(setupFd);
        setupFd = -1;
    }

    void joinUsers(long cgroupId) throws NativeIOException {
        usersFd = openLock("users.lock");
        lock(usersFd, Linux.LOCK_SH, "users.lock");
        cgroupFd = openLock("cgroup-" + cgroupId + ".lock");
        lock(cgroupFd, Linux.LOCK_SH, "cgroup lock");
    }

    /** Leaves the cgroup's users; true when nobody else holds the lock now. */
    boolean leaveCgroupAndCheckLast(long cgroupId) throws NativeIOException {
        return leaveAndCheckLast(cgroupFd, "cgroup-" + cgroupId + ".lock", true);
    }

    boolean leaveUsersAndCheckLast() throws NativeIOException {
        return leaveAndCheckLast(usersFd, "users.lock", false);
    }

    private boolean leaveAndCheckLast(int heldFd, String name, boolean cgroup) throws NativeIOException {
        if (heldFd >= 0) {
            LibC.close(heldFd);
        }
        if (cgroup) {
            cgroupFd = -1;
        } else {
            usersFd = -1;
        }
        int fd = openLock(name);
        try {
            boolean last = SysCalls.tryFlock(fd, Linux.LOCK_EX | Linux.LOCK_NB) == 0;
            if (last && cgroup) {
                Files.deleteIfExists(dir.resolve(name));
            }
            return last;
        } catch (IOException e) {
            return true;
        } finally {
            LibC.close(fd);
        }
    }

    /** Removes the lock files and their directory once the pins are gone (under the setup lock). */
    void removeFiles() {
        try (var files = Files.list(dir)) {
            for (Path p : (Iterable<Path>) files::iterator) {
                Files.deleteIfExists(p);
            }
            Files.deleteIfExists(dir);
        } catch (IOException ignored) {
            // Lock files are harmless leftovers.
        }
    }

    @Override
    public void close() {
        LibC.close(usersFd);
        LibC.close(cgroupFd);
        usersFd = -1;
        cgroupFd = -1;
    }
}
