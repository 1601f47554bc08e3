package io.github.sockmap4j;

import java.nio.file.Path;
import java.util.Objects;

/**
 * Where the fast path lives and how it behaves. {@link #fromSystemProperties()} reads:
 * <ul>
 *   <li>{@code sockmap4j.pinDir}: bpffs directory of the shared maps and programs
 *       (default {@code /sys/fs/bpf/sockmap4j}); processes naming the same one share them;</li>
 *   <li>{@code sockmap4j.cgroup}: the cgroup v2 directory the sockops program attaches to
 *       (default: this process's own cgroup, never the root one unless
 *       {@code sockmap4j.allowRootCgroup=true});</li>
 *   <li>{@code sockmap4j.maxSockets}: SOCKHASH capacity (default 65535); a connection that finds
 *       it full stays on plain TCP;</li>
 *   <li>{@code sockmap4j.disable=true}: force plain TCP;</li>
 *   <li>{@code sockmap4j.require=true}: fail instead of falling back to plain TCP.</li>
 * </ul>
 *
 * @param pinDirectory    bpffs directory holding the pinned maps and programs
 * @param cgroup          cgroup v2 directory to attach to, null for this process's own
 * @param maxSockets      SOCKHASH capacity; used only by the process that creates the pins
 * @param disabled        force plain TCP
 * @param required        throw {@link SockmapUnavailableException} instead of falling back
 * @param allowRootCgroup permit attaching to the root cgroup (every process on the host)
 * @param probe           run the start-up self-test of the kernel
 */
public record SockmapConfig(Path pinDirectory, Path cgroup, int maxSockets, boolean disabled,
                            boolean required, boolean allowRootCgroup, boolean probe) {
    public static final Path DEFAULT_PIN_DIRECTORY = Path.of("/sys/fs/bpf/sockmap4j");
    public static final int DEFAULT_MAX_SOCKETS = 65535;

    public SockmapConfig {
        Objects.requireNonNull(pinDirectory, "pinDirectory");
        if (maxSockets < 2) {
            throw new IllegalArgumentException("maxSockets must be at least 2: maxSockets=" + maxSockets);
        }
    }

    /** The defaults, overridden by the {@code sockmap4j.*} system properties. */
    public static SockmapConfig fromSystemProperties() {
        String cg = System.getProperty("sockmap4j.cgroup");
        return new SockmapConfig(
                Path.of(System.getProperty("sockmap4j.pinDir", DEFAULT_PIN_DIRECTORY.toString())),
                cg == null || cg.isBlank() ? null : Path.of(cg),
                Integer.getInteger("sockmap4j.maxSockets", DEFAULT_MAX_SOCKETS),
                Boolean.getBoolean("sockmap4j.disable"),
                Boolean.getBoolean("sockmap4j.require"),
                Boolean.getBoolean("sockmap4j.allowRootCgroup"),
                !"false".equals(System.getProperty("sockmap4j.probe")));
    }

    public SockmapConfig withPinDirectory(Path dir) {
        return new SockmapConfig(dir, cgroup, maxSockets, disabled, required, allowRootCgroup, probe);
    }

    public SockmapConfig withCgroup(Path dir) {
        return new SockmapConfig(pinDirectory, dir, maxSockets, disabled, required, allowRootCgroup, probe);
    }

    public SockmapConfig withMaxSockets(int n) {
        return new SockmapConfig(pinDirectory, cgroup, n, disabled, required, allowRootCgroup, probe);
    }

    public SockmapConfig withDisabled(boolean off) {
        return new SockmapConfig(pinDirectory, cgroup, maxSockets, off, required, allowRootCgroup, probe);
    }

    public SockmapConfig withRequired(boolean req) {
        return new SockmapConfig(pinDirectory, cgroup, maxSockets, disabled, req, allowRootCgroup, probe);
    }
}
