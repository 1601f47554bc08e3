package io.github.sockmap4j;

import io.github.sockmap4j.internal.bpf.Counter;
import io.github.sockmap4j.internal.bpf.KernelProbe;
import io.github.sockmap4j.internal.bpf.KernelSockmap;
import io.github.sockmap4j.internal.bpf.SockStateLayout;
import io.github.sockmap4j.internal.bpf.WatchLayout;
import io.github.sockmap4j.internal.ffi.LibC;
import io.github.sockmap4j.internal.jfr.FastPathStateEvent;
import io.github.sockmap4j.internal.ffi.Libbpf;
import io.github.sockmap4j.internal.ffi.NativeIOException;
import io.github.sockmap4j.internal.net.Sockets;
import io.github.sockmap4j.internal.sys.Capabilities;
import io.github.sockmap4j.internal.sys.Cgroups;
import io.github.sockmap4j.internal.sys.SockDiag;
import java.io.IOException;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.Selector;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.LockSupport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The sockmap fast path of one pin directory: opened once, shared by every channel. When
 * anything it needs is missing it is <em>inactive</em>: channels then run over plain TCP, and
 * {@link #unavailabilityCause()} says why (logged once, at open).
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
     * for the rule: a slow reader can then make the kernel queue without limit (KERNEL-NOTES
     * hazard 6). For measuring the bound's cost, not for production.
     */
    public static final int UNBOUNDED = -1;
    private static final Object GLOBAL_LOCK = new Object();
    private static Sockmap global;

    private final SockmapConfig config;
    private final KernelSockmap kernel;
    private final String cause;
    private final Throwable causeException;
    private volatile boolean closed;

    private Sockmap(SockmapConfig config, KernelSockmap kernel, String cause, Throwable causeException) {
        this.config = config;
        this.kernel = kernel;
        this.cause = cause;
        this.causeException = causeException;
    }

    /**
     * The process-wide instance, opened on first use from {@link SockmapConfig#fromSystemProperties()}
     * and closed at JVM exit.
     *
     * @throws IllegalStateException when {@code sockmap4j.require=true} and the fast path is off
     */
    public static Sockmap global() {
        synchronized (GLOBAL_LOCK) {
            if (exiting) {
                // The exit hook has closed it: opening again now would pin objects nothing removes.
                return global != null ? global : new Sockmap(SockmapConfig.fromSystemProperties(), null,
                        "the JVM is exiting", null);
            }
            if (global == null || global.closed) {
                Sockmap s = openQuietly(SockmapConfig.fromSystemProperties());
                if (s.config.required() && !s.isActive()) {
                    throw new IllegalStateException(new SockmapUnavailableException(
                            "sockmap4j.require=true but the fast path is off: " + s.cause, s.causeException));
                }
                global = s;
                if (s.isActive() && !exitHookAdded) {
                    Runtime.getRuntime().addShutdownHook(new Thread(Sockmap::closeGlobalAtExit, "sockmap4j-close"));
                    exitHookAdded = true;
                }
            }
            return global;
        }
    }

    private static boolean exitHookAdded;
    private static boolean exiting;

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
        Sockmap s = openQuietly(config);
        if (config.required() && !s.isActive()) {
            throw new SockmapUnavailableException(
                    "the fast path was required but is off: " + s.cause, s.causeException);
        }
        return s;
    }

    private static Sockmap openQuietly(SockmapConfig config) {
        Sockmap s = tryOpen(config);
        FastPathStateEvent e = new FastPathStateEvent();
        if (e.shouldCommit()) {
            e.active = s.isActive();
            e.reason = s.isActive() ? "" : s.cause;
            e.pinDirectory = config.pinDirectory().toString();
            e.cgroup = s.isActive() ? s.kernel.cgroupDir().toString() : "";
            e.commit();
        }
        if (s.isActive()) {
            LOG.info("sockmap4j fast path active: pins {}, cgroup {}", config.pinDirectory(),
                    s.kernel.cgroupDir());
        } else {
            LOG.info("sockmap4j fast path off, plain TCP: {}", s.cause);
        }
        return s;
    }

    private static Sockmap tryOpen(SockmapConfig config) {
        if (config.disabled()) {
            return inactive(config, "disabled by configuration (sockmap4j.disable=true)", null);
        }
        if (!System.getProperty("os.name", "").startsWith("Linux")) {
            return inactive(config, "not Linux (os.name=" + System.getProperty("os.name") + ")", null);
        }
        if (!"amd64".equals(System.getProperty("os.arch")) && !"x86_64".equals(System.getProperty("os.arch"))) {
            return inactive(config, "only x86_64 is supported so far (os.arch=" + System.getProperty("os.arch") + ")", null);
        }
        Libbpf bpf;
        try {
            bpf = Libbpf.load();
        } catch (UnsatisfiedLinkError e) {
            return inactive(config, e.getMessage(), e);
        }
        Path cgroup;
        try {
            Capabilities caps = Capabilities.current();
            if (!caps.canBpf() || !caps.has(Capabilities.CAP_NET_ADMIN)) {
                return inactive(config, "missing privileges: loading the programs needs CAP_BPF (or CAP_SYS_ADMIN) "
                        + "and CAP_NET_ADMIN; run as root or grant them (e.g. setcap, or a container's capabilities)",
                        null);
            }
            if (bpf.probeMapType(Libbpf.BPF_MAP_TYPE_SOCKHASH) != 1
                    || bpf.probeProgType(Libbpf.BPF_PROG_TYPE_SK_MSG) != 1
                    || bpf.probeProgType(Libbpf.BPF_PROG_TYPE_SOCK_OPS) != 1) {
                return inactive(config, "this kernel (" + System.getProperty("os.version")
                        + ") lacks SOCKHASH, sk_msg or sockops support (CONFIG_BPF_STREAM_PARSER, "
                        + "CONFIG_NET_SOCK_MSG, CONFIG_CGROUP_BPF)", null);
            }
            String bpffs = ensureBpffs(config.pinDirectory());
            if (bpffs != null) {
                return inactive(config, bpffs, null);
            }
            Optional<Cgroups.Mount> mount = Cgroups.unifiedMount();
            if (mount.isEmpty()) {
                return inactive(config, "no cgroup v2 hierarchy is mounted (no cgroup2 line in /proc/self/mountinfo)",
                        null);
            }
            if (config.cgroup() != null) {
                cgroup = config.cgroup();
                if (!Files.isRegularFile(cgroup.resolve("cgroup.procs"))) {
                    return inactive(config, "sockmap4j.cgroup=" + cgroup + " is not a cgroup v2 directory (cgroup v2 "
                            + "is mounted at " + mount.get().mountPoint() + ")", null);
                }
            } else {
                Optional<Path> own = Cgroups.ownCgroupDir();
                if (own.isEmpty()) {
                    return inactive(config, "cannot find this process's cgroup v2 directory", null);
                }
                cgroup = own.get();
            }
            if (Cgroups.isRoot(cgroup) && !config.allowRootCgroup()) {
                return inactive(config, "the cgroup to attach to is the root cgroup " + cgroup
                        + ", which would touch every process on the host: run the service in a child cgroup, "
                        + "or set -Dsockmap4j.cgroup=<child cgroup dir> (or sockmap4j.allowRootCgroup=true to accept it)",
                        null);
            }
        } catch (IOException e) {
            return inactive(config, e.getMessage(), e);
        }
        KernelSockmap kernel;
        try {
            kernel = KernelSockmap.open(bpf, config.pinDirectory(), cgroup, config.maxSockets());
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
        s.startWatcher();
        return s;
    }

    private static String probeIfInside(KernelSockmap kernel) {
        try {
            Optional<Path> own = Cgroups.ownCgroupDir();
            if (own.isEmpty() || !own.get().equals(kernel.cgroupDir())) {
                LOG.debug("Start-up probe skipped: this process is not in {}", kernel.cgroupDir());
                return null;
            }
        } catch (IOException e) {
            return e.getMessage();
        }
        return KernelProbe.run(kernel);
    }

    private static String ensureBpffs(Path pinDir) throws IOException {
        Path mountPoint = Path.of("/sys/fs/bpf");
        if (!pinDir.toAbsolutePath().normalize().startsWith(mountPoint)) {
            return null; // a custom bpffs mount: bpf_obj_pin says so if it is not one
        }
        if (Cgroups.isMountedAt(mountPoint, "bpf")) {
            return null;
        }
        try {
            Files.createDirectories(mountPoint);
            LibC.mount("bpf", mountPoint.toString(), "bpf");
            LOG.info("Mounted bpffs at {}", mountPoint);
            return null;
        } catch (NativeIOException e) {
            return "bpffs is not mounted at /sys/fs/bpf and mounting it failed (" + e.getMessage()
                    + "): run 'mount -t bpf bpf /sys/fs/bpf' as root";
        }
    }

    private static Sockmap inactive(SockmapConfig config, String cause, Throwable e) {
        return new Sockmap(config, null, cause, e);
    }

    private volatile Thread watcher;

    private void startWatcher() {
        Thread t = new Thread(this::watchLoop, "sockmap4j-watcher");
        t.setDaemon(true);
        watcher = t;
        t.start();
    }

    /*
     * The watcher publishes, for receivers that publish nothing themselves, how many bytes they
     * surely read: what their sender had sent, minus all the receiver's receive memory, minus
     * all the sender's send queue, as sock_diag reports them. Both memories count more than the
     * bytes they hold, so the estimate is never above the truth: staleness or slack only keeps
     * a sender on TCP longer. Senders the verdict marked WANTED (held on TCP, or near the bound)
     * are polled every millisecond, the others every 50.
     */
    private void watchLoop() {
        Map<String, Long> lastPoll = new HashMap<>();
        try (SockDiag diag = SockDiag.open()) {
            long ownNetns = netnsCookieOfThisProcess();
            while (!closed) {
                boolean wanted = false;
                long now = System.nanoTime();
                Set<String> seen = new HashSet<>();
                for (KernelSockmap.Watched w : kernel.watched()) {
                    String id = HexFormat.of().formatHex(w.key());
                    seen.add(id);
                    boolean want = (w.flags() & WatchLayout.WANTED) != 0;
                    wanted |= want;
                    Long last = lastPoll.get(id);
                    if (!want && last != null && now - last < 50_000_000L) {
                        continue;
                    }
                    lastPoll.put(id, now);
                    estimate(diag, w, ownNetns);
                }
                lastPoll.keySet().retainAll(seen);
                LockSupport.parkNanos(wanted ? 1_000_000L : 50_000_000L);
            }
        } catch (IOException | RuntimeException e) {
            if (!closed) {
                LOG.warn("sockmap4j watcher stopped: receivers that publish nothing stay on TCP once over their "
                        + "bound: {}", e.toString());
            }
        }
    }

    private void estimate(SockDiag diag, KernelSockmap.Watched w, long ownNetns)
            throws IOException {
        ByteBuffer k = ByteBuffer.wrap(w.key()).order(ByteOrder.LITTLE_ENDIAN);
        byte[] local = new byte[16];
        byte[] remote = new byte[16];
        k.get(local).get(remote);
        int localPort = k.getInt();
        int remotePort = k.getInt();
        long netns = k.getLong();
        if (netns != 0 && netns != ownNetns) {
            return; // a loopback connection of another namespace: sock_diag here would find a namesake
        }
        long[] rx = diag.memInfo(local, localPort, remote, remotePort);
        long[] tx = rx == null ? null : diag.memInfo(remote, remotePort, local, localPort);
        if (rx == null || tx == null) {
            return; // not visible from this namespace
        }
        long surelyRead = w.sent() - rx[SockDiag.RMEM_ALLOC]
                - tx[SockDiag.WMEM_QUEUED];
        if (surelyRead > w.read()) {
            int flags = surelyRead == w.sent() ? w.flags() & ~WatchLayout.WANTED
                    : w.flags();
            kernel.updateWatched(w.key(), w.sent(), surelyRead, w.bound(), flags);
        }
    }

    private static long netnsCookieOfThisProcess() throws IOException {
        int fd = LibC.socket(LibC.AF_INET,
                LibC.SOCK_STREAM | LibC.SOCK_CLOEXEC,
                0);
        try {
            return Sockets.netnsCookie(fd);
        } finally {
            LibC.close(fd);
        }
    }

    /** Whether sockets opted in here move their bytes through the redirect. */
    public boolean isActive() {
        return kernel != null && !closed;
    }

    /** Why the fast path is off, or null when it is active. */
    public String unavailabilityCause() {
        return closed ? "closed" : cause;
    }

    /** Throws, with the reason, when the fast path is off. */
    public void ensureActive() throws SockmapUnavailableException {
        if (!isActive()) {
            throw new SockmapUnavailableException("sockmap4j fast path is off: " + unavailabilityCause(),
                    causeException);
        }
    }

    public SockmapConfig config() {
        return config;
    }

    /** The cgroup the sockops program is attached to, when active. */
    public Optional<Path> cgroup() {
        return isActive() ? Optional.of(kernel.cgroupDir()) : Optional.empty();
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
        if (boundBytes < 0 && boundBytes != UNBOUNDED) {
            throw new IllegalArgumentException("bound must be >= 0 bytes (or UNBOUNDED): boundBytes=" + boundBytes);
        }
        if (port < 1 || port > 65535) {
            throw new IllegalArgumentException("port must be 1..65535: port=" + port);
        }
        int bits = prefixBits;
        if (network != null) {
            int max = network instanceof Inet4Address ? 32 : 128;
            if (prefixBits < 0 || prefixBits > max) {
                throw new IllegalArgumentException("prefix must be 0.." + max + " for " + network
                        + ": prefixBits=" + prefixBits);
            }
            bits = max == 32 ? 96 + prefixBits : prefixBits;
        }
        if (!isActive()) {
            return new Handle(null, port);
        }
        return new Handle(kernel.optIn(port, network, bits, boundBytes), port);
    }

    private final class Handle implements OptIn {
        private final KernelSockmap.PolicyRule rule;
        private final int port;
        private boolean closedHandle;

        Handle(KernelSockmap.PolicyRule rule, int port) {
            this.rule = rule;
            this.port = port;
        }

        @Override
        public int port() {
            return port;
        }

        @Override
        public boolean active() {
            return rule != null && !closedHandle && isActive();
        }

        @Override
        public synchronized void setBound(int bytes) throws IOException {
            if (bytes < 0 && bytes != UNBOUNDED) {
                throw new IllegalArgumentException("bound must be >= 0 bytes: bytes=" + bytes);
            }
            if (rule == null || closedHandle || !isActive()) {
                return;
            }
            kernel.setPolicyBound(rule, bytes);
            for (ReadPublisher p : publishers) {
                if (p.server().getPort() == port) {
                    long pb = kernel.policyBound(p.server().getAddress(), port);
                    if (pb > 0 && pb != KernelSockmap.UNBOUNDED) {
                        p.fix((int) pb);
                    } else {
                        p.unfix();
                    }
                }
            }
        }

        @Override
        public synchronized void close() {
            if (!closedHandle && rule != null && kernel != null) {
                kernel.optOut(rule);
            }
            closedHandle = true;
        }

        @Override
        public String toString() {
            return "OptIn[port=" + port + ", active=" + active() + "]";
        }
    }

    /**
     * How many times the kernel has run the {@code sk_msg} verdict program ({@code run_cnt} of its
     * {@code bpf_prog_info}: one run per send on a registered socket), or -1 when inactive. The
     * kernel counts only while BPF run statistics are on: {@code sysctl kernel.bpf_stats_enabled=1}
     * or an {@link #enableKernelRunStats()} handle open anywhere on the host.
     */
    public long verdictRunCount() {
        if (!isActive()) {
            return -1;
        }
        try {
            return Libbpf.load().progRuns(kernel.redirectProgramFd()).runCount();
        } catch (IOException e) {
            return -1;
        }
    }

    /**
     * Turns the kernel's per-program run statistics on ({@code BPF_ENABLE_STATS}) until the
     * returned handle is closed or this process exits; they cost a clock read per program run.
     * Needs CAP_SYS_ADMIN.
     *
     * @throws IOException naming the missing privilege or libbpf error
     */
    public static java.io.Closeable enableKernelRunStats() throws IOException {
        int fd;
        try {
            fd = Libbpf.load().enableRunStats();
        } catch (UnsatisfiedLinkError e) {
            throw new IOException(e.getMessage(), e);
        } catch (IOException e) {
            throw new IOException("cannot turn on BPF run statistics (needs CAP_SYS_ADMIN): " + e.getMessage(), e);
        }
        java.util.concurrent.atomic.AtomicBoolean open = new java.util.concurrent.atomic.AtomicBoolean(true);
        return () -> {
            if (open.getAndSet(false)) {
                LibC.close(fd);
            }
        };
    }

    /** The kernel counters (zeros when inactive). */
    public SockmapStats stats() {
        if (!isActive()) {
            return SockmapStats.EMPTY;
        }
        long[] c = kernel.counters();
        return new SockmapStats(c[Counter.SOCKETS_REGISTERED.ordinal()], c[Counter.REGISTER_FAILED.ordinal()],
                c[Counter.MSGS_REDIRECTED.ordinal()], c[Counter.BYTES_REDIRECTED.ordinal()],
                c[Counter.MSGS_PASSED.ordinal()], c[Counter.BYTES_PASSED.ordinal()],
                c[Counter.SOCKETS_TAINTED.ordinal()], c[Counter.BOUND_HIT.ordinal()], c[Counter.RESUMED.ordinal()],
                kernel.registeredSockets());
    }

    /**
     * Whether the connected socket {@code fd} sends through the redirect: it and its peer are
     * both in the SOCKHASH (checked against the map), and it is not held on TCP (as it is while
     * its peer was not registered yet, or has left too much unread; its next send after the
     * peer has read everything takes the redirect again). For integrations that hold a raw
     * socket fd (Netty's epoll channels); {@link SockmapChannel#isAccelerated()} otherwise.
     */
    public boolean isAccelerated(int fd) {
        if (!isActive()) {
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
            long peer = kernel.lookupSocket(remote.getAddress(), remote.getPort(), local.getAddress(),
                    local.getPort(), netns);
            if (peer == 0) {
                return false;
            }
            return (kernel.socketFlags(fd) & SockStateLayout.TCP) == 0;
        } catch (IOException e) {
            return false;
        }
    }

    /** This socket's side of the bound, for diagnostics: flags, bytes sent, the peer's published read. */
    String flowState(int fd) {
        if (!isActive()) {
            return "off";
        }
        try {
            InetSocketAddress local = Sockets.localAddress(fd);
            InetSocketAddress remote = Sockets.remoteAddress(fd);
            long netns = Sockets.netnsCookie(fd);
            return "flags=" + kernel.socketFlags(fd) + " sent=" + kernel.socketSent(fd) + " peerRead="
                    + kernel.publishedRead(remote.getAddress(), remote.getPort(), local.getAddress(), local.getPort(),
                    netns);
        } catch (IOException e) {
            return e.getMessage();
        }
    }

    private final Set<ReadPublisher> publishers = ConcurrentHashMap.newKeySet();

    /**
     * Joins a connected channel that the kernel registered to the in-flight bound as a
     * receiver. Null when the bound does not apply: fast path off, or the socket not
     * registered.
     *
     * @param rcvbufSet whether the application fixed SO_RCVBUF (then it is the bound)
     */
    ReadPublisher claimReadSlot(int fd, boolean serverSide, boolean rcvbufSet) throws IOException {
        if (!isActive()) {
            return null;
        }
        InetSocketAddress local = Sockets.localAddress(fd);
        InetSocketAddress remote = Sockets.remoteAddress(fd);
        long netns = Sockets.netnsCookie(fd);
        long cookie = Sockets.cookie(fd);
        if (kernel.lookupSocket(local.getAddress(), local.getPort(), remote.getAddress(), remote.getPort(), netns)
                != cookie) {
            return null;
        }
        InetSocketAddress server = serverSide ? local : remote;
        long policy = kernel.policyBound(server.getAddress(), server.getPort());
        if (policy == KernelSockmap.UNBOUNDED) {
            return null; // nobody reads the slot of a connection without a bound
        }
        int rcvbuf = LibC.getsockoptInt(fd,
                LibC.SOL_SOCKET, LibC.SO_RCVBUF);
        int ceiling = rcvbufSet ? rcvbuf : Math.max(rcvbuf, tcpRmemMax());
        int initial = policy > 0 ? (int) policy : rcvbuf;
        KernelSockmap.ReadSlot slot = kernel.claimReadSlot(cookie, local.getAddress(), local.getPort(),
                remote.getAddress(), remote.getPort(), netns, initial);
        if (slot == null) {
            return null;
        }
        ReadPublisher p = new ReadPublisher(this, slot, server, rcvbuf, ceiling, initial);
        if (policy > 0) {
            p.fix((int) policy);
        }
        publishers.add(p);
        return p;
    }

    private volatile int tcpRmemMax;

    /** net.ipv4.tcp_rmem's third value: the largest receive buffer TCP's autotuning gives. */
    private int tcpRmemMax() {
        int v = tcpRmemMax;
        if (v == 0) {
            try (var in = Files.newInputStream(Path.of("/proc/sys/net/ipv4/tcp_rmem"))) {
                String[] f = new String(in.readAllBytes(), StandardCharsets.US_ASCII).trim()
                        .split("\\s+");
                v = Integer.parseInt(f[2]);
            } catch (IOException | RuntimeException e) {
                v = 6 << 20; // the kernel's default maximum
            }
            tcpRmemMax = v;
        }
        return v;
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

    void publishRead(KernelSockmap.ReadSlot slot, long read) {
        kernel.readSlots().publishRead(slot.index(), read);
    }

    void setSlotBound(KernelSockmap.ReadSlot slot, int bound) {
        if (isActive()) {
            kernel.setSlotBound(slot, bound);
        }
    }

    void releaseReadSlot(ReadPublisher p) {
        if (publishers.remove(p)) {
            kernel.releaseReadSlot(p.slot());
        }
    }

    /** The bound a receiving channel publishes now, or -1 when it publishes none. */
    int boundOf(ReadPublisher p) {
        return p == null || !isActive() ? -1 : kernel.slotBound(p.slot());
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
        FastPathStateEvent closing = new FastPathStateEvent();
        if (closing.shouldCommit() && kernel != null) {
            closing.active = false;
            closing.reason = "closed";
            closing.pinDirectory = config.pinDirectory().toString();
            closing.cgroup = kernel.cgroupDir().toString();
            closing.commit();
        }
        Thread t = watcher;
        if (t != null) {
            LockSupport.unpark(t);
            try {
                t.join(1000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        if (kernel != null) {
            try {
                kernel.close();
            } catch (IOException e) {
                LOG.warn("Closing the sockmap4j kernel objects in {}: {}", config.pinDirectory(), e.getMessage());
            }
        }
    }

    /**
     * Agent mode: sets up the pins of {@code config} and the cgroup attachment, and leaves them
     * in place after this process: application processes then only open them and opt in (also
     * without privileges, see {@link PolicyClient}), and none of them removes them when it closes.
     * {@link #removePins} undoes it.
     *
     * @throws SockmapUnavailableException with the reason when the fast path cannot be set up
     */
    public static void up(SockmapConfig config) throws IOException {
        try (Sockmap s = open(config.withRequired(true))) {
            s.kernel.markAgentOwned();
        }
    }

    /**
     * The counters of a pin directory read from its pins, attaching nothing (for tools);
     * null when nothing is pinned there.
     */
    public static SockmapStats stats(Path pinDirectory) throws IOException {
        Libbpf bpf;
        try {
            bpf = Libbpf.load();
        } catch (UnsatisfiedLinkError e) {
            throw new IOException(e.getMessage(), e);
        }
        long[] c = KernelSockmap.readStats(bpf, pinDirectory);
        if (c == null) {
            return null;
        }
        return new SockmapStats(c[Counter.SOCKETS_REGISTERED.ordinal()], c[Counter.REGISTER_FAILED.ordinal()],
                c[Counter.MSGS_REDIRECTED.ordinal()], c[Counter.BYTES_REDIRECTED.ordinal()],
                c[Counter.MSGS_PASSED.ordinal()], c[Counter.BYTES_PASSED.ordinal()],
                c[Counter.SOCKETS_TAINTED.ordinal()], c[Counter.BOUND_HIT.ordinal()], c[Counter.RESUMED.ordinal()],
                c[Counter.values().length]);
    }

    /** Whether an agent ({@link #up}) owns the pins of {@code pinDirectory}. */
    public static boolean isUp(Path pinDirectory) {
        return KernelSockmap.isAgentOwned(pinDirectory);
    }

    /**
     * Removes the pins of {@code pinDirectory} (maps, programs, cgroup attachments) even while
     * processes use them: their connections leave the fast path, and redirected bytes not yet
     * read may be lost. For operators cleaning up after crashed services; {@link #close()} is
     * the normal way out.
     *
     * @return how many pins were removed
     */
    public static int removePins(Path pinDirectory) throws IOException {
        return KernelSockmap.forceRemove(pinDirectory);
    }

    @Override
    public String toString() {
        return isActive() ? "Sockmap[active, pins=" + config.pinDirectory() + ", cgroup=" + kernel.cgroupDir() + "]"
                : "Sockmap[off: " + unavailabilityCause() + "]";
    }
}
