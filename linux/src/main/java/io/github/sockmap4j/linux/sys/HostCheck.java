package io.github.sockmap4j.linux.sys;

import io.github.sockmap4j.linux.ffi.Libbpf;
import io.github.sockmap4j.linux.ffi.NativeIOException;
import io.github.sockmap4j.linux.ffi.Platform;
import io.github.sockmap4j.linux.ffi.SysCalls;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Whether this host can run the fast path at all, decided once per JVM, as Netty's
 * {@code Epoll} does for its transport: the operating system and architecture, libbpf, the
 * privileges to load programs, and the kernel's support for the map and program types; then,
 * per configuration, bpffs under the pin directory and the cgroup to attach to.
 *
 * <p><b>Note:</b> this class is threadsafe; nothing here throws from a static initializer.
 */
public final class HostCheck {
    private static final Logger LOG = LoggerFactory.getLogger(HostCheck.class);

    private HostCheck() {
    }

    /** Why a host cannot run the fast path: what the code acts on; the cause's text is for people. */
    public enum Reason {
        /** Not Linux, or an architecture without a table of native constants. */
        UNSUPPORTED_PLATFORM,
        /** libbpf could not be loaded. */
        NO_LIBBPF,
        /** CAP_BPF (or CAP_SYS_ADMIN) or CAP_NET_ADMIN is missing. */
        MISSING_PRIVILEGES,
        /** The kernel lacks SOCKHASH, sk_msg or sockops. */
        NO_KERNEL_SUPPORT,
        /** The check itself failed (a file of /proc could not be read). */
        CHECK_FAILED
    }

    /**
     * The host check's outcome: a null cause and a loaded libbpf, or a reason and its cause.
     *
     * @param reason    null when the host can run the fast path
     * @param cause     why not, and what to do, for people
     * @param exception what failed, when something threw
     * @param bpf       the loaded libbpf, when the host can
     */
    public record Host(Reason reason, String cause, Throwable exception, Libbpf bpf) {
        static Host failed(Reason reason, String cause, Throwable exception) {
            return new Host(reason, cause, exception, null);
        }
    }

    private static final class Once {
        static final Host HOST = check(Platform.current());
    }

    /** This host's outcome, decided once. */
    public static Host host() {
        return Once.HOST;
    }

    /**
     * The host chain for {@code platform}: it stops at the first missing piece. On a platform
     * without a table of native constants nothing native is touched.
     */
    public static Host check(Platform platform) {
        if (!platform.supported()) {
            return Host.failed(Reason.UNSUPPORTED_PLATFORM, platform.unsupportedReason(), null);
        }
        Libbpf bpf;
        try {
            bpf = Libbpf.load();
        } catch (UnsatisfiedLinkError e) {
            return Host.failed(Reason.NO_LIBBPF, e.getMessage(), e);
        }
        try {
            Capabilities caps = Capabilities.current();
            if (!caps.canBpf() || !caps.has(Capabilities.CAP_NET_ADMIN)) {
                return Host.failed(Reason.MISSING_PRIVILEGES, "missing privileges: loading the programs needs CAP_BPF (or CAP_SYS_ADMIN) "
                        + "and CAP_NET_ADMIN; run as root or grant them (e.g. setcap, or a container's capabilities)",
                        null);
            }
        } catch (IOException e) {
            return Host.failed(Reason.CHECK_FAILED, e.getMessage(), e);
        }
        if (bpf.probeMapType(Libbpf.BPF_MAP_TYPE_SOCKHASH) != 1
                || bpf.probeProgType(Libbpf.BPF_PROG_TYPE_SK_MSG) != 1
                || bpf.probeProgType(Libbpf.BPF_PROG_TYPE_SOCK_OPS) != 1) {
            return Host.failed(Reason.NO_KERNEL_SUPPORT, "this kernel (" + System.getProperty("os.version")
                    + ") lacks SOCKHASH, sk_msg or sockops support (CONFIG_BPF_STREAM_PARSER, "
                    + "CONFIG_NET_SOCK_MSG, CONFIG_CGROUP_BPF)", null);
        }
        return new Host(null, null, null, bpf);
    }

    /**
     * Where a configuration attaches, or why it cannot.
     *
     * @param cgroup the cgroup v2 directory, null when it cannot attach
     * @param cause  why it cannot, null when it can
     */
    public record Target(Path cgroup, String cause) {
    }

    /** How to start a service in a child cgroup by hand, under this host's own cgroup v2 mount. */
    static String childRecipe(Path mountPoint) {
        Path svc = mountPoint.resolve("svc");
        return "'mkdir " + svc + "; echo PID > " + svc.resolve("cgroup.procs") + "'";
    }

    /**
     * A configuration's part of the chain: bpffs under the pin directory, cgroup v2, the cgroup itself.
     *
     * @param cgroupSetting    the configured cgroup, null for this process's own
     * @param allowRootCgroup  whether the root cgroup is accepted
     */
    public static Target target(Path pinDirectory, Path cgroupSetting, boolean allowRootCgroup) throws IOException {
        String bpffs = ensureBpffs(pinDirectory);
        if (bpffs != null) {
            return new Target(null, bpffs);
        }
        Optional<Cgroups.Mount> mount = Cgroups.unifiedMount();
        if (mount.isEmpty()) {
            return new Target(null, "no cgroup v2 hierarchy is mounted (no cgroup2 line in /proc/self/mountinfo)");
        }
        Path cgroup;
        if (cgroupSetting != null) {
            cgroup = cgroupSetting;
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
        if (Cgroups.isRoot(cgroup) && !allowRootCgroup) {
            return new Target(null, "the cgroup to attach to is the root cgroup " + cgroup
                    + ", which would touch every process on the host: run the service in a child cgroup (a "
                    + "container, a systemd unit, or " + childRecipe(mount.get().mountPoint()) + ")"
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
    public static void mountBpffs(Path pinDir) throws IOException {
        if (!underDefaultBpffs(pinDir) || Cgroups.isMountedAt(BPFFS, "bpf")) {
            return;
        }
        try {
            Files.createDirectories(BPFFS);
            SysCalls.mount("bpf", BPFFS.toString(), "bpf");
            LOG.info("Mounted bpffs at {}", BPFFS);
        } catch (NativeIOException e) {
            throw new IOException("bpffs is not mounted at " + BPFFS + " and mounting it failed (" + e.getMessage()
                    + "): run 'mount -t bpf bpf " + BPFFS + "' as root", e);
        }
    }
}
