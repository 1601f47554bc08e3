package io.github.sockmap4j.agent.kubernetes;

import io.github.sockmap4j.linux.sys.Cgroups;
import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Where the kubelet puts a pod's processes under the pods' cgroup (the agent's {@code --cgroup}),
 * and nowhere else: a directory a user made elsewhere under it, however it is named, is never a
 * pod's. With the cgroupfs driver, {@code ROOT/pod<uid>} (Guaranteed), {@code ROOT/burstable/pod<uid>}
 * and {@code ROOT/besteffort/pod<uid>}; with the systemd driver, for a root named {@code X.slice},
 * {@code ROOT/X-pod<uid>.slice}, {@code ROOT/X-burstable.slice/X-burstable-pod<uid>.slice} and
 * {@code ROOT/X-besteffort.slice/X-besteffort-pod<uid>.slice}, the uid's dashes as underscores.
 * The pod's containers are the cgroups below its directory.
 *
 * <p>{@link #look} lists the three class directories of each root once, whatever the number of
 * pods asked about: one look a tick serves every pod waiting for its processes.
 *
 * <p><b>Note:</b> threadsafe (no state).
 */
final class PodCgroups {
    /** A Kubernetes uid as the cgroupfs driver names it: a UUID, lower-case hex. */
    private static final String UID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";
    /** ... and as the systemd driver does (a dash separates a slice's parts there). */
    private static final String SYSTEMD_UID = "[0-9a-f]{8}_[0-9a-f]{4}_[0-9a-f]{4}_[0-9a-f]{4}_[0-9a-f]{12}";
    /** The most processes read of one pod: enough to see its containers agree, bounded against a pod that forks. */
    static final int MAX_PROCESSES = 256;
    /** How deep below a pod's directory its processes are read (a container's cgroup, and one it nests). */
    static final int DEPTH = 3;

    private PodCgroups() {
    }

    /** A pod's directory as the kubelet names it, and its QoS class (Guaranteed, Burstable, BestEffort). */
    record PodDir(Path dir, String qosClass) {
    }

    /**
     * One look at the layout under {@code roots}: each pod uid found (dashed, as the API server
     * gives it) to its directories (one, unless the same uid is in two classes).
     */
    static Map<String, List<PodDir>> look(List<Path> roots) {
        Map<String, List<PodDir>> found = new HashMap<>();
        for (Path root : roots) {
            String name = root.getFileName() == null ? "" : root.getFileName().toString();
            if (name.endsWith(".slice")) {
                String x = name.substring(0, name.length() - ".slice".length());
                list(root, Pattern.compile(Pattern.quote(x) + "-pod(" + SYSTEMD_UID + ")\\.slice"), "Guaranteed", found);
                list(root.resolve(x + "-burstable.slice"),
                        Pattern.compile(Pattern.quote(x) + "-burstable-pod(" + SYSTEMD_UID + ")\\.slice"), "Burstable", found);
                list(root.resolve(x + "-besteffort.slice"),
                        Pattern.compile(Pattern.quote(x) + "-besteffort-pod(" + SYSTEMD_UID + ")\\.slice"), "BestEffort", found);
            } else {
                Pattern pod = Pattern.compile("pod(" + UID + ")");
                list(root, pod, "Guaranteed", found);
                list(root.resolve("burstable"), pod, "Burstable", found);
                list(root.resolve("besteffort"), pod, "BestEffort", found);
            }
        }
        return found;
    }

    /** The directories of {@code classDir} whose name is {@code pattern}'s exactly, as {@code qos}'s. */
    private static void list(Path classDir, Pattern pattern, String qos, Map<String, List<PodDir>> found) {
        try (DirectoryStream<Path> entries = Files.newDirectoryStream(classDir)) {
            for (Path e : entries) {
                Matcher m = pattern.matcher(e.getFileName().toString());
                if (m.matches() && Files.isDirectory(e)) {
                    String uid = m.group(1).replace('_', '-').toLowerCase(Locale.ROOT);
                    found.computeIfAbsent(uid, u -> new ArrayList<>(1)).add(new PodDir(e, qos));
                }
            }
        } catch (IOException | RuntimeException e) {
            // No such class directory (a node with no pod of that class yet), or one gone meanwhile.
        }
    }

    /**
     * The directories of pod {@code uid} in {@code look}: those of its QoS class {@code qosClass}
     * when it is given, else all.
     */
    static List<Path> of(Map<String, List<PodDir>> look, String uid, String qosClass) {
        List<PodDir> dirs = look.getOrDefault(uid.toLowerCase(Locale.ROOT), List.of());
        return dirs.stream().filter(d -> qosClass == null || qosClass.isBlank() || d.qosClass().equals(qosClass))
                .map(PodDir::dir).toList();
    }

    /** The processes in {@code dirs} and the cgroups below them ({@value #DEPTH} deep), at most {@value #MAX_PROCESSES}. */
    static List<Long> processes(List<Path> dirs) {
        List<Long> pids = new ArrayList<>();
        for (Path dir : dirs) {
            for (Path cg : Cgroups.tree(dir, DEPTH)) {
                List<String> lines;
                try {
                    lines = Files.readAllLines(cg.resolve("cgroup.procs"));
                } catch (IOException e) {
                    continue; // a cgroup gone meanwhile
                }
                for (String line : lines) {
                    if (pids.size() >= MAX_PROCESSES) {
                        return pids;
                    }
                    try {
                        pids.add(Long.parseLong(line.strip()));
                    } catch (NumberFormatException blank) {
                        // An empty line.
                    }
                }
            }
        }
        return pids;
    }
}
