package io.github.sockmap4j.testbed;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/** The kernel's own view, through bpftool: a witness independent of the library. */
public final class Bpftool {
    private Bpftool() {
    }

    public static String run(String... args) throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>();
        cmd.add(Sh.tool("bpftool"));
        cmd.addAll(List.of(args));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(30, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new IOException("bpftool timed out");
        }
        return out;
    }

    /**
     * How many entries a pinned map holds now: its raw keys (byte arrays) counted, not the
     * "formatted" ones bpftool adds for a map with BTF.
     */
    public static int mapEntries(Path pinned) throws IOException, InterruptedException {
        String out = run("-j", "map", "dump", "pinned", pinned.toString());
        return (int) java.util.regex.Pattern.compile("\"key\"\\s*:\\s*\\[").matcher(out).results().count();
    }

    /**
     * The id of the map named {@code name} (its first 15 characters, as the kernel keeps it) that
     * the pinned program {@code program} uses: for a map that is not pinned.
     */
    public static String mapIdOf(Path program, String name) throws IOException, InterruptedException {
        String prog = run("-j", "prog", "show", "pinned", program.toString());
        java.util.regex.Matcher ids = java.util.regex.Pattern.compile("\"map_ids\"\\s*:\\s*\\[([^\\]]*)\\]").matcher(prog);
        if (ids.find()) {
            for (String id : ids.group(1).split(",")) {
                String map = run("-j", "map", "show", "id", id.strip());
                if (map.contains("\"name\":\"" + name.substring(0, Math.min(15, name.length())) + "\"")) {
                    return id.strip();
                }
            }
        }
        throw new IOException("no map " + name + " in " + program + ": " + prog);
    }

    /** Waits up to 5 s for a pinned map to hold {@code n} entries; returns what it holds then. */
    public static int awaitMapEntries(Path pinned, int n) throws IOException, InterruptedException {
        Await.holdsWithin(java.time.Duration.ofSeconds(5), () -> mapEntries(pinned) == n);
        return mapEntries(pinned);
    }

    /** The programs attached to a cgroup, one line each (empty when none). */
    public static List<String> cgroupAttachments(Path cgroup) throws IOException, InterruptedException {
        List<String> lines = new ArrayList<>();
        for (String line : run("cgroup", "show", cgroup.toString()).split("\n")) {
            if (line.matches("^\\s*\\d+\\s+.*")) {
                lines.add(line.trim());
            }
        }
        return lines;
    }
}
