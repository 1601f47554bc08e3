package io.github.sockmap4j.examples.rag;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/** A running pipeline stage: a child JVM, or a {@link RagService} in this one. */
abstract class Stage implements AutoCloseable {
    final RagService.Role role;

    Stage(RagService.Role role) {
        this.role = role;
    }

    abstract int port();

    abstract String info();

    /** CPU time the stage's process has used so far, or -1 when it shares this JVM. */
    abstract long cpuNanos();

    /** The part of {@link #cpuNanos()} spent in the kernel, or -1 when it shares this JVM. */
    long systemCpuNanos() {
        return -1;
    }

    /** The stage's resident set size, or -1 when it shares this JVM. */
    abstract long rssBytes();

    /**
     * Where the stage's calls have spent their time so far ({@link StageClock}), or
     * {@link StageClock.Times#NONE} when the stage cannot say.
     */
    StageClock.Times times() {
        return StageClock.Times.NONE;
    }

    /** The stage's process id, or -1 when it shares this JVM. */
    long pid() {
        return -1;
    }

    /** The stage's threads now ({@link ThreadTimes}), or {@link ThreadTimes#UNKNOWN} when it shares this JVM. */
    ThreadTimes threads() {
        long pid = pid();
        return pid < 0 ? ThreadTimes.UNKNOWN : ThreadTimes.read(Path.of("/proc", Long.toString(pid), "task"));
    }

    @Override
    public abstract void close();

    static Stage inProcess(RagService.Role role, RagService.Settings s, boolean fast, int... downstream) throws IOException {
        RagService svc = RagService.start(role, s, fast, 0, downstream);
        return new Stage(role) {
            @Override
            int port() {
                return svc.port();
            }

            @Override
            String info() {
                return svc.info();
            }

            @Override
            long cpuNanos() {
                return -1;
            }

            @Override
            long rssBytes() {
                return -1;
            }

            @Override
            StageClock.Times times() {
                return svc.times();
            }

            @Override
            public void close() {
                svc.close();
            }
        };
    }

    /**
     * Starts a stage in a child JVM with this JVM's class path and flags, and waits (up to
     * {@code timeout}) for its READY line. The child's standard error goes to this one's.
     */
    static CompletableFuture<Stage> spawn(RagService.Role role, RagService.Settings s, boolean fast,
            List<String> jvmFlags, Duration timeout, int... downstream) throws IOException {
        List<String> d = new ArrayList<>();
        for (int p : downstream) {
            d.add(Integer.toString(p));
        }
        return spawn(role, s, fast, jvmFlags, timeout, Placement.LOOPBACK, d);
    }

    /**
     * Where a child stage runs: {@code prefix} before its command (entering its pod's network
     * namespace), and the address and port it listens on (0: any free one).
     */
    record Placement(List<String> prefix, String bind, int port) {
        static final Placement LOOPBACK = new Placement(List.of(), "127.0.0.1", 0);
    }

    /**
     * As {@link #spawn(RagService.Role, RagService.Settings, boolean, List, Duration, int...)},
     * placed by {@code where}; the gateway dials {@code downstream} (PORT on loopback, or
     * ADDRESS:PORT).
     */
    static CompletableFuture<Stage> spawn(RagService.Role role, RagService.Settings s, boolean fast,
            List<String> jvmFlags, Duration timeout, Placement where, List<String> downstream) throws IOException {
        List<String> cmd = new ArrayList<>(where.prefix());
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.addAll(jvmFlags);
        cmd.add("-cp");
        cmd.add(System.getProperty("java.class.path"));
        cmd.add(RagService.class.getName());
        cmd.add(role.name().toLowerCase(java.util.Locale.ROOT));
        cmd.addAll(s.args());
        if (fast) {
            cmd.add("--fast");
        }
        cmd.add("--bind=" + where.bind());
        cmd.add("--port=" + where.port());
        if (!downstream.isEmpty()) {
            cmd.add("--downstream=" + String.join(",", downstream));
        }
        Process p = new ProcessBuilder(cmd).start();
        Thread errors = new Thread(() -> forwardErrors(p, role), "rag-" + role + "-err");
        errors.setDaemon(true);
        errors.start();
        CompletableFuture<Stage> ready = CompletableFuture.supplyAsync(() -> {
            try {
                BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
                String line;
                while ((line = out.readLine()) != null) {
                    if (line.startsWith("READY ")) {
                        String[] parts = line.split(" ", 3);
                        Child child = new Child(role, p, Integer.parseInt(parts[1]), parts.length > 2 ? parts[2] : "");
                        Thread drain = new Thread(() -> drain(out, child.answers), "rag-" + role + "-out");
                        drain.setDaemon(true);
                        drain.start();
                        return child;
                    }
                    System.out.println("[" + role.name().toLowerCase(java.util.Locale.ROOT) + "] " + line);
                }
                throw new IllegalStateException("the " + role + " stage exited (code " + p.waitFor() + ") before serving");
            } catch (IOException e) {
                throw new IllegalStateException("reading the " + role + " stage's output: " + e.getMessage(), e);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted", e);
            }
        });
        return ready.orTimeout(timeout.toMillis(), TimeUnit.MILLISECONDS).whenComplete((st, err) -> {
            if (err != null) {
                p.destroyForcibly();
            }
        });
    }

