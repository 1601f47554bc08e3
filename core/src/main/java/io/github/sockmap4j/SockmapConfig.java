package io.github.sockmap4j;

import java.nio.file.Path;
import java.util.Objects;

/**
 * Where the fast path lives and how it behaves. Build one with {@link #builder()}, or read the
 * {@code sockmap4j.*} system properties with {@link #fromSystemProperties()}:
 * <ul>
 *   <li>{@code sockmap4j.pinDir}: bpffs directory of the shared maps and programs
 *       (default {@code /sys/fs/bpf/sockmap4j}); processes naming the same one share them;</li>
 *   <li>{@code sockmap4j.cgroup}: the cgroup v2 directory the sockops program attaches to
 *       (default: this process's own cgroup, never the root one unless
 *       {@code sockmap4j.allowRootCgroup=true});</li>
 *   <li>{@code sockmap4j.maxSockets}: SOCKHASH capacity (default 65535); a connection that finds
 *       it full stays on plain TCP;</li>
 *   <li>{@code sockmap4j.disable=true}: force plain TCP;</li>
 *   <li>{@code sockmap4j.require=true}: fail instead of falling back to plain TCP;</li>
 *   <li>{@code sockmap4j.probe=false}: skip the start-up self-test of the kernel;</li>
 *   <li>{@code sockmap4j.credit=false}: writers do not hold back for their receiver's bound
 *       (the kernel's bound alone then sends them by TCP past it; for measuring).</li>
 * </ul>
 *
 * <pre>{@code
 * SockmapConfig config = SockmapConfig.builder()
 *         .pinDirectory(Path.of("/sys/fs/bpf/my-service"))
 *         .required(true)
 *         .build();
 * }</pre>
 *
 * <p><b>Note:</b> instances are immutable.
 */
public final class SockmapConfig {
    public static final Path DEFAULT_PIN_DIRECTORY = Path.of("/sys/fs/bpf/sockmap4j");
    public static final int DEFAULT_MAX_SOCKETS = 65535;

    private final Path pinDirectory;
    private final Path cgroup;
    private final int maxSockets;
    private final boolean disabled;
    private final boolean required;
    private final boolean allowRootCgroup;
    private final boolean probe;
    private final boolean credit;

    private SockmapConfig(Builder b) {
        this.pinDirectory = Objects.requireNonNull(b.pinDirectory, "pinDirectory");
        if (b.maxSockets < 2) {
            throw new IllegalArgumentException("maxSockets (sockmap4j.maxSockets) must be at least 2: maxSockets="
                    + b.maxSockets);
        }
        this.cgroup = b.cgroup;
        this.maxSockets = b.maxSockets;
        this.disabled = b.disabled;
        this.required = b.required;
        this.allowRootCgroup = b.allowRootCgroup;
        this.probe = b.probe;
        this.credit = b.credit;
    }

    /** The defaults: pins in {@link #DEFAULT_PIN_DIRECTORY}, this process's cgroup, probe on. */
    public static Builder builder() {
        return new Builder();
    }

    /** A builder holding this config's values. */
    public Builder toBuilder() {
        return new Builder().pinDirectory(pinDirectory).cgroup(cgroup).maxSockets(maxSockets).disabled(disabled)
                .required(required).allowRootCgroup(allowRootCgroup).probe(probe).credit(credit);
    }

    /** The defaults, overridden by the {@code sockmap4j.*} system properties. */
    public static SockmapConfig fromSystemProperties() {
        String cg = System.getProperty("sockmap4j.cgroup");
        return builder()
                .pinDirectory(Path.of(System.getProperty("sockmap4j.pinDir", DEFAULT_PIN_DIRECTORY.toString())))
                .cgroup(cg == null || cg.isBlank() ? null : Path.of(cg))
                .maxSockets(intProperty("sockmap4j.maxSockets", DEFAULT_MAX_SOCKETS))
                .disabled(Boolean.getBoolean("sockmap4j.disable"))
                .required(Boolean.getBoolean("sockmap4j.require"))
                .allowRootCgroup(Boolean.getBoolean("sockmap4j.allowRootCgroup"))
                .probe(!"false".equals(System.getProperty("sockmap4j.probe")))
                .credit(!"false".equals(System.getProperty("sockmap4j.credit")))
                .build();
    }

