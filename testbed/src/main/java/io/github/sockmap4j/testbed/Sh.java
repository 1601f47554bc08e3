package io.github.sockmap4j.testbed;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/** The one way the test bed runs a command (ip, iptables, nft, sysctl in a namespace). */
public final class Sh {
    private static final long TIMEOUT_SECONDS = 60;

    private Sh() {
    }

    /**
     * Runs {@code cmd} and returns its output (stdout and stderr).
     *
     * @throws IOException it failed or took over 60 s, with its output
     */
    public static String run(String... cmd) throws IOException, InterruptedException {
        return run(List.of(cmd));
    }

    public static String run(List<String> cmd) throws IOException, InterruptedException {
        return runWithInput(null, cmd);
    }

    /** As {@link #run}, with {@code input} (when not null) as the command's standard input. */
    public static String runWithInput(String input, List<String> cmd) throws IOException, InterruptedException {
        List<String> resolved = new ArrayList<>(cmd);
        resolved.set(0, tool(cmd.get(0)));
        Process p = new ProcessBuilder(resolved).redirectErrorStream(true).start();
        try (var stdin = p.getOutputStream()) {
            if (input != null) {
                stdin.write(input.getBytes(StandardCharsets.UTF_8));
            }
        }
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new IOException(String.join(" ", cmd) + " took over " + TIMEOUT_SECONDS + " s: " + out);
        }
        if (p.exitValue() != 0) {
            throw new IOException(String.join(" ", cmd) + " failed (" + p.exitValue() + "): " + out);
        }
        return out;
    }

    /**
     * Where the command {@code name} is: on the PATH, else in the system directories a user's
     * PATH leaves out on Debian ({@code /usr/sbin}, {@code /sbin}, {@code /usr/local/sbin}), where
     * bpftool, ip and iptables live; {@code name} itself when it has a slash or is nowhere.
     */
    public static String tool(String name) {
        if (name.indexOf('/') >= 0) {
            return name;
        }
        List<String> dirs = new ArrayList<>();
        String path = System.getenv("PATH");
        if (path != null) {
            dirs.addAll(List.of(path.split(":")));
        }
        dirs.addAll(List.of("/usr/local/sbin", "/usr/sbin", "/sbin"));
        for (String dir : dirs) {
            if (!dir.isEmpty() && Files.isExecutable(Path.of(dir, name))) {
                return Path.of(dir, name).toString();
            }
        }
        return name;
    }

    /** {@code command} run inside network namespace {@code ns} ({@code ip netns exec}: its own /sys too). */
    public static List<String> in(String ns, List<String> command) {
        List<String> full = new ArrayList<>(List.of("ip", "netns", "exec", ns));
        full.addAll(command);
        return full;
    }

    /**
     * {@code command} run in network namespace {@code ns} only ({@code nsenter --net}): it keeps
     * the host's mounts, such as the cgroup and bpf file systems a process in a pod needs (which
     * {@code ip netns exec}'s fresh /sys hides).
     */
    public static List<String> inNetwork(String ns, List<String> command) {
        List<String> full = new ArrayList<>(List.of("nsenter", "--net=/run/netns/" + ns, "--"));
        full.addAll(command);
        return full;
    }
}
