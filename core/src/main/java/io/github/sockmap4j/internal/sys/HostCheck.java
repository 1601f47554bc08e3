package io.github.sockmap4j;

import io.github.sockmap4j.internal.ffi.LibC;
import io.github.sockmap4j.internal.ffi.Libbpf;
import io.github.sockmap4j.internal.ffi.NativeIOException;
import io.github.sockmap4j.internal.ffi.Platform;
import io.github.sockmap4j.internal.sys.Capabilities;
import io.github.sockmap4j.internal.sys.Cgroups;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Whether this host can run the fast path at all, decided once per JVM, as Netty's
 * {@code Epoll} does for its transport: the operating system and architecture, libbpf, the
 * privileges to load programs, and the kernel's support for the map and program types. What
 * depends on a {@link SockmapConfig} (bpffs under the pin directory, the cgroup to attach to)
 * is checked when a {@link Sockmap} opens; {@link Sockmap#unavailabilityCause()} then says
 * which step failed.
 *
 * <pre>{@code
 * if (!SockmapAvailability.isAvailable()) {
 *     log.info("plain TCP: {}", SockmapAvailability.unavailabilityCause());
 * }
 * }</pre>
 *
 * <p><b>Note:</b> this class is threadsafe; nothing here throws from a static initializer.
 */
public final class SockmapAvailability {
    private static final Logger LOG = LoggerFactory.getLogger(SockmapAvailability.class);

    private SockmapAvailability() {
    }

    /** The host check's outcome: null cause and a loaded libbpf, or a cause. */
    record Host(String cause, Throwable exception, Libbpf bpf) {
    }

    private static final class Once {
        static final Host HOST = check(Platform.current());
    }

    /** Whether this host can run the fast path (a {@link Sockmap} may still be off for its config). */
    public static boolean isAvailable() {
        return Once.HOST.cause() == null;
    }

    /** Why this host cannot run the fast path, or null when it can. */
    public static String unavailabilityCause() {
        return Once.HOST.cause();
    }

    /** Throws, with the reason and what to do, when this host cannot run the fast path. */
    public static void ensureAvailability() throws SockmapUnavailableException {
        Host h = Once.HOST;
        if (h.cause() != null) {
            throw new SockmapUnavailableException("sockmap4j fast path unavailable: " + h.cause(), h.exception());
        }
    }

    static Host host() {
        return Once.HOST;
    }

    /**
     * The host chain for {@code platform}: it stops at the first missing piece. On a platform
     * without a table of native constants nothing native is touched.
     */
    static Host check(Platform platform) {
        if (!platform.supported()) {
            return new Host(platform.unsupportedReason(), null, null);
        }
        Libbpf bpf;
        try {
            bpf = Libbpf.load();
        } catch (UnsatisfiedLinkError e) {
            return new Host(e.getMessage(), e, null);
        }
        try {
            Capabilities caps = Capabilities.current();
            if (!caps.canBpf() || !caps.has(Capabilities.CAP_NET_ADMIN)) {
                return new Host("missing privileges: loading the programs needs CAP_BPF (or CAP_SYS_ADMIN) "
                        + "and CAP_NET_ADMIN; run as root or grant them (e.g. setcap, or a container's capabilities)",
                        null, null);
            }
        } catch (IOException e) {
            return new Host(e.getMessage(), e, null);
        }
        if (bpf.probeMapType(Libbpf.BPF_MAP_TYPE_SOCKHASH) != 1
                || bpf.probeProgType(Libbpf.BPF_PROG_TYPE_SK_MSG) != 1
                || bpf.probeProgType(Libbpf.BPF_PROG_TYPE_SOCK_OPS) != 1) {
            return new Host("this kernel (" + System.getProperty("os.version")
                    + ") lacks SOCKHASH, sk_msg or sockops support (CONFIG_BPF_STREAM_PARSER, "
                    + "CONFIG_NET_SOCK_MSG, CONFIG_CGROUP_BPF)", null, null);
        }
        return new Host(null, null, bpf);
    }

    /** Where a config attaches, or why it cannot. */
    record Target(Path cgroup, String cause) {
    }

    /** The config's part of the chain: bpffs under the pin directory, cgroup v2, the cgroup itself. */
    static Target target(SockmapConfig config) throws IOException {
        String bpffs = ensureBpffs(config.pinDirectory());
        if (bpffs != null) {
            return new Target(null, bpffs);
        }
        Optional<Cgroups.Mount> mount = Cgroups.unifiedMount();
        if (mount.isEmpty()) {
            return new Target(null, "no cgroup v2 hierarchy is mounted (no cgroup2 line in /proc/self/mountinfo)");
        }
        Path cgroup;
        if (config.cgroup() != null) {
            cgroup = config.cgroup();
            if (!Files.isRegularFile(cgroup.resolve("cgroup.procs"))) {
                return new Target(null, "sockmap4j.cgroup=" + cgroup + " is not a cgroup v2 directory (cgroup v2 "
                        + "is mounted at " + mount.get().mountPoint() + ")");
            }
        } else {
            Optional<Path> own = Cgroups.ownCgroupDir();
            if (own.isEmpty()) {
                return new Target(null, "cannot find this process's cgroup v2 directory");
            }
            cgroup = own.get();
        }
        if (Cgroups.isRoot(cgroup) && !config.allowRootCgroup()) {
            return new Target(null, "the cgroup to attach to is the root cgroup " + cgroup
                    + ", which would touch every process on the host: run the service in a child cgroup (a "
                    + "container, a systemd unit, or 'mkdir /sys/fs/cgroup/svc; echo PID > /sys/fs/cgroup/svc/cgroup.procs')"
                    + ", where the fast path attaches by default; naming a child cgroup with sockmap4j.cgroup helps only "
                    + "if this process is in it (sockmap4j.allowRootCgroup=true accepts the root cgroup)");
        }
        return new Target(cgroup, null);
    }

    /*
     * A library does not change its host unasked: where /sys/fs/bpf has no bpffs, a service is told
     * so; the administrator's commands (up, agent) mount it through mountBpffs.
     */
    private static String ensureBpffs(Path pinDir) throws IOException {
        if (!underDefaultBpffs(pinDir) || Cgroups.isMountedAt(BPFFS, "bpf")) {
            return null; // a custom bpffs mount: bpf_obj_pin says so if it is not one
        }
        return "bpffs is not mounted at " + BPFFS + ": mount it as root ('mount -t bpf bpf " + BPFFS
                + "'), or run 'sockmap4j up', which does";
    }

    private static final Path BPFFS = Path.of("/sys/fs/bpf");

    private static boolean underDefaultBpffs(Path pinDir) {
        return pinDir.toAbsolutePath().normalize().startsWith(BPFFS);
    }

    /** For the administrator's commands: mounts bpffs at /sys/fs/bpf when the pin directory is under it and none is. */
    static void mountBpffs(Path pinDir) throws IOException {
        if (!underDefaultBpffs(pinDir) || Cgroups.isMountedAt(BPFFS, "bpf")) {
            return;
        }
        try {
            Files.createDirectories(BPFFS);
            LibC.mount("bpf", BPFFS.toString(), "bpf");
            LOG.info("Mounted bpffs at {}", BPFFS);
        } catch (NativeIOException e) {
            throw new IOException("bpffs is not mounted at " + BPFFS + " and mounting it failed (" + e.getMessage()
                    + "): run 'mount -t bpf bpf " + BPFFS + "' as root", e);
        }
    }
}