    /** A whole-number property; one set to anything else is an error, not the default. */
    private static int intProperty(String name, int orElse) {
        String v = System.getProperty(name);
        if (v == null || v.isBlank()) {
            return orElse;
        }
        try {
            return Integer.parseInt(v.strip());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(name + "=" + v + " is not a whole number");
        }
    }

    /** bpffs directory holding the pinned maps and programs. */
    public Path pinDirectory() {
        return pinDirectory;
    }

    /** cgroup v2 directory to attach to, null for this process's own. */
    public Path cgroup() {
        return cgroup;
    }

    /** SOCKHASH capacity; used only by the process that creates the pins. */
    public int maxSockets() {
        return maxSockets;
    }

    /** Force plain TCP. */
    public boolean disabled() {
        return disabled;
    }

    /** Throw {@link SockmapUnavailableException} instead of falling back. */
    public boolean required() {
        return required;
    }

    /** Permit attaching to the root cgroup (every process on the host). */
    public boolean allowRootCgroup() {
        return allowRootCgroup;
    }

    /** Run the start-up self-test of the kernel. */
    public boolean probe() {
        return probe;
    }

    /**
     * Whether this process's writers hold back for their receivers' in-flight bound (credit,
     * docs/in-flight-bound.md) rather than being sent by TCP past it.
     */
    public boolean credit() {
        return credit;
    }

    public SockmapConfig withPinDirectory(Path dir) {
        return toBuilder().pinDirectory(dir).build();
    }

    public SockmapConfig withCgroup(Path dir) {
        return toBuilder().cgroup(dir).build();
    }

    public SockmapConfig withMaxSockets(int n) {
        return toBuilder().maxSockets(n).build();
    }

    public SockmapConfig withDisabled(boolean off) {
        return toBuilder().disabled(off).build();
    }

    public SockmapConfig withRequired(boolean req) {
        return toBuilder().required(req).build();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof SockmapConfig c && pinDirectory.equals(c.pinDirectory) && Objects.equals(cgroup, c.cgroup)
                && maxSockets == c.maxSockets && disabled == c.disabled && required == c.required
                && allowRootCgroup == c.allowRootCgroup && probe == c.probe && credit == c.credit;
    }

    @Override
    public int hashCode() {
        return Objects.hash(pinDirectory, cgroup, maxSockets, disabled, required, allowRootCgroup, probe, credit);
    }

    @Override
    public String toString() {
        return "SockmapConfig[pinDirectory=" + pinDirectory + ", cgroup=" + cgroup + ", maxSockets=" + maxSockets
                + ", disabled=" + disabled + ", required=" + required + ", allowRootCgroup=" + allowRootCgroup
                + ", probe=" + probe + ", credit=" + credit + "]";
    }

    /**
     * Builds a {@link SockmapConfig}; {@link #build()} checks the values.
     *
     * <p><b>Note:</b> this class is not threadsafe.
     */
    public static final class Builder {
        private Path pinDirectory = DEFAULT_PIN_DIRECTORY;
        private Path cgroup;
        private int maxSockets = DEFAULT_MAX_SOCKETS;
        private boolean disabled;
        private boolean required;
        private boolean allowRootCgroup;
        private boolean probe = true;
        private boolean credit = true;

        private Builder() {
        }

        public Builder pinDirectory(Path dir) {
            this.pinDirectory = dir;
            return this;
        }

        /** null: this process's own cgroup. */
        public Builder cgroup(Path dir) {
            this.cgroup = dir;
            return this;
        }

        public Builder maxSockets(int n) {
            this.maxSockets = n;
            return this;
        }

        public Builder disabled(boolean off) {
            this.disabled = off;
            return this;
        }

        public Builder required(boolean req) {
            this.required = req;
            return this;
        }

        public Builder allowRootCgroup(boolean allow) {
            this.allowRootCgroup = allow;
            return this;
        }

        public Builder probe(boolean run) {
            this.probe = run;
            return this;
        }

        public Builder credit(boolean hold) {
            this.credit = hold;
            return this;
        }

        /** @throws IllegalArgumentException when maxSockets &lt; 2; NullPointerException without a pin directory */
        public SockmapConfig build() {
            return new SockmapConfig(this);
        }
    }
}
