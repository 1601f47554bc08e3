package io.github.sockmap4j;

import io.github.sockmap4j.admin.SockmapAdmin;
import static org.junit.jupiter.api.Assertions.assertFalse;

import io.github.sockmap4j.internal.sys.Cgroups;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.UnaryOperator;

/**
 * A test's own corner of the kernel: a child cgroup this JVM moves into, a pin directory, and
 * the Sockmap opened over both. {@link #close()} undoes all of it, and checks that nothing is
 * left; a shutdown hook does the same if the JVM dies first.
 */
public final class TestKernel implements AutoCloseable {
    private static final AtomicInteger SEQ = new AtomicInteger();
    public static final boolean REQUIRED = Boolean.getBoolean("sockmap4j.require");

    public final Path cgroup;
    public final Path pinDir;
    public final Path originalCgroup;
    public final Sockmap sockmap;
    private final Thread hook;

    private TestKernel(Path cgroup, Path pinDir, Path originalCgroup, Sockmap sockmap) {
        this.cgroup = cgroup;
        this.pinDir = pinDir;
        this.originalCgroup = originalCgroup;
        this.sockmap = sockmap;
        this.hook = new Thread(this::cleanupQuietly, "test-kernel-cleanup");
        Runtime.getRuntime().addShutdownHook(hook);
    }

    public static String uniqueName(String what) {
        return "sockmap4j-test-" + ProcessHandle.current().pid() + "-" + what + "-" + SEQ.incrementAndGet();
    }

    /** A new child cgroup under the unified hierarchy (not entered). */
    public static Path newCgroup(String what) throws IOException {
        Path unified = Cgroups.unifiedMount().orElseThrow(() -> new IllegalStateException("no cgroup2")).mountPoint();
        Path dir = unified.resolve(uniqueName(what));
        Files.createDirectory(dir);
        return dir;
    }

    public static TestKernel start(String what) throws IOException {
        return start(what, c -> c);
    }

    /**
     * Opens a fast path in a fresh cgroup and pin directory. Fails when the fast path is
     * required (sockmap4j.require=true) and cannot be had.
     */
    public static TestKernel start(String what, UnaryOperator<SockmapConfig> tweak) throws IOException {
        Path original = Cgroups.ownCgroupDir().orElseThrow();
        Path cg = newCgroup(what);
        Path pins = Path.of("/sys/fs/bpf").resolve(uniqueName(what));
        Sockmap s = null;
        try {
            Cgroups.moveSelf(cg);
            SockmapConfig config = tweak.apply(SockmapConfig.fromSystemProperties()
                    .withPinDirectory(pins).withCgroup(cg).withRequired(REQUIRED));
            s = Sockmap.open(config);
            return new TestKernel(cg, pins, original, s);
        } catch (IOException | RuntimeException e) {
            if (s != null) {
                s.close();
            }
            Cgroups.moveSelf(original);
            Files.deleteIfExists(cg);
            throw e;
        }
    }

    private void cleanupQuietly() {
        try {
            sockmap.close();
            Cgroups.moveSelf(originalCgroup);
            Files.deleteIfExists(cgroup);
            SockmapAdmin.removePins(pinDir);
        } catch (IOException ignored) {
            // Best effort at exit.
        }
    }

    /** Whether the kernel's policy map holds a rule for {@code port} (bpftool's dump, a witness of its own). */
    public boolean policyHas(int port) throws Exception {
        String dump = Bpftool.run("-j", "map", "dump", "pinned", pinDir.resolve("policy").toString());
        // the raw key holds the port big-endian at bytes 4..5
        String hex = String.format("\"0x%02x\",\"0x%02x\"", port >>> 8, port & 0xff);
        return dump.contains(hex);
    }

    @Override
    public void close() throws IOException {
        try {
            sockmap.close();
            Cgroups.moveSelf(originalCgroup);
            Files.deleteIfExists(cgroup);
        } finally {
            Runtime.getRuntime().removeShutdownHook(hook);
        }
        boolean left = Files.exists(pinDir);
        SockmapAdmin.removePins(pinDir); // whatever happened, the kernel is left clean
        assertFalse(left, "pins left behind in " + pinDir + " (sockets still registered: a channel was not closed)");
    }
}
