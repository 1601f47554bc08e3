package io.github.sockmap4j.linux.sys;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Which namespaces are looked into: pure, no root needed. */
class NetnsDiagsTest {
    @Test
    void eachUserKeepsItsFirstNamespacesAndRootsAreAllKept() {
        Map<Long, Long> present = new HashMap<>();
        Map<Integer, Integer> owner = new HashMap<>();
        // 1,000 namespaces of user 4001 (pids 1000..1999, inodes 5000..5999), 3 of user 4002, 120 of root's.
        for (int i = 0; i < 1000; i++) {
            present.put(5000L + i, 1000L + i);
            owner.put(1000 + i, 4001);
        }
        for (int i = 0; i < 3; i++) {
            present.put(9000L + i, 3000L + i);
            owner.put(3000 + i, 4002);
        }
        for (int i = 0; i < 120; i++) {
            present.put(100L + i, 5000L + i);
            owner.put(5000 + i, -1);
        }
        Map<Long, Long> kept = NetnsDiags.boundedPerUser(present, pid -> owner.get(pid));
        assertEquals(NetnsDiags.PER_USER + 3 + 120, kept.size());
        for (long inode = 5000; inode < 5000 + NetnsDiags.PER_USER; inode++) {
            assertTrue(kept.containsKey(inode), "user 4001's first namespaces, the same each time: " + inode);
        }
        assertTrue(kept.keySet().containsAll(java.util.List.of(9000L, 9001L, 9002L)), "another user's few");
        for (long inode = 100; inode < 220; inode++) {
            assertTrue(kept.containsKey(inode), "root's, all");
        }
    }
}
