package io.github.sockmap4j.agent;

import io.github.sockmap4j.SockmapConfig;
import io.github.sockmap4j.SockmapStats;
import io.github.sockmap4j.SockmapUnavailableException;
import io.github.sockmap4j.admin.Rule;
import io.github.sockmap4j.admin.SockmapAdmin;
import io.github.sockmap4j.agent.control.AgentPolicy;
import io.github.sockmap4j.agent.control.ControlCounts;
import io.github.sockmap4j.agent.control.ControlServer;
import io.github.sockmap4j.agent.control.Dispatcher;
import io.github.sockmap4j.agent.control.Listeners;
import io.github.sockmap4j.agent.control.RuleBook;
import io.github.sockmap4j.agent.control.RuleRequests;
import io.github.sockmap4j.agent.control.ServiceRequests;
import io.github.sockmap4j.linux.bpf.Collisions;
import io.github.sockmap4j.linux.bpf.InFlightWatcher;
import io.github.sockmap4j.linux.bpf.KernelSockmap;
import io.github.sockmap4j.linux.bpf.LockDir;
import io.github.sockmap4j.linux.bpf.Pins;
import io.github.sockmap4j.linux.bpf.PolicyMap;
import io.github.sockmap4j.linux.bpf.RetiredSets;
import io.github.sockmap4j.linux.bpf.PolicyRule;
import io.github.sockmap4j.control.AgentRequest;
import io.github.sockmap4j.linux.ffi.Libbpf;
import io.github.sockmap4j.linux.net.UnixListener;
import io.github.sockmap4j.linux.sys.HostCheck;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The node agent's work, for {@code sockmap4j agent} (or any process that embeds it): it creates
 * the pins of a directory or adopts those there (an agent restart loses no rule and takes no
 * connection off the fast path), attaches to the cgroups it is given, and until closed:
 * <ul>
 *   <li>estimates what receivers that publish nothing (C, Rust, a JDK socket) have read, for
 *       every watched connection in the network namespace of any process of its cgroups, so
 *       that they keep the redirect within their bound;</li>
 *   <li>serves opt-ins on a Unix socket ({@link SockmapAdmin#agentSocket()}): each request is
 *       checked against the policy file with the requester's kernel-given uid and groups, and
 *       the agent is the only writer of the policy map, whose pin it makes root-only;</li>
 *   <li>holds rules for named owners ({@link #hold}: pods, from their annotations).</li>
 * </ul>
 * Closing it leaves pins, attachments and rules in place for the next agent;
 * {@link SockmapAdmin#removePins()} is the explicit way to remove them.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
public final class NodeAgent implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(NodeAgent.class);

    /**
     * What the agent runs with.
     *
     * @param pinDirectory    the bpffs directory of the pins
     * @param cgroups         the cgroups to attach to (at least one; their processes' namespaces are watched)
     * @param policyFile      who may opt in what; null: only root
     * @param maxSockets      the SOCKHASH capacity when the agent creates the pins
     * @param allowRootCgroup whether attaching to the root cgroup is accepted
     */
    public record Options(Path pinDirectory, List<Path> cgroups, Path policyFile, int maxSockets,
                          boolean allowRootCgroup) {
        public Options {
            if (cgroups == null || cgroups.isEmpty()) {
                throw new IllegalArgumentException("the agent needs a cgroup to attach to (--cgroup)");
            }
            cgroups = List.copyOf(cgroups);
        }
    }

    private final Options options;
    private final List<KernelSockmap> kernels;
    private final InFlightWatcher watcher;
    private final PolicyMap policy;
    private final RuleBook book;
    private final ControlServer control;
    private final ControlCounts controlCounts;
    private final ServiceRequests serviceRequests;
    private final io.github.sockmap4j.linux.bpf.ServiceMap serviceMap;
    private final io.github.sockmap4j.agent.control.ServiceBook services;
    private final ScheduledExecutorService reaper;
    private volatile boolean closed;
    private final CompletableFuture<String> lost = new CompletableFuture<>();

    private NodeAgent(Options options, List<KernelSockmap> kernels, InFlightWatcher watcher, PolicyMap policy,
                      RuleBook book, ControlServer control, ServiceRequests serviceRequests,
                      io.github.sockmap4j.linux.bpf.ServiceMap serviceMap,
                      io.github.sockmap4j.agent.control.ServiceBook services, ScheduledExecutorService reaper) {
        this.serviceMap = serviceMap;
        this.services = services;
        this.options = options;
        this.kernels = kernels;
        this.watcher = watcher;
        this.policy = policy;
        this.book = book;
        this.control = control;
        this.controlCounts = control.counts();
        this.serviceRequests = serviceRequests;
        this.reaper = reaper;
    }

    /**
     * Starts the agent.
     *
     * @throws SockmapUnavailableException when the fast path cannot be set up here, with why
     * @throws IOException                 for a policy file with errors (naming the line), or a control
     *                                     socket another agent of the directory listens on
     */
    public static NodeAgent start(Options options) throws IOException {
        AgentPolicy agentPolicy = options.policyFile() == null ? AgentPolicy.rootOnly() : loadPolicy(options.policyFile());
        HostCheck.Host host = HostCheck.host();
        if (host.cause() != null) {
            throw new SockmapUnavailableException("the agent cannot start: " + host.cause(), host.exception());
        }
        List<KernelSockmap> kernels = new ArrayList<>();
        InFlightWatcher watcher = null;
        PolicyMap policy = null;
        ControlServer control = null;
        io.github.sockmap4j.linux.bpf.ServiceMap serviceMap = null;
        // Before anything of the directory is touched: an agent of another version would retire the
        // pins a running one uses (a DaemonSet surging a second pod onto the node, two units by mistake).
        if (SockmapAdmin.of(options.pinDirectory()).agentRunning()) {
            throw new IOException("another sockmap4j agent serves " + options.pinDirectory() + " ("
                    + SockmapAdmin.of(options.pinDirectory()).agentSocket() + " answers): stop it first");
        }
        try {
            List<Path> retiredBefore = RetiredSets.list(options.pinDirectory());
            for (Path cg : options.cgroups()) {
                SockmapConfig config = SockmapConfig.builder().pinDirectory(options.pinDirectory()).cgroup(cg)
                        .maxSockets(options.maxSockets()).allowRootCgroup(options.allowRootCgroup()).build();
                HostCheck.mountBpffs(config.pinDirectory());
                HostCheck.Target target = HostCheck.target(config.pinDirectory(), config.cgroup(), config.allowRootCgroup());
                if (target.cause() != null) {
                    throw new SockmapUnavailableException("the agent cannot start: " + target.cause(), null);
                }
                KernelSockmap k = KernelSockmap.open(host.bpf(), options.pinDirectory(), target.cgroup(),
                        options.maxSockets(), true);
                kernels.add(k);
                k.markAgentOwned();
            }
            // Pins of another version were retired: this version's programs are attached now, so the
            // retired ones leave the cgroups (their connections stay on their maps until they close).
            boolean retiredNow = !retiredBefore.containsAll(RetiredSets.list(options.pinDirectory()));
            int detached = RetiredSets.detach(options.pinDirectory());
            if (detached > 0) {
                LOG.info("sockmap4j agent: detached {} cgroup links of retired pins", detached);
            }
            revokeGrants(options.pinDirectory());
            watcher = new InFlightWatcher(kernels.get(0).inFlight(), options.cgroups()).start();
            policy = PolicyMap.open(host.bpf(), options.pinDirectory());
            Path lockDir = LockDir.pathFor(options.pinDirectory());
            RuleBook book = RuleBook.load(policy, lockDir.resolve("agent-rules"), retiredNow);
            serviceMap = io.github.sockmap4j.linux.bpf.ServiceMap.open(host.bpf(), options.pinDirectory());
            io.github.sockmap4j.agent.control.ServiceBook services = io.github.sockmap4j.agent.control.ServiceBook
                    .load(serviceMap, lockDir.resolve("agent-services"));
            RuleRequests ruleRequests = new RuleRequests(book, agentPolicy);
            Listeners listeners = new Listeners();
            ruleRequests.checkListeners((port, pid) -> listeners.on(port, options.cgroups(), pid));
            ServiceRequests serviceRequests = new ServiceRequests(services, agentPolicy);
            ControlServer.Limits limits = ControlServer.Limits.DEFAULT;
            control = new ControlServer(UnixListener.listen(AgentRequest.socketPath(lockDir)),
                    new Dispatcher(limits, new ControlCounts(), ruleRequests, serviceRequests), book, limits);
            control.start();
            ScheduledExecutorService reaper = Executors.newSingleThreadScheduledExecutor(r -> {
                Thread t = new Thread(r, "sockmap4j-agent-reaper");
                t.setDaemon(true);
                return t;
            });
            reaper.scheduleWithFixedDelay(book::reapDeadProcesses, 1, 1, TimeUnit.SECONDS);
            LOG.info("sockmap4j agent: pins {}, attached to {}, {} rules adopted, {} policy grants, control socket {}",
                    options.pinDirectory(), options.cgroups(), book.size(), agentPolicy.grants(),
                    AgentRequest.socketPath(lockDir));
            NodeAgent agent = new NodeAgent(options, kernels, watcher, policy, book, control, serviceRequests, serviceMap, services,
                    reaper);
            reaper.scheduleWithFixedDelay(agent::checkPins, 1, 1, TimeUnit.SECONDS);
            agent.reportOtherSockops();
            reaper.scheduleWithFixedDelay(agent::checkCollisions, 5, 5, TimeUnit.SECONDS);
            reaper.scheduleWithFixedDelay(agent::reapRetired, 0, 1, TimeUnit.SECONDS);
            return agent;
        } catch (IOException | RuntimeException e) {
            if (control != null) {
                control.close();
            }
            if (watcher != null) {
                watcher.close();
            }
            if (policy != null) {
                policy.close();
            }
            if (serviceMap != null) {
                serviceMap.close();
            }
            for (KernelSockmap k : kernels) {
                try {
                    k.close();
                } catch (IOException suppressed) {
                    e.addSuppressed(suppressed);
                }
            }
            throw e;
        }
    }

    private static AgentPolicy loadPolicy(Path file) throws IOException {
        try {
            return AgentPolicy.load(file);
        } catch (IllegalArgumentException e) {
            throw new IOException(e.getMessage(), e);
        } catch (java.nio.file.NoSuchFileException e) {
            throw new IOException("no policy file " + file + " (--policy)", e);
        }
    }

    /** The agent is the only writer of the policy map: a group grant made by {@code up --group} goes. */
    private static void revokeGrants(Path pinDir) throws IOException {
        Path pin = Pins.policyPin(pinDir);
        Set<PosixFilePermission> perms = Files.getPosixFilePermissions(pin);
        if (perms.contains(PosixFilePermission.GROUP_WRITE) || perms.contains(PosixFilePermission.OTHERS_WRITE)) {
            LOG.warn("The policy map {} was writable by its group ({}); the agent makes it root-only: opt in through "
                    + "the agent's control socket instead", pin, PosixFilePermissions.toString(perms));
        }
        Files.setPosixFilePermissions(pin, PosixFilePermissions.fromString("rw-------"));
    }

    /**
     * Makes {@code owner} (a name of the caller's, such as {@code pod:NAMESPACE/NAME}) hold exactly
     * {@code rules}: rules it held and no longer lists go unless someone else holds them too.
     * An empty list releases everything it held.
     */
    public void hold(Owner owner, List<Rule> rules) {
        List<AgentRequest> wanted = new ArrayList<>();
        for (Rule r : rules) {
            wanted.add(new AgentRequest(AgentRequest.Verb.ALLOW, PolicyRule.of(r.port(), r.network(), r.prefixBits()),
                    r.bound()));
        }
        book.hold(owner, wanted);
    }

    /**
     * The Service map is fed from elsewhere from now on (the Kubernetes API): the control
     * socket's SERVICE and UNSERVICE are refused, to root too, saying {@code why}.
     */
    public void refuseServiceRequests(String why) {
        serviceRequests.refuseServices(why);
    }

    /**
     * Puts {@code s} in the Service map as root does (every connect), through the agent's record
     * of who put each Service, as the control socket's requests go: the Kubernetes feed's writes.
     */
    public void putService(io.github.sockmap4j.admin.SockmapAdmin.Service s) throws IOException {
        services.putForEveryone(new io.github.sockmap4j.linux.bpf.ServiceMap.Service(s.vip(), s.local(), s.remote(),
                s.localOnly()));
    }

    /** Removes the Service of {@code vip} as root does, through the same record; whether there was one. */
    public boolean removeService(java.net.InetSocketAddress vip) throws IOException {
        return services.removeForEveryone(vip);
    }

    /** The VIPs of the Services in the map now, of every namespace. */
    public List<java.net.InetSocketAddress> serviceVips() throws IOException {
        return services.list().stream().map(io.github.sockmap4j.linux.bpf.ServiceMap.Service::vip).toList();
    }

    /** The owners starting with {@code prefix} that hold a rule now (after a restart: those adopted). */
    public Set<Owner> owners(Owner.Kind kind) {
        return book.owners(kind);
    }

    /**
     * Whether its control plane lives: pins in place, watcher running, control socket thread
     * accepting (or backing off from a failing accept, from which it recovers by itself).
     */
    public boolean isAlive() {
        return !closed && !lost.isDone() && watcher.isRunning() && control.isRunning();
    }

    /** Whether it works: pins in place, watcher running, control socket serving. */
    public boolean isReady() {
        return !closed && !lost.isDone() && watcher.isRunning() && control.isServing();
    }

    /**
     * Completes, with what happened, when the agent's pins were removed under it (a
     * {@code sockmap4j down --force}, or someone unpinning by hand): the fast path of its cgroups is
     * gone and its opt-ins change nothing, so it is not ready from then on, and its process should
     * exit so that whatever runs it (systemd, a DaemonSet) starts one that sets them up again. The
     * CLI's {@code agent} does, with status 3.
     */
    public CompletableFuture<String> pinsLost() {
        return lost;
    }

    /** Each second: are the pins this agent set up still there? */
    private void checkPins() {
        if (closed || lost.isDone()) {
            return;
        }
        if (control != null) {
            controlCounts.flushLogs();
        }
        List<Path> gone = new ArrayList<>();
        Path dir = options.pinDirectory();
        gone.addAll(Pins.agentPinsMissing(dir));
        for (KernelSockmap k : kernels) {
            if (!k.isAttached()) {
                gone.add(Pins.linkPin(dir, k.cgroupId()));
            }
        }
        if (!gone.isEmpty()) {
            String why = "the pins " + gone + " were removed while the agent ran (sockmap4j down --force, or by "
                    + "hand): the fast path of " + options.cgroups() + " is off";
            LOG.error("sockmap4j agent: {}; not ready, stopping so that it can be started again", why);
            lost.complete(why);
        }
    }

    /** Removes the retired pins of another version whose last connection closed ({@link Pins#reapRetired}). */
    private void reapRetired() {
        if (closed) {
            return;
        }
        try {
            RetiredSets.reap(Libbpf.load(), options.pinDirectory());
        } catch (IOException | RuntimeException e) {
            LOG.warn("sockmap4j agent: cannot look at the retired pins in {}: {}", options.pinDirectory(), e.toString());
        }
    }

    /** Sockets of opted-in ports another program's sockmap held, when the last check saw them. */
    private long busySeen;

    /** Says once which other sock_ops programs run for the agent's cgroups (a sockmap user among them collides). */
    private void reportOtherSockops() {
        try {
            List<String> others = new ArrayList<>();
            for (Path cg : options.cgroups()) {
                others.addAll(Collisions.otherSockopsPrograms(Libbpf.load(), options.pinDirectory(), cg));
            }
            if (!others.isEmpty()) {
                LOG.info("sock_ops programs besides sockmap4j's run for {}: {}; one that puts sockets in a sockmap of "
                        + "its own keeps those it registers first off the fast path (counted as socketsBusy)",
                        options.cgroups(), others);
            }
        } catch (IOException | RuntimeException e) {
            LOG.debug("Cannot list the sock_ops programs of {}: {}", options.cgroups(), e.toString());
        }
    }

    /** Every few seconds: did another program's sockmap hold sockets of opted-in ports? Says which, and who. */
    private void checkCollisions() {
        if (closed || lost.isDone()) {
            return;
        }
        try {
            long busy = stats().socketsBusy();
            if (busy <= busySeen) {
                return;
            }
            List<Collisions.BusySocket> sockets = Collisions.busySockets(Libbpf.load(), options.pinDirectory());
            List<String> others = new ArrayList<>();
            for (Path cg : options.cgroups()) {
                others.addAll(Collisions.otherSockopsPrograms(Libbpf.load(), options.pinDirectory(), cg));
            }
            LOG.warn("{} socket(s) of opted-in ports were already in another program's sockmap and stay on TCP under "
                    + "that program's sk_msg (a socket runs one), e.g. {}; sock_ops programs besides sockmap4j's for "
                    + "{}: {}", busy - busySeen, sockets.subList(0, Math.min(8, sockets.size())), options.cgroups(),
                    others.isEmpty() ? "none found (attached elsewhere, or by a process's own sockmap update)" : others);
            busySeen = busy;
        } catch (IOException | RuntimeException e) {
            LOG.debug("Cannot read the sockets another sockmap held: {}", e.toString());
        }
    }

    public Options options() {
        return options;
    }

    /** The counters of the pin directory. */
    public SockmapStats stats() {
        KernelSockmap k = kernels.get(0);
        return SockmapStats.of(k.counters(), k.registeredSockets());
    }

    /** The network namespaces the in-flight watcher looks in. */
    public int watchedNamespaces() {
        return watcher.namespaces();
    }

    /** How many times the watcher raised a receiver's estimate or bound. */
    public long watcherEstimates() {
        return watcher.estimates();
    }

    /** The rules in the policy map. */
    public int rules() {
        return book.size();
    }

    /** Each rule and its holders. */
    public List<String> describeRules() {
        return book.describeAll();
    }

    /** Requests the control socket answered OK. */
    public long controlDone() {
        return controlCounts.done();
    }

    /** What the control socket refused for {@code why}: connections, lines, requests. */
    long controlRefusals(ControlCounts.Refusal why) {
        return controlCounts.refusedFor(why);
    }

    /** Requests the control socket answered ERR. */
    public long controlRefusedRequests() {
        return controlCounts.refusedRequests();
    }

    /** Stops the agent; pins, attachments and rules stay for the next one. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        control.close();
        reaper.shutdownNow();
        watcher.close();
        policy.close();
        serviceMap.close();
        for (KernelSockmap k : kernels) {
            try {
                k.close();
            } catch (IOException e) {
                LOG.warn("Closing the agent's handle of {}: {}", k.cgroupDir(), e.toString());
            }
        }
        LOG.info("sockmap4j agent stopped; pins in {} stay for the next agent", options.pinDirectory());
    }
}
