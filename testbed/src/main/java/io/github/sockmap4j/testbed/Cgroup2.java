package io.github.sockmap4j.testbed;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Child cgroups of the unified (v2) hierarchy for a test or a benchmark run, with names that tell
 * the run apart ({@link #uniqueName}); never the root cgroup.
 */
public final class Cgroup2 {
    private static final AtomicInteger SEQ = new AtomicInteger();

    private Cgroup2() {
    }

    /** {@code sockmap4j-test-PID-WHAT-N}: a name no other run or call of this process uses. */
    public static String uniqueName(String what) {
        return "sockmap4j-test-" + ProcessHandle.current().pid() + "-" + what + "-" + SEQ.incrementAndGet();
    }

    /** Where the unified hierarchy is mounted (/sys/fs/cgroup, or /sys/fs/cgroup/unified on a hybrid host). */
    public static Path mountPoint() throws IOException {
        for (String line : Files.readAllLines(Path.of("/proc/self/mounts"))) {
            String[] f = line.split(" ");
            if (f.length > 2 && f[2].equals("cgroup2")) {
                return Path.of(f[1]);
            }
        }
        throw new IOException("no cgroup2 file system is mounted: the fast path needs one");
    }

    /** A new child cgroup of the unified hierarchy's root, not entered. */
    public static Path create(String what) throws IOException {
        Path dir = mountPoint().resolve(uniqueName(what));
        Files.createDirectory(dir);
        return dir;
    }

    /** The cgroup this process is in, in the unified hierarchy. */
    public static Path own() throws IOException {
        List<String> lines = Files.readAllLines(Path.of("/proc/self/cgroup"));
        for (String l : lines) {
            if (l.startsWith("0::")) {
                return mountPoint().resolve(l.substring(3).replaceFirst("^/", ""));
            }
        }
        throw new IOException("this process is in no cgroup2 cgroup: " + lines);
    }

    /** Moves this whole process (every thread) into {@code dir}. */
    public static void moveSelf(Path dir) throws IOException {
        Files.writeString(dir.resolve("cgroup.procs"), Long.toString(ProcessHandle.current().pid()));
    }

    /** Removes {@code dir}, which no process is in any more; nothing when it is gone already. */
    public static void delete(Path dir) throws IOException {
        Files.deleteIfExists(dir);
    }
}
