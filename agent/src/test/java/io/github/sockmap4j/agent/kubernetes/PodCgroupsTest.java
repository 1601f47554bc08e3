package io.github.sockmap4j.agent.kubernetes;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.linux.sys.NetNamespace;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Where the kubelet puts a pod, and nowhere else; which namespace owners count. Needs no privilege:
 * the layouts are plain directories here.
 */
class PodCgroupsTest {
    static final String UID = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
    static final String UNDERSCORED = UID.replace('-', '_');

    @TempDir
    Path tmp;

    @Test
    void theCgroupfsLayoutIsFoundInEachClass() throws IOException {
        Path root = Files.createDirectories(tmp.resolve("kubepods"));
        Files.createDirectories(root.resolve("pod" + UID).resolve("c1"));
        Files.createDirectories(root.resolve("burstable").resolve("pod" + UID.replace("0f1e", "1f1e")));
        Files.createDirectories(root.resolve("besteffort").resolve("pod" + UID.replace("0f1e", "2f1e")));
        Map<String, List<PodCgroups.PodDir>> look = PodCgroups.look(List.of(root));
        assertEquals(List.of(root.resolve("pod" + UID)), PodCgroups.of(look, UID, "Guaranteed"));
        assertEquals(List.of(root.resolve("burstable").resolve("pod" + UID.replace("0f1e", "1f1e"))),
                PodCgroups.of(look, UID.replace("0f1e", "1f1e"), null));
        assertEquals(List.of(), PodCgroups.of(look, UID.replace("0f1e", "2f1e"), "Burstable"),
                "a pod is looked for in its own class only");
        assertEquals(1, PodCgroups.of(look, UID.replace("0f1e", "2f1e"), "BestEffort").size());
    }

    @Test
    void theSystemdLayoutIsFoundInEachClass() throws IOException {
        Path root = Files.createDirectories(tmp.resolve("kubepods.slice"));
        Path guaranteed = Files.createDirectories(root.resolve("kubepods-pod" + UNDERSCORED + ".slice"));
        Path burstable = Files.createDirectories(root.resolve("kubepods-burstable.slice")
                .resolve("kubepods-burstable-pod" + UNDERSCORED.replace("0f1e", "1f1e") + ".slice"));
        Path bestEffort = Files.createDirectories(root.resolve("kubepods-besteffort.slice")
                .resolve("kubepods-besteffort-pod" + UNDERSCORED.replace("0f1e", "2f1e") + ".slice"));
        Map<String, List<PodCgroups.PodDir>> look = PodCgroups.look(List.of(root));
        assertEquals(List.of(guaranteed), PodCgroups.of(look, UID, null));
        assertEquals(List.of(burstable), PodCgroups.of(look, UID.replace("0f1e", "1f1e"), "Burstable"));
        assertEquals(List.of(bestEffort), PodCgroups.of(look, UID.replace("0f1e", "2f1e"), null));
    }

    /**
     * A directory a user could make under the pods' cgroup (a delegated one, or one nested in a
     * container's) is never a pod's, whatever its name holds.
     */
    @Test
    void aDirectoryNamedForAPodElsewhereIsNotItsCgroup() throws IOException {
        Path root = Files.createDirectories(tmp.resolve("kubepods"));
        for (String decoy : List.of("delegated/pod" + UID, "xpod" + UID, "pod" + UID + "-x", "pod" + UNDERSCORED,
                "burstable/x/pod" + UID, "besteffort/pod" + UID + ".slice", "kubepods-pod" + UNDERSCORED + ".slice",
                "guaranteed/pod" + UID, "burstable/pod" + UID.toUpperCase())) {
            Files.createDirectories(root.resolve(decoy));
        }
        Files.createFile(root.resolve("besteffort").resolve("pod" + UID.replace("0f1e", "3f1e")));
        Map<String, List<PodCgroups.PodDir>> look = PodCgroups.look(List.of(root));
        assertTrue(look.isEmpty(), look.toString());
        Path slice = Files.createDirectories(tmp.resolve("kubepods.slice"));
        Files.createDirectories(slice.resolve("kubepods-burstable.slice").resolve("kubepods-pod" + UNDERSCORED + ".slice"));
        Files.createDirectories(slice.resolve("user-kubepods-pod" + UNDERSCORED + ".slice"));
        Files.createDirectories(slice.resolve("pod" + UID));
        assertTrue(PodCgroups.look(List.of(slice)).isEmpty());
    }

    @Test
    void aPodsProcessesAreReadFromItsContainersBounded() throws IOException {
        Path pod = Files.createDirectories(tmp.resolve("pod" + UID));
        Files.writeString(pod.resolve("cgroup.procs"), "");
        Files.createDirectories(pod.resolve("c1"));
        Files.writeString(pod.resolve("c1").resolve("cgroup.procs"), "10\n11\n");
        Files.createDirectories(pod.resolve("c2").resolve("nested"));
        Files.writeString(pod.resolve("c2").resolve("nested").resolve("cgroup.procs"), "12\n");
        List<Long> pids = PodCgroups.processes(List.of(pod));
        assertEquals(List.of(10L, 11L, 12L), pids.stream().sorted().toList());
        StringBuilder many = new StringBuilder();
        for (int i = 0; i < 1000; i++) {
            many.append(i + 100).append('\n');
        }
        Files.writeString(pod.resolve("c1").resolve("cgroup.procs"), many);
        assertEquals(PodCgroups.MAX_PROCESSES, PodCgroups.processes(List.of(pod)).size());
    }

    /**
     * A namespace counts where the node's user namespace made it; for a pod with user namespaces,
     * also where root made its user namespace right below the node's (its runtime); never where a
     * user (or root of a pod without user namespaces) made one for itself.
     */
    @Test
    void onlyNamespacesTheRuntimeCouldHaveMadeCount() {
        String ours = "user:[1]";
        NetNamespace.Owner node = new NetNamespace.Owner(ours, null, 0);
        NetNamespace.Owner runtimes = new NetNamespace.Owner("user:[2]", ours, 0);
        NetNamespace.Owner usersOwn = new NetNamespace.Owner("user:[3]", ours, 4321);
        NetNamespace.Owner nested = new NetNamespace.Owner("user:[4]", "user:[2]", 0);
        assertTrue(PodNetns.counts(node, true, ours));
        assertTrue(PodNetns.counts(node, false, ours));
        assertFalse(PodNetns.counts(runtimes, true, ours), "root of a pod without user namespaces may unshare too");
        assertTrue(PodNetns.counts(runtimes, false, ours));
        assertFalse(PodNetns.counts(usersOwn, true, ours));
        assertFalse(PodNetns.counts(usersOwn, false, ours));
        assertFalse(PodNetns.counts(nested, false, ours), "made inside the pod's own user namespace");
    }
}
