package io.github.sockmap4j.linux.sys;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

class CgroupsTest {
    @Test
    void findsAHybridUnifiedMount() {
        List<String> mountinfo = List.of(
                "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755",
                "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory",
                "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw");
        Cgroups.Mount m = Cgroups.unifiedMount(mountinfo).orElseThrow();
        assertEquals(Path.of("/sys/fs/cgroup/unified"), m.mountPoint());
        assertEquals("/", m.root());
    }

    @Test
    void findsAPlainUnifiedMountWithOptionalFields() {
        List<String> mountinfo = List.of(
                "29 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate");
        assertEquals(Path.of("/sys/fs/cgroup"), Cgroups.unifiedMount(mountinfo).orElseThrow().mountPoint());
    }

    @Test
    void noUnifiedMountIsEmpty() {
        assertTrue(Cgroups.unifiedMount(List.of("1 0 0:1 / / rw - ext4 /dev/sda rw")).isEmpty());
    }

    @Test
    void ownCgroupDirExistsHere() throws Exception {
        Path own = Cgroups.ownCgroupDir().orElseThrow();
        assertTrue(Files.isRegularFile(own.resolve("cgroup.procs")), own.toString());
    }

    /** The tree of directories below a root, parents first, files left out, as deep as asked. */
    @Test
    void aTreeHasItsDirectoriesOnly(@org.junit.jupiter.api.io.TempDir Path tmp) throws Exception {
        Files.createDirectories(tmp.resolve("a/b/c"));
        Files.createDirectories(tmp.resolve("d.slice"));
        Files.writeString(tmp.resolve("cgroup.procs"), "1\n");
        Files.writeString(tmp.resolve("a/memory.max"), "max\n");
        Files.writeString(tmp.resolve("a/b/c/cgroup.procs"), "");
        List<Path> all = Cgroups.tree(tmp, Integer.MAX_VALUE);
        assertEquals(java.util.Set.of(tmp, tmp.resolve("a"), tmp.resolve("a/b"), tmp.resolve("a/b/c"),
                tmp.resolve("d.slice")), java.util.Set.copyOf(all));
        assertEquals(tmp, all.get(0));
        assertTrue(all.indexOf(tmp.resolve("a")) < all.indexOf(tmp.resolve("a/b")), all.toString());
        assertEquals(java.util.Set.of(tmp, tmp.resolve("a"), tmp.resolve("d.slice")), java.util.Set.copyOf(
                Cgroups.tree(tmp, 1)));
        assertEquals(List.of(), Cgroups.tree(tmp.resolve("gone"), 3));
        assertEquals(List.of(), Cgroups.tree(tmp.resolve("cgroup.procs"), 3), "a file is not a tree");
    }
}
