package io.github.sockmap4j.cli;

import io.github.sockmap4j.testbed.Await;
import io.github.sockmap4j.testbed.ChildJvm;
import io.github.sockmap4j.admin.SockmapAdmin;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** What a test made and removes at its end, also when it failed: cgroups once their peers left, work directories. */
final class Leftovers {
    private Leftovers() {
    }

    /** Ends the agent process, then removes its pins (also when ending it failed). */
    static void removeAgent(ChildJvm agent, Path pins) throws IOException {
        try {
            if (agent != null) {
                agent.close();
            }
        } finally {
            SockmapAdmin.removePins(pins);
        }
    }

    /** Removes each cgroup that exists (children first: list them so), once every process left it. */
    static void removeCgroups(Path... cgroups) throws IOException, InterruptedException {
        for (Path c : cgroups) {
            if (c != null && Files.exists(c)) {
                Await.until("the peers left " + c, () -> Files.readString(c.resolve("cgroup.procs")).isBlank());
                Files.delete(c);
            }
        }
    }

    /** Removes a flat directory of files (a test's compiled peers and policy files). */
    static void removeDirectory(Path dir) throws IOException {
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
