package io.github.sockmap4j.linux.sys;

import io.github.sockmap4j.linux.ffi.LibC;
import io.github.sockmap4j.linux.ffi.Linux;
import io.github.sockmap4j.linux.ffi.SysCalls;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;

/**
 * cgroup v2 paths. The unified hierarchy is found in /proc/self/mountinfo (fstype cgroup2),
 * never assumed: it is /sys/fs/cgroup on most distributions, /sys/fs/cgroup/unified on hybrid
 * setups.
 */
public final class Cgroups {
    private Cgroups() {
    }

    /** A cgroup2 mount: where it is mounted and which cgroup path its root is. */
    public record Mount(Path mountPoint, String root) {
    }

    public static Optional<Mount> unifiedMount() throws IOException {
        return unifiedMount(Files.readAllLines(Path.of("/proc/self/mountinfo")));
    }

    static Optional<Mount> unifiedMount(List<String> mountinfo) {
        for (String line : mountinfo) {
            int dash = line.indexOf(" - ");
            if (dash < 0) {
                continue;
            }
            String[] post = line.substring(dash + 3).split(" ");
            if (post.length > 0 && post[0].equals("cgroup2")) {
                String[] pre = line.substring(0, dash).split(" ");
                return Optional.of(new Mount(Path.of(unescape(pre[4])), unescape(pre[3])));
            }
        }
        return Optional.empty();
    }

    /** Whether a filesystem of the given type is mounted exactly at {@code dir}. */
    public static boolean isMountedAt(Path dir, String fstype) throws IOException {
        for (String line : Files.readAllLines(Path.of("/proc/self/mountinfo"))) {
            int dash = line.indexOf(" - ");
            if (dash < 0) {
                continue;
            }
            String[] pre = line.substring(0, dash).split(" ");
            String[] post = line.substring(dash + 3).split(" ");
            if (post[0].equals(fstype) && Path.of(unescape(pre[4])).equals(dir)) {
                return true;
            }
        }
        return false;
    }

    /** The cgroup v2 path of this process ("0::/path" in /proc/self/cgroup). */
    public static Optional<String> ownCgroupPath() throws IOException {
        for (String line : Files.readAllLines(Path.of("/proc/self/cgroup"))) {
            if (line.startsWith("0::")) {
                return Optional.of(line.substring(3));
            }
        }
        return Optional.empty();
    }

    /** The directory of this process's cgroup v2, under the unified mount. */
    public static Optional<Path> ownCgroupDir() throws IOException {
        Optional<Mount> mount = unifiedMount();
        Optional<String> own = ownCgroupPath();
        if (mount.isEmpty() || own.isEmpty()) {
            return Optional.empty();
        }
        String path = own.get();
        String root = mount.get().root();
        if (!root.equals("/")) {
            if (!path.startsWith(root)) {
                return Optional.empty();
            }
            path = path.substring(root.length());
        }
        Path dir = mount.get().mountPoint();
        for (String part : path.split("/")) {
            if (!part.isEmpty()) {
                dir = dir.resolve(part);
            }
        }
        return Optional.of(dir);
    }

    /** Whether {@code dir} is the root of the cgroup v2 hierarchy mounted here. */
    public static boolean isRoot(Path dir) throws IOException {
        Optional<Mount> mount = unifiedMount();
        return mount.isPresent() && mount.get().mountPoint().equals(dir.toAbsolutePath().normalize());
    }

    /** statfs f_type of a cgroup v2 hierarchy (include/uapi/linux/magic.h). */
    static final long CGROUP2_SUPER_MAGIC = 0x63677270L;

