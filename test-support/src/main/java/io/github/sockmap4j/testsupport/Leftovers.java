package io.github.sockmap4j.testsupport;

import io.github.sockmap4j.testbed.Await;
import io.github.sockmap4j.testbed.ChildJvm;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** What a test made and removes at its end, also when it failed: cgroups once their peers left, work directories. */
public final class Leftovers {
    private Leftovers() {
    }

    /**
     * Closes each of {@code all} that is not null, in order, every one also when one before it
     * failed; the first failure is thrown with the later ones suppressed in it.
     */
    public static void closeAll(AutoCloseable... all) throws Exception {
        Exception first = null;
        for (AutoCloseable c : all) {
            if (c == null) {
                continue;
            }
            try {
                c.close();
            } catch (Exception e) {
                if (first == null) {
                    first = e;
                } else {
                    first.addSuppressed(e);
                }
            }
        }
        if (first != null) {
            throw first;
        }
    }

    /** Ends the agent process, then removes its pins (also when ending it failed). */
    public static void removeAgent(ChildJvm agent, Path pins) throws IOException {
        try {
            if (agent != null) {
                agent.close();
            }
        } finally {
            if (pins != null) {
                TestKernel.removePins(pins);
            }
        }
    }

    /** Removes each cgroup that exists (children first: list them so), once every process left it. */
    public static void removeCgroups(Path... cgroups) throws IOException, InterruptedException {
        for (Path c : cgroups) {
            if (c != null && Files.exists(c)) {
                Await.until("the peers left " + c, () -> Files.readString(c.resolve("cgroup.procs")).isBlank());
                Files.delete(c);
            }
        }
    }

    /** Removes a flat directory of files (a test's compiled peers and policy files). */
    public static void removeDirectory(Path dir) throws IOException {
        if (dir == null) {
            return;
        }
        try (var files = Files.list(dir)) {
            for (Path p : files.toList()) {
                Files.delete(p);
            }
        }
        Files.delete(dir);
    }
}
