package io.github.sockmap4j.linux.sys;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Which namespaces are looked into: pure, no root needed. */
class NetnsDiagsTest {
    @Test
    void eachOwnerKeepsItsFirstNamespaces() {
        Map<Long, NetnsDiags.Proc> present = new HashMap<>();
        Map<Integer, Integer> owner = new HashMap<>();
        Path podA = Path.of("/sys/fs/cgroup/kubepods/pod-a");
        Path podB = Path.of("/sys/fs/cgroup/kubepods/pod-b");
        // 1,000 namespaces of user 4001 (pids 1000..1999, inodes 5000..5999), 3 of user 4002;
        // root-made ones: 1,000 nested in pod A (pids 5000..5999, inodes 100..1099), 1 of pod B.
        for (int i = 0; i < 1000; i++) {
            present.put(5000L + i, new NetnsDiags.Proc(1000L + i, podA));
            owner.put(1000 + i, 4001);
        }
        for (int i = 0; i < 3; i++) {
            present.put(9000L + i, new NetnsDiags.Proc(3000L + i, podB));
            owner.put(3000 + i, 4002);
        }
        for (int i = 0; i < 1000; i++) {
            present.put(100L + i, new NetnsDiags.Proc(5000L + i, podA));
            owner.put(5000 + i, -1);
        }
        present.put(8000L, new NetnsDiags.Proc(7000L, podB));
        owner.put(7000, -1);
        Map<Long, Long> kept = NetnsDiags.boundedPerOwner(present, pid -> owner.get(pid));
        assertEquals(NetnsDiags.PER_USER + 3 + NetnsDiags.PER_USER + 1, kept.size());
        for (long inode = 5000; inode < 5000 + NetnsDiags.PER_USER; inode++) {
            assertTrue(kept.containsKey(inode), "user 4001's first namespaces, the same each time: " + inode);
        }
        assertTrue(kept.keySet().containsAll(java.util.List.of(9000L, 9001L, 9002L)), "another user's few");
        for (long inode = 100; inode < 100 + NetnsDiags.PER_USER; inode++) {
            assertEquals(5000L + inode - 100, kept.get(inode), "pod A's first namespaces, with a pid in each");
        }
        assertTrue(kept.containsKey(8000L), "pod B's one, whatever pod A nests");
    }
}
