package io.github.sockmap4j.testbed;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/** A second process (a JVM running a test main, or a shell command) talked to over stdio. */
public final class ChildJvm implements AutoCloseable {
    private final Process process;
    private final PrintWriter in;
    private final BlockingQueue<String> lines = new LinkedBlockingQueue<>();
    private final List<String> all = new ArrayList<>();
    /** A class path copied for this child alone ({@link #startAsUser}), removed when it is closed. */
    private Path copied;

    private ChildJvm(List<String> command) throws IOException {
        ProcessBuilder pb = new ProcessBuilder(command).redirectErrorStream(true);
        process = pb.start();
        in = new PrintWriter(process.getOutputStream(), true, StandardCharsets.UTF_8);
        Thread reader = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(
                    new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    synchronized (all) {
                        all.add(line);
                    }
                    lines.add(line);
                }
            } catch (IOException ignored) {
                // The process ended.
            }
        }, "child-output");
        reader.setDaemon(true);
        reader.start();
    }

    public static String java() {
        return Path.of(System.getProperty("java.home"), "bin", "java").toString();
    }

    public static String classpath() {
        String cp = System.getProperty("surefire.test.class.path");
        return cp != null ? cp : System.getProperty("java.class.path");
    }

    /** The cgroup {@link #requiredWhereOff} names: it does not exist, so the fast path is off. */
    public static final String NO_CGROUP = "/sys/fs/cgroup/no-such-sockmap4j-cgroup";

    /**
     * {@code main} in a child JVM where the fast path is required ({@code sockmap4j.require=true})
     * and off (its cgroup, {@link #NO_CGROUP}, does not exist). A child, since the setting is
     * process-wide; it needs no privileges.
     */
    public static ChildJvm requiredWhereOff(Class<?> main) throws IOException {
        List<String> cmd = new java.util.ArrayList<>(javaCommand(main));
        cmd.add(1, "-Dsockmap4j.require=true");
        cmd.add(1, "-Dsockmap4j.cgroup=" + NO_CGROUP);
        return start(cmd);
    }

    /** Whether {@code text} names why the fast path is off there: the missing cgroup, or missing privileges. */
    public static boolean namesOffCause(String text) {
        return text.contains("no-such-sockmap4j-cgroup") || text.contains("missing privileges");
    }

    /** {@code t} and its causes, "Class: message; " each: what a child prints for the test to read. */
    public static String causes(Throwable t) {
        StringBuilder out = new StringBuilder();
        for (Throwable c = t; c != null; c = c.getCause()) {
            out.append(c.getClass().getSimpleName()).append(": ").append(c.getMessage()).append("; ");
        }
        return out.toString();
    }

    /** The java command line running {@code main} with this JVM's test class path. */
    public static List<String> javaCommand(Class<?> main, String... args) {
        List<String> cmd = new ArrayList<>(List.of(java(), "--enable-native-access=ALL-UNNAMED",
                "-Dsockmap4j.lockDir=" + System.getProperty("sockmap4j.lockDir", "/run/sockmap4j"),
                "-cp", classpath(), main.getName()));
        cmd.addAll(List.of(args));
        return cmd;
    }

    public static ChildJvm start(List<String> command) throws IOException {
        return new ChildJvm(command);
    }

    /**
     * A java command ({@link #javaCommand}) run as {@code uid} and gid {@code uid}, no other groups
     * ({@code setpriv}), over a copy of this JVM's class path that any user may read (a build
     * under /root is not); the copy is removed when the child is closed. Needs root.
     */
    public static ChildJvm startAsUser(int uid, List<String> javaCommand) throws IOException {
        Path dir = readableCopyOfTheClassPath();
        try {
            List<String> java = new ArrayList<>(javaCommand);
            java.set(java.indexOf("-cp") + 1, classPathIn(dir));
            java.add(1, "-XX:-UsePerfData");
            List<String> cmd = new ArrayList<>(List.of("setpriv", "--reuid=" + uid, "--regid=" + uid, "--clear-groups",
                    "--"));
            cmd.addAll(java);
            StringBuilder sh = new StringBuilder("cd '" + dir + "' && exec");
            for (String c : cmd) {
                sh.append(" '").append(c.replace("'", "'\\''")).append('\'');
            }
            ChildJvm child = new ChildJvm(List.of("sh", "-c", sh.toString()));
            child.copied = dir;
            return child;
        } catch (IOException | RuntimeException e) {
            deleteTree(dir);
            throw e;
        }
    }

    private static Path readableCopyOfTheClassPath() throws IOException {
        Path dir = java.nio.file.Files.createTempDirectory("sm4j-cp-");
        dir.toFile().setReadable(true, false);
        dir.toFile().setExecutable(true, false);
        int i = 0;
        for (String entry : classpath().split(java.io.File.pathSeparator)) {
            Path from = Path.of(entry);
            if (!java.nio.file.Files.exists(from)) {
                continue;
            }
            Path to = dir.resolve(i++ + "-" + from.getFileName());
            try (java.util.stream.Stream<Path> walk = java.nio.file.Files.walk(from)) {
                for (Path p : walk.toList()) {
                    Path target = to.resolve(from.relativize(p).toString());
                    if (java.nio.file.Files.isDirectory(p)) {
                        java.nio.file.Files.createDirectories(target);
                    } else {
                        java.nio.file.Files.copy(p, target, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
                    }
                    target.toFile().setReadable(true, false);
                    target.toFile().setExecutable(java.nio.file.Files.isDirectory(p), false);
                }
            }
        }
        return dir;
    }

    private static String classPathIn(Path dir) throws IOException {
        try (java.util.stream.Stream<Path> entries = java.nio.file.Files.list(dir)) {
            return String.join(java.io.File.pathSeparator, entries.sorted(java.util.Comparator.comparingInt(
                    (Path p) -> Integer.parseInt(p.getFileName().toString().split("-", 2)[0]))).map(Path::toString).toList());
        }
    }

    private static void deleteTree(Path dir) {
        try (java.util.stream.Stream<Path> walk = java.nio.file.Files.walk(dir)) {
            for (Path p : walk.sorted(java.util.Comparator.reverseOrder()).toList()) {
                java.nio.file.Files.delete(p);
            }
        } catch (IOException e) {
            throw new java.io.UncheckedIOException("could not remove the class path copy " + dir, e);
        }
    }

    /** Runs the command after moving the shell into {@code cgroup}, so all it creates is there. */
    public static ChildJvm startInCgroup(Path cgroup, List<String> command) throws IOException {
        StringBuilder sb = new StringBuilder("echo $$ > '" + cgroup.resolve("cgroup.procs") + "' && exec");
        for (String c : command) {
            sb.append(" '").append(c.replace("'", "'\\''")).append('\'');
        }
        return new ChildJvm(List.of("sh", "-c", sb.toString()));
    }

    /**
     * Compiles the test bed's C peer ({@code testbed/src/main/c/peer.c}: ping-pong, streams,
     * dribbling and flooding clients, the modes its usage line lists) to {@code exe}, from the copy
     * in this jar.
     */
    public static Path compilePeer(Path exe) throws IOException, InterruptedException {
        return compileBed("peer.c", exe);
    }

    /**
     * Compiles C program {@code name} of the test bed ({@code testbed/src/main/c}: {@code peer.c},
     * {@code blocking.c}, each with its usage in its header) to {@code exe}, from the copy in this jar.
     */
    public static Path compileBed(String name, Path exe) throws IOException, InterruptedException {
        Path source = exe.resolveSibling(exe.getFileName() + ".c");
        Path header = exe.resolveSibling("peer_io.h"); // peer.c includes it from its own directory
        extract(name, source);
        try {
            extract("peer_io.h", header);
            return compileC(source.toString(), exe);
        } finally {
            java.nio.file.Files.deleteIfExists(source);
            java.nio.file.Files.deleteIfExists(header);
        }
    }

    /** Copies a C source of the test bed's jar to {@code to}. */
    private static void extract(String name, Path to) throws IOException {
        try (var in = ChildJvm.class.getResourceAsStream(name)) {
            if (in == null) {
                throw new IllegalStateException(name + " is not in the test bed's jar: build testbed first");
            }
            java.nio.file.Files.copy(in, to, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        }
    }

    /**
     * Compiles a C program of the tests (a path relative to the module, e.g. src/test/c/x.c) to
     * {@code exe}; fails the test with the compiler's output when it does not compile.
     */
    public static Path compileC(String source, Path exe) throws IOException, InterruptedException {
        Process cc = new ProcessBuilder("cc", "-O2", "-Wall", "-o", exe.toString(), source).redirectErrorStream(true)
                .start();
        String out = new String(cc.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
        if (cc.waitFor() != 0) {
            throw new AssertionError("compiling " + source + ": " + out);
        }
        return exe.toAbsolutePath();
    }

    /** The next line starting with {@code prefix}, within the timeout. */
    public String expect(String prefix, long seconds) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(Await.scaled(seconds));
        while (true) {
            long left = deadline - System.nanoTime();
            String line = left > 0 ? lines.poll(left, TimeUnit.NANOSECONDS) : null;
            if (line == null) {
                throw new AssertionError("no line starting with '" + prefix + "' within " + Await.scaled(seconds)
                        + " s; output: " + output());
            }
            if (line.startsWith(prefix)) {
                return line.substring(prefix.length());
            }
        }
    }

    public void send(String line) {
        in.println(line);
    }

    /** Closes the process's standard input: it reads end of file. */
    public void closeInput() {
        in.close();
    }

    public String output() {
        synchronized (all) {
            return String.join("\n", all);
        }
    }

    public int waitFor(long seconds) throws InterruptedException {
        if (!process.waitFor(Await.scaled(seconds), TimeUnit.SECONDS)) {
            process.destroyForcibly();
            throw new AssertionError("child did not exit within " + Await.scaled(seconds) + " s; output: " + output());
        }
        return process.exitValue();
    }

    /**
     * SIGTERM: the process may close what it opened; see {@link #waitFor}. Sent with kill(1),
     * since Process.destroy() also closes this side of its output, losing what it prints then.
     */
    public void terminate() throws IOException, InterruptedException {
        Process kill = new ProcessBuilder("kill", "-TERM", Long.toString(process.pid())).inheritIO().start();
        if (kill.waitFor() != 0) {
            throw new IOException("kill -TERM " + process.pid() + " failed");
        }
    }

    public long pid() {
        return process.pid();
    }

    public boolean isAlive() {
        return process.isAlive();
    }

    /** SIGKILL: the process dies at once, its sockets closed by the kernel. */
    public void kill() throws InterruptedException {
        process.destroyForcibly();
        process.waitFor(10, TimeUnit.SECONDS);
    }

    @Override
    public void close() {
        if (process.isAlive()) {
            process.destroy();
            try {
                if (!process.waitFor(10, TimeUnit.SECONDS)) {
                    process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
                }
            } catch (InterruptedException e) {
                process.destroyForcibly();
                Thread.currentThread().interrupt();
            }
        }
        if (copied != null) {
            deleteTree(copied);
            copied = null;
        }
    }
}