    /**
     * Refuses a directory that is not a cgroup v2 one (a cgroup v1 hierarchy, a plain directory):
     * attaching there fails with an errno that names nothing (EBADF).
     */
    public static void checkV2(Path dir) throws IOException {
        int fd;
        try {
            fd = SysCalls.open(dir.toString(), Linux.O_PATH | Linux.O_DIRECTORY, 0);
        } catch (IOException e) {
            throw new IOException("cannot open the cgroup " + dir + ": " + e.getMessage(), e);
        }
        try {
            long type = SysCalls.fstatfsType(fd);
            if (type != CGROUP2_SUPER_MAGIC) {
                String unified = unifiedMount().map(m -> m.mountPoint().toString()).orElse("none mounted here");
                throw new IOException("the cgroup " + dir + " is not a cgroup v2 directory (its file system type is 0x"
                        + Long.toHexString(type) + "): sockmap4j attaches to cgroup v2 only; choose a directory "
                        + "under the cgroup2 mount (" + unified + ")");
            }
        } finally {
            LibC.close(fd);
        }
    }

    /** The cgroup's inode number: the id bpftool and the kernel show for it. */
    public static long id(Path dir) throws IOException {
        return ((Number) Files.getAttribute(dir, "unix:ino")).longValue();
    }

    /** Moves the whole process (every thread) into the cgroup. */
    public static void moveSelf(Path dir) throws IOException {
        Files.writeString(dir.resolve("cgroup.procs"), Long.toString(ProcessHandle.current().pid()));
    }

    /** Moves one process into the cgroup. */
    public static void move(long pid, Path dir) throws IOException {
        Files.writeString(dir.resolve("cgroup.procs"), Long.toString(pid));
    }

    private static String unescape(String s) {
        return s.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\");
    }

    /**
     * Why this process's own sockets are not covered by an attachment to {@code attached} (cgroup
     * programs apply to the cgroup and its descendants), with what to do; null when they are.
     */
    public static String whyOutside(Path attached) {
        try {
            Optional<Path> own = ownCgroupDir();
            if (own.isEmpty()) {
                return "this process's cgroup v2 directory is unknown, so its own connections may not be accelerated";
            }
            if (own.get().startsWith(attached)) {
                return null;
            }
            return "this process is in cgroup " + own.get() + ", outside " + attached
                    + ": its own connections stay on plain TCP (ports it opts in are redirected for processes in "
                    + attached + "). Run it in " + attached + " or a cgroup below it (for example "
                    + "'echo PID > " + attached.resolve("cgroup.procs") + "', a systemd unit's Slice=, or a container), "
                    + "or leave sockmap4j.cgroup unset to attach to its own cgroup";
        } catch (IOException e) {
            return "this process's cgroup could not be read (" + e.getMessage() + ")";
        }
    }

    /**
     * {@code root} and the cgroups below it, at most {@code depth} levels down, parents before
     * children: each directory listed once with its entries' types (no stat of the dozens of
     * interface files each cgroup has, which made a walk of a node's pods' cgroups most of the node
     * agent's CPU). A cgroup removed meanwhile is left out with what was below it.
     */
    public static List<Path> tree(Path root, int depth) {
        List<Path> out = new java.util.ArrayList<>();
        java.util.ArrayDeque<Path> todo = new java.util.ArrayDeque<>();
        java.util.ArrayDeque<Integer> levels = new java.util.ArrayDeque<>();
        todo.add(root);
        levels.add(0);
        while (!todo.isEmpty()) {
            Path dir = todo.poll();
            int level = levels.poll();
            List<SysCalls.DirEntry> entries;
            try {
                entries = SysCalls.listDirectory(dir.toString());
            } catch (IOException e) {
                continue; // gone meanwhile, or not a directory
            }
            out.add(dir);
            if (level >= depth) {
                continue;
            }
            for (SysCalls.DirEntry e : entries) {
                Path child = dir.resolve(e.name());
                if (e.type() == SysCalls.DT_DIR || e.type() == SysCalls.DT_UNKNOWN && Files.isDirectory(child)) {
                    todo.add(child);
                    levels.add(level + 1);
                }
            }
        }
        return out;
    }
}
