package io.github.sockmap4j;

import io.github.sockmap4j.internal.bpf.InFlightMaps;
import io.github.sockmap4j.internal.agent.AgentClient;
import io.github.sockmap4j.internal.bpf.InFlightWatcher;
import io.github.sockmap4j.internal.bpf.KernelProbe;
import io.github.sockmap4j.internal.bpf.KernelSockmap;
import io.github.sockmap4j.internal.bpf.PolicyKeyLayout;
import io.github.sockmap4j.internal.bpf.SockStateLayout;
import io.github.sockmap4j.internal.ffi.LibC;
import io.github.sockmap4j.internal.ffi.Libbpf;
import io.github.sockmap4j.internal.ffi.Platform;
import io.github.sockmap4j.internal.jfr.FastPathStateEvent;
import io.github.sockmap4j.internal.net.Sockets;
import io.github.sockmap4j.internal.sys.Cgroups;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
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
 * process's counters) are {@link SockmapAdmin}'s.
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

    private final SockmapConfig config;
    private final KernelSockmap kernel;
    private final ReadSlotRegistry readers;
    private final InFlightWatcher watcher;
    private final String cause;
    private final Throwable causeException;
    /** Without privileges but with an agent serving the pin directory: where opt-ins go. */
    private final AgentClient agent;
    private volatile boolean closed;
    /** Set once at open: why this process's own sockets are not covered, null when they are. */
    private String outside;

    private Sockmap(SockmapConfig config, KernelSockmap kernel, String cause, Throwable causeException) {
        this(config, kernel, cause, causeException, null);
    }

    private Sockmap(SockmapConfig config, KernelSockmap kernel, String cause, Throwable causeException,
                    AgentClient agent) {
        this.config = config;
        this.kernel = kernel;
        this.cause = cause;
        this.causeException = causeException;
        this.agent = agent;
        this.readers = kernel == null ? null : new ReadSlotRegistry(kernel);
        this.watcher = kernel == null ? null : new InFlightWatcher(kernel.inFlight());
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
                return global != null ? global : new Sockmap(SockmapConfig.fromSystemProperties(), null,
                        "the JVM is exiting", null);
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
                    s = new Sockmap(defaults, null, e.getMessage() + ": fix the setting", e);
                    LOG.warn("sockmap4j fast path off, plain TCP: {}", s.cause);
                }
                global = s;
                if (s.kernelOpen() && !exitHookAdded) {
                    Runtime.getRuntime().addShutdownHook(new Thread(Sockmap::closeGlobalAtExit, "sockmap4j-close"));
                    exitHookAdded = true;
                }
            }
            if (global.config.required() && !global.kernelOpen()) {
                throw new SockmapUnavailableException(
                        "sockmap4j.require=true but the fast path is off: " + global.cause, global.causeException);
            }
            if (global.config.required() && !global.coversThisProcess()) {
                throw new SockmapUnavailableException(
                        "sockmap4j.require=true but the fast path does not cover this process: " + global.outside,
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
                    "the fast path was required but is off: " + s.cause, s.causeException);
        }
        return s;
    }

    private static Sockmap openQuietly(SockmapConfig config, Platform platform) {
        Sockmap s = tryOpen(config, platform);
        FastPathStateEvent.emit(s.isActive(), s.isActive() ? "" : s.unavailabilityCause(), config.pinDirectory().toString(),
                s.kernelOpen() ? s.kernel.cgroupDir().toString() : "");
        if (s.kernelOpen() && s.outside != null) {
            LOG.warn("sockmap4j fast path set up (pins {}, cgroup {}) but NOT for this process: {}",
                    config.pinDirectory(), s.kernel.cgroupDir(), s.outside);
        } else if (s.kernelOpen()) {
            LOG.info("sockmap4j fast path active: pins {}, cgroup {}", config.pinDirectory(), s.kernel.cgroupDir());
        } else {
            LOG.info("sockmap4j fast path off, plain TCP: {}", s.cause);
        }
        return s;
    }

    private static Sockmap tryOpen(SockmapConfig config, Platform platform) {
        if (config.disabled()) {
            return inactive(config, "disabled by configuration (sockmap4j.disable=true)", null);
        }
        SockmapAvailability.Host host = platform == Platform.current()
                ? SockmapAvailability.host() : SockmapAvailability.check(platform);
        if (host.cause() != null) {
            return withoutKernel(config, host);
        }
        KernelSockmap kernel;
        try {
            SockmapAvailability.Target target = SockmapAvailability.target(config);
            if (target.cause() != null) {
                return inactive(config, target.cause(), null);
            }
            kernel = KernelSockmap.open(host.bpf(), config.pinDirectory(), target.cgroup(), config.maxSockets());
        } catch (IOException e) {
            return inactive(config, "setting up the kernel objects failed: " + e.getMessage(), e);
        }
        if (config.probe()) {
            String failed = probeIfInside(kernel);
            if (failed != null) {
                try {
                    kernel.close();
                } catch (IOException e) {
                    LOG.warn("Closing after a failed probe: {}", e.toString());
                }
                return inactive(config, failed, null);
            }
        }
        Sockmap s = new Sockmap(config, kernel, null, null);
        s.outside = outside(kernel.cgroupDir());
        s.watcher.start();
        return s;
    }

    /*
     * Why this process's own sockets are not covered by the attachment (cgroup programs apply to
     * the cgroup and its descendants), or null when they are.
     */
    private static String outside(Path attached) {
        try {
            Optional<Path> own = Cgroups.ownCgroupDir();
            if (own.isEmpty()) {
                return "this process's cgroup v2 directory is unknown, so its own connections may not be accelerated";
            }
            if (own.get().startsWith(attached)) {
                return null;
            }
            return "this process is in cgroup " + own.get() + ", outside " + attached
                    + ": its own connections stay on plain TCP (ports it opts in are redirected for processes in "
                    + attached + "). Run it in " + attached + " or a cgroup below it (for example "
                    + "'echo PID > " + attached.resolve("cgroup.procs") + "', a systemd unit's Slice=, or a container), "
                    + "or leave sockmap4j.cgroup unset to attach to its own cgroup";
        } catch (IOException e) {
            return "this process's cgroup could not be read (" + e.getMessage() + ")";
        }
    }

    /**
     * The same as {@link #isActive()}, by the name of what it checks: this process is in the
     * attached cgroup or below it. Where the kernel side is set up but this process is outside,
     * ports opted in here are still redirected for processes in the attached cgroup, and
     * {@link #coverageProblem()} says why this process's own connections are not.
     */
    public boolean coversThisProcess() {
        return isActive();
    }

    /** Why a fast path set up here does not cover this process's own connections, or null. */
    public String coverageProblem() {
        return kernelOpen() ? outside : null;
    }

    /**
     * The host cannot run the fast path for this process. When the reason is privileges and a
     * node agent serves the pin directory, this process's opt-ins go through the agent: its
     * connections in the agent's cgroups are redirected by the kernel, though this process can
     * read none of the kernel's maps, so it stays inactive (no stats, no acceleration checks).
     */
    private static Sockmap withoutKernel(SockmapConfig config, SockmapAvailability.Host host) {
        String cause = host.cause();
        if (!cause.startsWith("missing privileges")) {
            return inactive(config, cause, host.exception());
        }
        try {
            AgentClient agent = AgentClient.connectIfRunning(SockmapAdmin.agentSocket(config.pinDirectory()));
            if (agent != null) {
                return new Sockmap(config, null, cause + "; opt-ins of this process go through the sockmap4j agent "
                        + "of " + config.pinDirectory() + " (its connections in the agent's cgroups are redirected "
                        + "by the kernel, but this process cannot read the kernel's maps: no stats, no "
                        + "acceleration checks)", host.exception(), agent);
            }
        } catch (IOException e) {
            LOG.debug("No sockmap4j agent reachable for {}: {}", config.pinDirectory(), e.toString());
        }
        return inactive(config, cause, host.exception());
    }

    private static String probeIfInside(KernelSockmap kernel) {
        try {
            Optional<Path> own = Cgroups.ownCgroupDir();
            if (own.isEmpty() || !own.get().startsWith(kernel.cgroupDir())) {
                LOG.debug("Start-up probe skipped: this process is not in {}", kernel.cgroupDir());
                return null;
            }
        } catch (IOException e) {
            return e.getMessage();
        }
        return KernelProbe.run(kernel);
    }

    private static Sockmap inactive(SockmapConfig config, String cause, Throwable e) {
        return new Sockmap(config, null, cause, e);
    }

    /**
     * Emits the JFR event {@code io.github.sockmap4j.Connection} for the connected socket
     * {@code fd} (whether the kernel accelerates it, the in-flight bound it sets as a receiver, -1
     * for none), for channels other than {@link SockmapChannel}, which emits its own: the Netty
     * transport calls it. Costs nothing unless a recording enables the event, and a few
     * syscalls when one does.
     */
    public void recordConnection(int fd, int bound) {
        io.github.sockmap4j.internal.jfr.ConnectionEvent event = new io.github.sockmap4j.internal.jfr.ConnectionEvent();
        if (event.shouldCommit()) {
            try {
                event.local = String.valueOf(Sockets.localAddress(fd));
                event.remote = String.valueOf(Sockets.remoteAddress(fd));
                event.accelerated = isAccelerated(fd);
                event.bound = bound;
                event.commit();
            } catch (IOException ignored) {
                // No event for a socket that is already gone.
            }
        }
    }

    /**
     * Whether this process's own connections move their bytes through the redirect: the kernel
     * side is set up and this process is in the attached cgroup or below it. False for a process
     * outside it even though ports it opts in are redirected for processes inside
     * ({@link #coverageProblem()} says so); false where the fast path is off
     * ({@link #unavailabilityCause()}).
     */
    public boolean isActive() {
        return kernelOpen() && outside == null;
    }

    /** The kernel side is open here: maps readable, opt-ins written (whatever this process's cgroup). */
    boolean kernelOpen() {
        return kernel != null && !closed;
    }

    /** Why the fast path is off, or null when it is active. */
    public String unavailabilityCause() {
        return closed ? "closed" : cause != null ? cause : outside;
    }

    /** Throws, with the reason, when the fast path is off. */
    public void ensureActive() throws SockmapUnavailableException {
        if (!kernelOpen()) {
            throw new SockmapUnavailableException("sockmap4j fast path is off: " + unavailabilityCause(),
                    causeException);
        }
    }

    public SockmapConfig config() {
        return config;
    }

    /** The cgroup the sockops program is attached to, when active. */
    public Optional<Path> cgroup() {
        return kernelOpen() ? Optional.of(kernel.cgroupDir()) : Optional.empty();
    }

    /** The kernel handle, for {@link SockmapAdmin}; null when inactive. */
    KernelSockmap kernel() {
        return kernel;
    }

    /** After a rule's bound changed: this process's receivers on {@code port} take it. */
    void boundChanged(int port) {
        if (kernelOpen()) {
            readers.refix(port);
        }
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
        Rules.checkBound(boundBytes);
        Rules.checkPort(port);
        int bits = Rules.keyBits(network, prefixBits);
        if (!kernelOpen()) {
            if (agent != null && !closed) {
                try {
                    return AgentOptIn.request(agent, port, network, bits, boundBytes);
                } catch (AgentClient.AgentRefusedException e) {
                    if (config.required()) {
                        throw e;
                    }
                    // As for any missing prerequisite: plain TCP, and the reason in the log.
                    LOG.warn("Port {} stays on plain TCP: {}", port, e.getMessage());
                    return new PolicyOptIn(this, null, port);
                }
            }
            return new PolicyOptIn(this, null, port);
        }
        return new PolicyOptIn(this, kernel.optIn(port, network, bits, boundBytes), port);
    }

    /**
     * How many times the kernel has run the {@code sk_msg} verdict program ({@code run_cnt} of its
     * {@code bpf_prog_info}: one run per send on a registered socket), or -1 when inactive. The
     * kernel counts only while BPF run statistics are on: {@code sysctl kernel.bpf_stats_enabled=1}
     * or an {@link #enableKernelRunStats()} handle open anywhere on the host.
     */
    public long verdictRunCount() {
        if (!kernelOpen()) {
            return -1;
        }
        try {
            return Libbpf.load().progRuns(kernel.redirectProgramFd()).runCount();
        } catch (IOException e) {
            return -1;
        }
    }

    /** The kernel counters (zeros when inactive). */
    public SockmapStats stats() {
        return kernelOpen() ? SockmapStats.of(kernel.counters(), kernel.registeredSockets()) : SockmapStats.EMPTY;
    }

    /**
     * Whether the connected socket {@code fd} sends through the redirect: it and its peer are
     * both in the SOCKHASH (checked against the map), and it is not held on TCP (as it is while
     * its peer was not registered yet, or has left too much unread; its next send after the
     * peer has read everything takes the redirect again). For integrations that hold a raw
     * socket fd (Netty's epoll channels); {@link SockmapChannel#isAccelerated()} otherwise.
     */
    public boolean isAccelerated(int fd) {
        if (!kernelOpen()) {
            return false;
        }
        try {
            InetSocketAddress local = Sockets.localAddress(fd);
            InetSocketAddress remote = Sockets.remoteAddress(fd);
            long netns = Sockets.netnsCookie(fd);
            long own = kernel.lookupSocket(local.getAddress(), local.getPort(), remote.getAddress(),
                    remote.getPort(), netns);
            if (own == 0 || own != Sockets.cookie(fd)) {
                return false;
            }
            if (kernel.lookupSocket(remote.getAddress(), remote.getPort(), local.getAddress(), local.getPort(),
                    netns) == 0) {
                return false;
            }
            return (kernel.inFlight().socketFlags(fd) & SockStateLayout.TCP) == 0;
        } catch (IOException e) {
            return false;
        }
    }

    /** This socket's side of the bound, for diagnostics: flags, bytes sent, the peer's published read. */
    String flowState(int fd) {
        return kernelOpen() ? readers.flowState(fd) : "off";
    }

    /**
     * Joins a connected channel that the kernel registered to the in-flight bound as a
     * receiver; null when the bound does not apply (fast path off, socket not registered).
     */
    ReadPublisher claimReadSlot(int fd, boolean serverSide, boolean rcvbufSet) throws IOException {
        return kernelOpen() ? readers.claim(this, fd, serverSide, rcvbufSet) : null;
    }

    /**
     * Joins a connected socket that an integration reads itself (its raw fd) to the in-flight
     * bound as a receiver; null when the bound does not apply to it (fast path off, or the
     * socket not registered by the kernel). Claim it before the first read.
     *
     * @param serverSide whether the socket was accepted (its local end is the server)
     */
    public ReadCounter readCounter(int fd, boolean serverSide) throws IOException {
        return claimReadSlot(fd, serverSide, false);
    }

    /**
     * The write credit of a connected socket that an integration writes itself (its raw fd):
     * null when nothing holds its writes (fast path off, this socket or its peer not registered,
     * or the port's bound off). A writer that keeps within it is never sent by TCP for the
     * in-flight bound. Resolve it once connected, before the first write.
     *
     * @param serverSide whether the socket was accepted (its local end is the server)
     */
    public WriteCredit writeCredit(int fd, boolean serverSide) throws IOException {
        return kernelOpen() && config.credit() ? PeerCredit.resolve(kernel, fd, serverSide) : null;
    }

    /** How this process's cooperative writers waited for credit. */
    public static FlowStats flowStats() {
        return PeerCredit.stats();
    }

    void publishRead(InFlightMaps.ReadSlot slot, long read) {
        readers.publishRead(slot, read);
    }

    void setSlotBound(InFlightMaps.ReadSlot slot, int bound) {
        if (kernelOpen()) {
            readers.setBound(slot, bound);
        }
    }

    void releaseReadSlot(ReadPublisher p) {
        if (readers != null) {
            readers.release(p);
        }
    }

    /** The bound a receiving channel publishes now, or -1 when it publishes none. */
    int boundOf(ReadPublisher p) {
        return p == null || !kernelOpen() ? -1 : readers.bound(p.slot());
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
        if (agent != null) {
            try {
                agent.close(); // the agent removes this process's opt-ins
            } catch (IOException e) {
                LOG.debug("Closing the connection to the sockmap4j agent: {}", e.toString());
            }
        }
        if (kernel != null) {
            FastPathStateEvent.emit(false, "closed", config.pinDirectory().toString(), kernel.cgroupDir().toString());
            watcher.close();
            try {
                kernel.close();
            } catch (IOException e) {
                LOG.warn("Closing the sockmap4j kernel objects in {}: {}", config.pinDirectory(), e.getMessage());
            }
        }
    }

    @Override
    public String toString() {
        return kernelOpen() ? "Sockmap[active, pins=" + config.pinDirectory() + ", cgroup=" + kernel.cgroupDir() + "]"
                : "Sockmap[off: " + unavailabilityCause() + "]";
    }
}
