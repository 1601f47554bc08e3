package io.github.sockmap4j.testsupport;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapConfig;
import io.github.sockmap4j.linux.bpf.Pins;
import io.github.sockmap4j.linux.bpf.RunStats;
import io.github.sockmap4j.linux.ffi.Libbpf;
import io.github.sockmap4j.testbed.Bpftool;
import io.github.sockmap4j.testbed.Cgroup2;
import io.github.sockmap4j.testbed.KernelCorner;
import java.io.Closeable;
import java.io.IOException;
import java.nio.file.Path;
import java.util.function.UnaryOperator;

/**
 * A test's own corner of the kernel (the test bed's {@link KernelCorner}: a child cgroup this JVM
 * moves into, a pin directory) and the Sockmap opened over both. {@link #close()} undoes all of
 * it, and checks that nothing is left; a shutdown hook does the same if the JVM dies first.
 *
 * <p>One source for two builds: test-support's jar, for the modules' tests, and core's own tests,
 * which cannot depend on test-support (it depends on core); both add {@code src/kernel/java}.
 */
public final class TestKernel implements AutoCloseable {
    public static final boolean REQUIRED = Boolean.getBoolean("sockmap4j.require");

    public final Path cgroup;
    public final Path pinDir;
    public final Path originalCgroup;
    public final Sockmap sockmap;
    private final KernelCorner corner;

    private TestKernel(KernelCorner corner, Sockmap sockmap) {
        this.corner = corner;
        this.cgroup = corner.cgroup;
        this.pinDir = corner.pinDir;
        this.originalCgroup = corner.originalCgroup;
        this.sockmap = sockmap;
    }

    /** See {@link Cgroup2#uniqueName}. */
    public static String uniqueName(String what) {
        return Cgroup2.uniqueName(what);
    }

    /** A new child cgroup under the unified hierarchy (not entered): see {@link Cgroup2#create}. */
    public static Path newCgroup(String what) throws IOException {
        return Cgroup2.create(what);
    }

    /**
     * Removes every pin of {@code pinDir} (maps, programs, cgroup links) even while processes use
     * them, as an operator's {@code sockmap4j down} does; how many went.
     */
    public static int removePins(Path pinDir) throws IOException {
        return Pins.forceRemove(pinDir);
    }

    /** The kernel's per-program run statistics, on until the handle is closed (CAP_SYS_ADMIN). */
    public static Closeable runStats() throws IOException {
        return RunStats.enable(Libbpf.loadOrThrow());
    }

    public static TestKernel start(String what) throws IOException {
        return start(what, c -> c);
    }

    /**
     * Opens a fast path in a fresh cgroup and pin directory. Fails when the fast path is
     * required (sockmap4j.require=true) and cannot be had.
     */
    public static TestKernel start(String what, UnaryOperator<SockmapConfig> tweak) throws IOException {
        KernelCorner corner = KernelCorner.enter(what);
        try {
            corner.atExit(() -> removePins(corner.pinDir));
            SockmapConfig config = tweak.apply(SockmapConfig.fromSystemProperties()
                    .withPinDirectory(corner.pinDir).withCgroup(corner.cgroup).withRequired(REQUIRED));
            Sockmap s = Sockmap.open(config);
            corner.atExit(s::close);
            return new TestKernel(corner, s);
        } catch (RuntimeException e) {
            corner.close();
            throw e;
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
        corner.closeAfter(sockmap::close);
    }
}