    static Stage await(CompletableFuture<Stage> f) throws IOException {
        try {
            return f.get();
        } catch (ExecutionException e) {
            Throwable c = e.getCause();
            throw new IOException(c instanceof TimeoutException ? "a stage did not start in time" : c.getMessage(), c);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted while starting the stages", e);
        }
    }

    /** The stage's standard error on ours, prefixed with its role, without the JVM's notice about incubator modules. */
    private static void forwardErrors(Process p, RagService.Role role) {
        String prefix = "[" + role.name().toLowerCase(java.util.Locale.ROOT) + "] ";
        try (BufferedReader err = new BufferedReader(new InputStreamReader(p.getErrorStream(), StandardCharsets.UTF_8))) {
            String line;
            while ((line = err.readLine()) != null) {
                if (!line.startsWith("WARNING: Using incubator modules")) {
                    System.err.println(prefix + line);
                }
            }
        } catch (IOException ignored) {
            // the stage exited
        }
    }

    /** The stage's output after READY: its answers to {@code TIMES} go to {@code answers}, the rest nowhere. */
    private static void drain(BufferedReader out, java.util.concurrent.BlockingQueue<String> answers) {
        try {
            String line;
            while ((line = out.readLine()) != null) {
                if (line.startsWith("TIMES ")) {
                    answers.offer(line);
                }
            }
        } catch (IOException ignored) {
            // the stage exited
        }
    }

    private static final class Child extends Stage {
        private final Process process;
        private final int port;
        private final String info;
        final java.util.concurrent.BlockingQueue<String> answers = new java.util.concurrent.LinkedBlockingQueue<>();

        Child(RagService.Role role, Process process, int port, String info) {
            super(role);
            this.process = process;
            this.port = port;
            this.info = info;
        }

        @Override
        int port() {
            return port;
        }

        @Override
        String info() {
            return info;
        }

        @Override
        long cpuNanos() {
            return process.info().totalCpuDuration().map(Duration::toNanos).orElse(-1L);
        }

        @Override
        long pid() {
            return process.pid();
        }

        /** Asks the stage process on its standard input and waits up to 5 s for its answer. */
        @Override
        synchronized StageClock.Times times() {
            try {
                answers.clear();
                process.getOutputStream().write("TIMES\n".getBytes(StandardCharsets.UTF_8));
                process.getOutputStream().flush();
                String line = answers.poll(5, TimeUnit.SECONDS);
                return line == null ? StageClock.Times.NONE : StageClock.Times.parse(line);
            } catch (IOException | RuntimeException e) {
                return StageClock.Times.NONE;
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return StageClock.Times.NONE;
            }
        }

        @Override
        long systemCpuNanos() {
            try {
                String stat = Files.readString(Path.of("/proc", Long.toString(process.pid()), "stat"));
                // Fields after the command (which may hold spaces): state is field 3, stime field 15.
                String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
                return Long.parseLong(f[12]) * 10_000_000L; // USER_HZ is 100 on Linux
            } catch (IOException | RuntimeException e) {
                return -1;
            }
        }

        @Override
        long rssBytes() {
            try {
                for (String line : Files.readAllLines(Path.of("/proc", Long.toString(process.pid()), "status"))) {
                    if (line.startsWith("VmRSS:")) {
                        return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
                    }
                }
            } catch (IOException | NumberFormatException e) {
                // the process is gone
            }
            return -1;
        }

        /** Closes the stage's standard input (it stops and closes its Sockmap), then waits for it. */
        @Override
        public void close() {
            try {
                process.getOutputStream().close();
                if (!process.waitFor(15, TimeUnit.SECONDS)) {
                    System.err.println("the " + role + " stage did not stop in 15 s: killing it");
                    process.destroyForcibly().waitFor(5, TimeUnit.SECONDS);
                }
            } catch (IOException e) {
                process.destroyForcibly();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                process.destroyForcibly();
            }
        }
    }

    /**
     * This JVM's flags that a stage's JVM needs too (native access, modules, opens, sockmap4j's
     * system properties), plus its heap size and how its fast path's event loops wait.
     */
    static List<String> jvmFlags(String heap, String profile, String handlers) {
        List<String> flags = new ArrayList<>();
        for (String a : ManagementFactory.getRuntimeMXBean().getInputArguments()) {
            if (a.startsWith("--enable-native-access") || a.startsWith("--add-modules") || a.startsWith("--add-opens")
                    || a.startsWith("--sun-misc-unsafe-memory-access")) {
                flags.add(a);
            }
        }
        // sockmap4j's settings (pin directory, cgroup, require), however this JVM got them.
        for (String k : System.getProperties().stringPropertyNames()) {
            if (k.startsWith("sockmap4j.")) {
                flags.add("-D" + k + "=" + System.getProperty(k));
            }
        }
        if (flags.stream().noneMatch(f -> f.startsWith("--add-modules") || f.equals("jdk.incubator.vector"))) {
            flags.add("--add-modules=jdk.incubator.vector");
        }
        flags.add("-Xmx" + heap);
        flags.add("-Drag.profile=" + profile);
        flags.add("-Drag.handlers=" + handlers);
        flags.add("-XX:+UseSerialGC");
        flags.add("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn");
        return flags;
    }
}
