package io.github.sockmap4j.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * This JVM's system calls by kind over a window, counted by {@code perf stat} on the kernel's
 * {@code syscalls:sys_enter_*} tracepoints for every thread this process has when the window
 * starts: what a call costs in the kernel's entry points, beside its wake-ups. {@code write} and
 * {@code read} include Netty's eventfd (a loop woken from another thread has its eventfd written,
 * and reads it back), which no counter here tells from a socket's.
 *
 * <p>Needs {@code perf} (Debian's {@code linux-perf}) and root; {@link #start} says why not where
 * it cannot count.
 */
final class SyscallCount implements AutoCloseable {
    /** The system calls counted, in the order printed. */
    static final List<String> CALLS = List.of("write", "writev", "sendmsg", "sendto", "read", "readv", "recvmsg",
            "recvfrom", "epoll_wait", "epoll_pwait", "epoll_pwait2", "futex");

    private final Process perf;
    private final Path out;

    private SyscallCount(Process perf, Path out) {
        this.perf = perf;
        this.out = out;
    }

    /**
     * Starts counting this process's system calls.
     *
     * @return the counter, or null with the reason printed where perf cannot count here
     */
    static SyscallCount start() {
        try {
            Path out = Files.createTempFile("sm4j-syscalls", ".csv");
            StringBuilder events = new StringBuilder();
            for (String c : CALLS) {
                events.append(events.length() == 0 ? "" : ",").append("syscalls:sys_enter_").append(c);
            }
            Process p = new ProcessBuilder("perf", "stat", "-x,", "-o", out.toString(), "-e", events.toString(),
                    "-p", Long.toString(ProcessHandle.current().pid())).redirectErrorStream(true)
                    .redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
            return new SyscallCount(p, out);
        } catch (IOException e) {
            System.out.println("system calls not counted: perf did not start (" + e.getMessage()
                    + "; apt-get install linux-perf)");
            return null;
        }
    }

    /**
     * Stops counting (perf stat prints its counts on SIGINT) and reads them.
     *
     * @return each call's count, or an empty map with the reason printed where perf counted nothing
     */
    Map<String, Long> stop() throws IOException, InterruptedException {
        new ProcessBuilder("kill", "-INT", Long.toString(perf.pid())).start().waitFor();
        if (!perf.waitFor(10, TimeUnit.SECONDS)) {
            perf.destroyForcibly();
        }
        Map<String, Long> counts = new LinkedHashMap<>();
        for (String line : Files.readAllLines(out, StandardCharsets.UTF_8)) {
            String[] f = line.split(",");
            if (f.length > 2 && f[2].startsWith("syscalls:sys_enter_")) {
                try {
                    counts.put(f[2].substring("syscalls:sys_enter_".length()), Long.parseLong(f[0]));
                } catch (NumberFormatException notCounted) {
                    // "<not supported>" or "<not counted>": the kernel has no such tracepoint
                }
            }
        }
        if (counts.isEmpty()) {
            System.out.println("system calls not counted: perf stat said " + String.join(" ",
                    Files.readAllLines(out, StandardCharsets.UTF_8)).trim());
        }
        return counts;
    }

    @Override
    public void close() throws IOException {
        perf.destroyForcibly();
        Files.deleteIfExists(out);
    }
}
