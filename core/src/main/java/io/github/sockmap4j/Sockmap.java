package io.github.sockmap4j;

import io.github.sockmap4j.internal.flow.FastPath;
import io.github.sockmap4j.internal.flow.FastPathAccess;
import io.github.sockmap4j.internal.flow.PeerCredit;
import io.github.sockmap4j.internal.jfr.FastPathStateEvent;
import io.github.sockmap4j.linux.bpf.KernelProbe;
import io.github.sockmap4j.linux.bpf.KernelSockmap;
import io.github.sockmap4j.linux.bpf.LockDir;
import io.github.sockmap4j.linux.bpf.PolicyKeyLayout;
import io.github.sockmap4j.linux.bpf.PolicyRule;
import io.github.sockmap4j.control.AgentClient;
import io.github.sockmap4j.control.AgentRequest;
import io.github.sockmap4j.linux.ffi.Platform;
import io.github.sockmap4j.linux.sys.Cgroups;
import io.github.sockmap4j.linux.sys.HostCheck;
import java.io.IOException;
import java.net.InetAddress;
import java.nio.channels.Selector;
import java.nio.file.Path;
import java.util.Optional;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The sockmap fast path of one pin directory: opened once, shared by every channel. When
 * anything it needs is missing it is <em>inactive</em>: channels then run over plain TCP, and
 * {@link #unavailabilityCause()} says why (logged once, at open). Host-wide prerequisites are
 * {@link SockmapAvailability}'s; operator functions (agent set-up, pin removal, reading another
 * process's counters) are in {@code io.github.sockmap4j.admin} (the sockmap4j-node module), and what integrations that hold a
 * raw socket fd use (Netty's transport) in {@code io.github.sockmap4j.spi}.
 *
 * <pre>{@code
 * Sockmap sockmap = Sockmap.global();          // from -Dsockmap4j.* properties
 * try (SockmapServerChannel server = sockmap.openServerChannel()) {
 *     server.bind(new InetSocketAddress(9000)); // port 9000 is opted in until close
 *     ...
 * }
 * }</pre>
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
public final class Sockmap implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(Sockmap.class);

    /**
     * A bound for {@link #optIn(int, InetAddress, int, int)} that turns the in-flight bound off
     * for the rule: a slow reader can then make the kernel queue without limit
     * (docs/in-flight-bound.md). For measuring the bound's cost, not for production.
     */
    public static final int UNBOUNDED = PolicyKeyLayout.UNBOUNDED;
    private static final Object GLOBAL_LOCK = new Object();
    private static Sockmap global;
    private static boolean exitHookAdded;
    private static boolean exiting;

    static {
        FastPathAccess.install(s -> ((Sockmap) s).fastPath());
    }

    private final SockmapConfig config;
    /** The mode chosen at open: the kernel's objects, a node agent's client, or off. */
    private final Backend backend;
    private volatile boolean closed;

    private Sockmap(SockmapConfig config, Backend backend) {
        this.config = config;
        this.backend = backend;
    }

    /**
     * The process-wide instance, opened on first use from {@link SockmapConfig#fromSystemProperties()}
     * and closed at JVM exit.
     *
     * An instance that could not be made active is kept too: later calls neither try again nor log
     * again (a JVM restart, or {@link #open}, tries again).
     *
     * @throws SockmapUnavailableException when {@code sockmap4j.require=true} and the fast path is
     *         off, at every call, with the same cause
     */
    public static Sockmap global() {
        synchronized (GLOBAL_LOCK) {
            if (exiting) {
                // The exit hook has closed it: opening again now would pin objects nothing removes.
                return global != null ? global : inactive(SockmapConfig.fromSystemProperties(), "the JVM is exiting", null);
            }
            if (global == null || global.closed) {
                Sockmap s;
                try {
                    s = openQuietly(SockmapConfig.fromSystemProperties(), Platform.current());
                } catch (IllegalArgumentException e) {
                    // A bad sockmap4j.* setting: plain TCP and the reason, as for any other; a
                    // service does not fail to start over it unless the fast path is required.
                    SockmapConfig defaults = SockmapConfig.builder()
                            .required(Boolean.getBoolean("sockmap4j.require")).build();
                    s = inactive(defaults, e.getMessage() + ": fix the setting", e);
                    LOG.warn("sockmap4j fast path off, plain TCP: {}", s.unavailabilityCause());
                }
                global = s;
                if (s.kernelOpen() && !exitHookAdded) {
                    Runtime.getRuntime().addShutdownHook(new Thread(Sockmap::closeGlobalAtExit, "sockmap4j-close"));
                    exitHookAdded = true;
                }
            }
            if (global.config.required() && !global.kernelOpen()) {
                throw new SockmapUnavailableException(
                        "sockmap4j.require=true but the fast path is off: " + global.unavailabilityCause(),
                        global.backend.causeException());
            }
            if (global.config.required() && !global.isActive()) {
                throw new SockmapUnavailableException(
                        "sockmap4j.require=true but the fast path does not cover this process: "
                                + global.unavailabilityCause(),
                        null);
            }
            return global;
        }
    }


    /*
     * One hook for the life of the JVM closes whatever instance global() holds then, and from then
     * on global() hands out that closed instance instead of opening a new one: a thread still
     * running during exit (an event loop, say) that calls global() must not load and pin the
     * programs again after the hook ran, nor have addShutdownHook fail after they are pinned.
     */
    private static void closeGlobalAtExit() {
        Sockmap g;
        synchronized (GLOBAL_LOCK) {
            exiting = true;
            g = global;
        }
        if (g != null) {
            g.close();
        }
    }

    /**
     * Opens the fast path for {@code config}; never fails for a missing prerequisite unless
     * {@link SockmapConfig#required()}: the instance is then inactive and says why.
     */
    public static Sockmap open(SockmapConfig config) throws SockmapUnavailableException {
        return open(config, Platform.current());
    }

    /** As {@link #open(SockmapConfig)}, as if on {@code platform} (tests of foreign platforms). */
    static Sockmap open(SockmapConfig config, Platform platform) throws SockmapUnavailableException {
        Sockmap s = openQuietly(config, platform);
        if (config.required() && !s.kernelOpen()) {
            throw new SockmapUnavailableException(
                    "the fast path was required but is off: " + s.unavailabilityCause(), s.backend.causeException());
        }
        return s;
    }

    private static Sockmap openQuietly(SockmapConfig config, Platform platform) {
        Sockmap s = tryOpen(config, platform);
        String cgroup = s.cgroup().map(Path::toString).orElse("");
        FastPathStateEvent.emit(s.isActive(), s.isActive() ? "" : s.unavailabilityCause(), config.pinDirectory().toString(),
                cgroup);
        if (s.kernelOpen() && !s.isActive()) {
            LOG.warn("sockmap4j fast path set up (pins {}, cgroup {}) but NOT for this process: {}",
                    config.pinDirectory(), cgroup, s.coverageProblem());
        } else if (s.kernelOpen()) {
            LOG.info("sockmap4j fast path active: pins {}, cgroup {}", config.pinDirectory(), cgroup);
        } else {
            LOG.info("sockmap4j fast path off, plain TCP: {}", s.unavailabilityCause());
        }
        return s;
    }

    private static Sockmap tryOpen(SockmapConfig config, Platform platform) {
        if (config.disabled()) {
            return inactive(config, "disabled by configuration (sockmap4j.disable=true)", null);
        }
        HostCheck.Host host = platform == Platform.current() ? HostCheck.host() : HostCheck.check(platform);
        if (host.cause() != null) {
            return withoutKernel(config, host);
        }
        KernelSockmap kernel;
        try {
            HostCheck.Target target = HostCheck.target(config.pinDirectory(), config.cgroup(), config.allowRootCgroup());
            if (target.cause() != null) {
                return inactive(config, target.cause(), null);
            }
            kernel = KernelSockmap.open(host.bpf(), config.pinDirectory(), target.cgroup(), config.maxSockets());
        } catch (IOException e) {
            return inactive(config, "setting up the kernel objects failed: " + e.getMessage(), e);
        }
        KernelProbe.Result probed = new KernelProbe.Result(null, null);
        if (config.probe()) {
            probed = KernelProbe.runIfInside(kernel);
            if (probed.failure() != null) {
                try {
                    kernel.close();
                } catch (IOException e) {
                    LOG.warn("Closing after a failed probe: {}", e.toString());
                }
                return inactive(config, probed.failure(), null);
            }
        }
        return new Sockmap(config, new KernelBackend(kernel, config.credit(), Fionread.of(probed.counts()),
                Cgroups.whyOutside(kernel.cgroupDir()), AgentRequest.socketPath(LockDir.pathFor(config.pinDirectory()))));
    }

    /**
     * What FIONREAD ({@code InputStream.available()} of a {@code java.net.Socket}) counts for a
     * registered socket on this kernel, as the start-up probe measured it;
     * {@link Fionread#NOT_PROBED} when it did not run.
     */
    public Fionread fionread() {
        return backend.fionread();
    }

    /** Why a fast path set up here does not cover this process's own connections, or null. */
    public String coverageProblem() {
        return closed ? null : backend.coverageProblem();
    }

    /**
     * The host cannot run the fast path for this process. When the reason is privileges and a
     * node agent serves the pin directory, this process's opt-ins go through the agent: its
     * connections in the agent's cgroups are redirected by the kernel, though this process can
     * read none of the kernel's maps, so it stays inactive (no stats, no acceleration checks).
     */
    private static Sockmap withoutKernel(SockmapConfig config, HostCheck.Host host) {
        String cause = host.cause();
        if (host.reason() != HostCheck.Reason.MISSING_PRIVILEGES) {
            return inactive(config, cause, host.exception());
        }
        try {
            AgentClient agent = AgentClient.connectIfRunning(
                    AgentRequest.socketPath(LockDir.pathFor(config.pinDirectory())));
            if (agent != null) {
                return new Sockmap(config, new AgentBackend(agent, cause + "; opt-ins of this process go through "
                        + "the sockmap4j agent of " + config.pinDirectory() + " (its connections in the agent's "
                        + "cgroups are redirected by the kernel, but this process cannot read the kernel's maps: "
                        + "no stats, no acceleration checks)", host.exception()));
            }
        } catch (IOException e) {
            LOG.debug("No sockmap4j agent reachable for {}: {}", config.pinDirectory(), e.toString());
        }
        return inactive(config, cause, host.exception());
    }

    private static Sockmap inactive(SockmapConfig config, String cause, Throwable e) {
        return new Sockmap(config, new OffBackend(cause, e));
    }

    /**
     * Whether this process's own connections move their bytes through the redirect: the kernel
     * side is set up and this process is in the attached cgroup or below it. False for a process
     * outside it even though ports it opts in are redirected for processes inside
     * ({@link #coverageProblem()} says so); false where the fast path is off
     * ({@link #unavailabilityCause()}).
     */
    public boolean isActive() {
        return !closed && backend.coversThisProcess();
    }

    /** The kernel side is open here: maps readable, opt-ins written (whatever this process's cgroup). */
    boolean kernelOpen() {
        return fastPath() != null;
    }

    /** Why the fast path is off, or null when it is active. */
    public String unavailabilityCause() {
        return closed ? "closed" : backend.cause();
    }

    /**
     * Throws, with the reason, unless this process's connections take the fast path
     * ({@link #isActive()}).
     *
     * @throws SockmapUnavailableException saying why they do not
     */
    public void ensureActive() throws SockmapUnavailableException {
        if (!isActive()) {
            throw new SockmapUnavailableException("sockmap4j fast path is off: " + unavailabilityCause(),
                    backend.causeException());
        }
    }

    public SockmapConfig config() {
        return config;
    }

    /** The cgroup the sockops program is attached to, when active. */
    public Optional<Path> cgroup() {
        return closed ? Optional.empty() : backend.cgroup();
    }

    /**
     * The kernel side as channels and {@link io.github.sockmap4j.spi.RawSockets} use it (the latter
     * through {@link FastPathAccess}); null unless the kernel side is open in this process.
     */
    FastPath fastPath() {
        return closed ? null : backend.fastPath();
    }

    /** Opts in every same-host connection to {@code port}, whoever serves it. */
    public OptIn optIn(int port) throws IOException {
        return optIn(port, null, 0);
    }

    /**
     * Opts in connections to {@code port} on server addresses within {@code network/prefixBits}
     * (IPv4 prefixes count IPv4 bits). Works for servers that are not Java too, as long as
     * they run in the attached cgroup.
     */
    public OptIn optIn(int port, InetAddress network, int prefixBits) throws IOException {
        return optIn(port, network, prefixBits, 0);
    }

    /**
     * As {@link #optIn(int, InetAddress, int)}, with an in-flight bound in bytes for the rule's
     * connections (0: each receiver's SO_RCVBUF): what a sender may redirect that its receiver
     * has not read yet. Past it the sender goes by TCP and TCP's window blocks it.
     */
    public OptIn optIn(int port, InetAddress network, int prefixBits, int boundBytes) throws IOException {
        PolicyRule rule = PolicyRule.of(port, network, prefixBits);
        PolicyRule.checkBound(boundBytes);
        if (closed) {
            return new OffBackend.NoRule(port);
        }
        return backend.optIn(rule, boundBytes, config.required());
    }

    /**
     * How many times the kernel has run the {@code sk_msg} verdict program ({@code run_cnt} of its
     * {@code bpf_prog_info}: one run per send on a registered socket), or -1 when inactive. The
     * kernel counts only while BPF run statistics are on: {@code sysctl kernel.bpf_stats_enabled=1}
     * or a {@code SockmapAdmin.enableKernelRunStats()} handle (sockmap4j-node) open anywhere on the host.
     */
    public long verdictRunCount() {
        return closed ? -1 : backend.verdictRunCount();
    }

    /** The kernel counters (zeros when inactive). */
    public SockmapStats stats() {
        return closed ? SockmapStats.EMPTY : backend.stats();
    }

    /**
     * How this process's cooperative writers waited for credit.
     *
     * @return the waits and their time since the JVM started
     */
    public static FlowStats flowStats() {
        return new FlowStats(PeerCredit.waits(), PeerCredit.waitNanos());
    }

    /** A new unconnected channel using this fast path. */
    public SockmapChannel openChannel() throws IOException {
        return new SockmapChannel(SockmapSelectorProvider.INSTANCE, this);
    }

    /** A new unbound server channel; binding it opts its port in until it closes. */
    public SockmapServerChannel openServerChannel() throws IOException {
        return new SockmapServerChannel(SockmapSelectorProvider.INSTANCE, this);
    }

    /** A selector for sockmap4j channels (they cannot join a JDK selector). */
    public static Selector openSelector() throws IOException {
        return SockmapSelectorProvider.INSTANCE.openSelector();
    }

    /**
     * Closes this process's use of the pin directory: its opt-ins are removed; the cgroup
     * attachment and pins go when no other process uses them (see docs/architecture.md).
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        backend.close();
    }

    @Override
    public String toString() {
        return kernelOpen() ? "Sockmap[active, " + backend + "]" : "Sockmap[off: " + unavailabilityCause() + "]";
    }
}
