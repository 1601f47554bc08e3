package io.github.sockmap4j.internal.sys;

import io.github.sockmap4j.internal.ffi.LibC;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;

/**
 * Refuses directories somebody else could have prepared. {@code /sys/fs/bpf} is world-writable
 * (mode 1777) on many hosts, so any user can create {@code /sys/fs/bpf/NAME} before the agent
 * does; whoever owns that directory can later unlink the pins in it (the cgroup link, the policy
 * map) and so detach the fast path, or pin objects of their own there. A pin or lock directory
 * is accepted only when it is a real directory owned by root or by this process's user and
 * writable by nobody else.
 */
public final class Ownership {
    private Ownership() {
    }

    /**
     * Nothing when {@code dir} does not exist yet or is safe; otherwise an IOException saying who
     * could tamper with it and what to do.
     *
     * @param what what the directory is for, e.g. "pin directory"
     */
    public static void check(Path dir, String what) throws IOException {
        if (!Files.exists(dir, LinkOption.NOFOLLOW_LINKS)) {
            return;
        }
        if (Files.isSymbolicLink(dir) || !Files.isDirectory(dir, LinkOption.NOFOLLOW_LINKS)) {
            throw new IOException("the " + what + " " + dir + " is not a directory of its own (a symbolic link or "
                    + "a file): remove it, or choose another one");
        }
        int uid = (Integer) Files.getAttribute(dir, "unix:uid", LinkOption.NOFOLLOW_LINKS);
        int mode = (Integer) Files.getAttribute(dir, "unix:mode", LinkOption.NOFOLLOW_LINKS);
        int euid = LibC.geteuid();
        String problem = null;
        if (uid != 0 && uid != euid) {
            problem = "is owned by uid " + uid + ", not by root or by this user (uid " + euid + ")";
        } else if ((mode & 0022) != 0) {
            problem = "is writable by " + ((mode & 0002) != 0 ? "every user" : "its group") + " (mode "
                    + Integer.toOctalString(mode & 07777) + ")";
        }
        if (problem != null) {
            throw new IOException("refusing the " + what + " " + dir + ": it " + problem + ", so another user could "
                    + "remove or replace what sockmap4j puts there. If nobody uses it, remove it (as root: rm -r "
                    + dir + ") and sockmap4j creates it safely; or choose another directory");
        }
    }
}
