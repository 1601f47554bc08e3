package io.github.sockmap4j.admin;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapConfig;
import io.github.sockmap4j.SockmapStats;
import io.github.sockmap4j.SockmapUnavailableException;
import io.github.sockmap4j.linux.bpf.KernelSockmap;
import io.github.sockmap4j.linux.bpf.LocalPeersMap;
import io.github.sockmap4j.linux.bpf.LockDir;
import io.github.sockmap4j.linux.bpf.Pins;
import io.github.sockmap4j.linux.bpf.RetiredSets;
import io.github.sockmap4j.linux.bpf.RunStats;
import io.github.sockmap4j.linux.bpf.ServiceMap;
import io.github.sockmap4j.control.AgentClient;
import io.github.sockmap4j.control.AgentRequest;
import io.github.sockmap4j.linux.ffi.Libbpf;
import io.github.sockmap4j.linux.net.Cidr;
import io.github.sockmap4j.linux.sys.Cgroups;
import io.github.sockmap4j.linux.sys.HostCheck;
import java.io.Closeable;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;

/**
 * What operators and tools do with a pin directory, as opposed to what an application does with
 * its own {@link Sockmap}: one object a directory ({@link #of}), which sets it up for an agent
 * ({@link #up}), reads its counters, Services and local peers from outside, and removes it. What
 * concerns no directory is static: the kernel's run statistics, and parsing what an operator
 * writes ({@link Network}, {@link #endpoint}). The CLI and the node agent use this class.
 *
 * <p><b>Note:</b> this class is threadsafe (it holds only its directory).
 */
public final class SockmapAdmin {
    private final Path pinDirectory;

    private SockmapAdmin(Path pinDirectory) {
        this.pinDirectory = Objects.requireNonNull(pinDirectory, "pinDirectory");
    }

    /** What operators do with the pins of {@code pinDirectory}; nothing is opened until a method needs it. */
    public static SockmapAdmin of(Path pinDirectory) {
        return new SockmapAdmin(pinDirectory);
    }

    /** The pin directory. */
    public Path pinDirectory() {
        return pinDirectory;
    }

    @Override
    public String toString() {
        return "SockmapAdmin[" + pinDirectory + "]";
    }

    /**
     * Agent mode: sets up the pins of {@code config} and the cgroup attachment, and leaves them
     * in place after this process: application processes then only open them and opt in (also
     * without privileges, see {@link PolicyClient}), and none of them removes them when it closes.
     * {@link #removePins} undoes it.
     *
     * @return what operators do with the pins set up
     * @throws SockmapUnavailableException with the reason when the fast path cannot be set up
     */
    public static SockmapAdmin up(SockmapConfig config) throws IOException {
        if (config.disabled()) {
            throw new SockmapUnavailableException("the pins cannot be set up: disabled by configuration "
                    + "(sockmap4j.disable=true)", null);
        }
        HostCheck.Host host = HostCheck.host();
        if (host.cause() != null) {
            throw new SockmapUnavailableException("the pins cannot be set up: " + host.cause(), host.exception());
        }
        HostCheck.mountBpffs(config.pinDirectory());
        HostCheck.Target target = HostCheck.target(config.pinDirectory(), config.cgroup(), config.allowRootCgroup());
        if (target.cause() != null) {
            throw new SockmapUnavailableException("the pins cannot be set up: " + target.cause(), null);
        }
        KernelSockmap kernel;
        try {
            kernel = KernelSockmap.open(host.bpf(), config.pinDirectory(), target.cgroup(), config.maxSockets());
        } catch (IOException e) {
            throw new SockmapUnavailableException("setting up the kernel objects failed: " + e.getMessage(), e);
        }
        try (kernel) {
            kernel.markAgentOwned();
        }
        return of(config.pinDirectory());
    }

    /** Where the node agent of this directory listens for opt-ins (see {@link PolicyClient}). */
    public Path agentSocket() {
        return AgentRequest.socketPath(LockDir.pathFor(pinDirectory));
    }

    /**
     * A network as an operator writes it, {@code ADDRESS} or {@code ADDRESS/PREFIX}.
     *
     * @param address    an address literal
     * @param prefixBits how many leading bits of it the network fixes
     */
    public record Network(InetAddress address, int prefixBits) {
        /**
         * Parses {@code ADDRESS[/PREFIX]} from literals only: a host name is refused, never resolved
         * (a rule must not change with what a resolver says).
         *
         * @throws IllegalArgumentException saying what is wrong with {@code text}
         */
        public static Network parse(String text) {
            Cidr c = Cidr.parse(text);
            return new Network(c.network(), c.prefixBits());
        }

        /**
         * An address literal, never a name.
         *
         * @throws IllegalArgumentException when {@code text} is not one
         */
        public static InetAddress literal(String text) {
            return Cidr.literal(text);
        }
    }

    /**
     * An endpoint as an operator writes it, {@code ADDRESS:PORT} or {@code [IPV6]:PORT}, address
     * literals only (no name is looked up).
     *
     * @throws IllegalArgumentException saying what is wrong with {@code text}
     */
    public static InetSocketAddress endpoint(String text) {
        int colon = text.lastIndexOf(':');
        if (colon <= 0 || colon == text.length() - 1) {
            throw new IllegalArgumentException("'" + text + "' is not ADDRESS:PORT ([IPV6]:PORT)");
        }
        String host = text.substring(0, colon);
        if (host.startsWith("[") && host.endsWith("]")) {
            host = host.substring(1, host.length() - 1);
        } else if (host.contains(":")) {
            throw new IllegalArgumentException("'" + text + "': write an IPv6 address as [IPV6]:PORT");
        }
        int port;
        try {
            port = Integer.parseInt(text.substring(colon + 1));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("'" + text + "': the port is not a number");
        }
        if (port < 1 || port > 65535) {
            throw new IllegalArgumentException("'" + text + "': the port must be 1..65535");
        }
        try {
            return new InetSocketAddress(Network.literal(host), port);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("'" + text + "': " + e.getMessage(), e);
        }
    }

    /** Whether a node agent answers on the control socket of this directory now. */
    public boolean agentRunning() {
        try (AgentClient agent = AgentClient.connectIfRunning(agentSocket())) {
            return agent != null;
        } catch (IOException e) {
            return true; // a socket there that refuses us is an agent's all the same
        }
    }

    /** Whether an agent ({@link #up}) owns the pins of this directory. */
    public boolean isUp() {
        return Pins.isAgentOwned(pinDirectory);
    }

    /** The ids of the cgroups the pins of this directory attach their sockops program to, sorted. */
    public List<Long> attachedCgroups() throws IOException {
        return Pins.attachedCgroups(pinDirectory);
    }

    /**
     * The cgroups the pins of this directory attach to, by id, each with its directory under this
     * host's cgroup v2 mount where one of that id is found there (at most 32 levels down), sorted
     * by id; a cgroup removed, or one of another mount namespace, maps to null.
     */
    public Map<Long, Path> attachedCgroupPaths() throws IOException {
        Map<Long, Path> out = new TreeMap<>();
        List<Long> ids = attachedCgroups();
        ids.forEach(id -> out.put(id, null));
        Optional<Cgroups.Mount> mount =
                Cgroups.unifiedMount();
        if (ids.isEmpty() || mount.isEmpty()) {
            return out;
        }
        for (Path dir : Cgroups.tree(mount.get().mountPoint(), 32)) {
            try {
                long id = Cgroups.id(dir);
                if (out.containsKey(id) && out.get(id) == null) {
                    out.put(id, dir);
                }
            } catch (IOException gone) {
                // removed meanwhile
            }
        }
        return out;
    }

    /**
     * The sets of another sockmap4j version an agent retired in this directory and has not
     * removed yet: each waits for its last connection to close (docs/agent.md, "Upgrades").
     */
    public List<Path> retiredSets() throws IOException {
        return RetiredSets.list(pinDirectory);
    }

    /**
     * The counters of a pin directory read from its pins, attaching nothing; null when nothing
     * is pinned there.
     */
    public SockmapStats stats() throws IOException {
        long[] c = Pins.readStats(libbpf(), pinDirectory);
        return c == null ? null : SockmapStats.of(c, c[c.length - 1]);
    }

    /**
     * Removes the pins of this directory (maps, programs, cgroup attachments) even while
     * processes use them: their connections leave the fast path, and redirected bytes not yet
     * read may be lost. For operators cleaning up after crashed services; {@link Sockmap#close()}
     * is the normal way out.
     *
     * @return how many pins were removed
     */
    public int removePins() throws IOException {
        return Pins.forceRemove(pinDirectory);
    }

    /**
     * Turns the kernel's per-program run statistics on ({@code BPF_ENABLE_STATS}) until the
     * returned handle is closed or this process exits; they cost a clock read per program run.
     * Needs CAP_SYS_ADMIN. {@link Sockmap#verdictRunCount()} reads them.
     *
     * @throws IOException naming the missing privilege or libbpf error
     */
    public static Closeable enableKernelRunStats() throws IOException {
        return RunStats.enable(libbpf());
    }

    /**
     * A Service whose connects the kernel sends straight to one of its endpoints (connect-time
     * translation: docs/services.md), picked with equal odds at each connect.
     *
     * @param vip       the Service's address and port, as clients dial it
     * @param local     ready endpoints on this node (their pods in the attached cgroups)
     * @param remote    ready endpoints elsewhere; picked with the same odds, and dialed directly
     * @param localOnly whether only local endpoints are picked (internalTrafficPolicy Local)
     */
    public record Service(InetSocketAddress vip, List<InetSocketAddress> local,
                          List<InetSocketAddress> remote, boolean localOnly) {
        /**
         * @throws IllegalArgumentException for more endpoints than an entry holds (16), or one of
         *         another family than the VIP
         */
        public Service {
            ServiceMap.Service checked = new ServiceMap.Service(vip, local, remote, localOnly);
            local = checked.local();
            remote = checked.remote();
        }
    }

    /**
     * Adds the Service to the pin directory's Service map, or replaces the one of its VIP and port;
     * new connects take it at once, open connections are untouched.
     *
     * @throws IllegalArgumentException for more than 16 endpoints, or one of another family
     * @throws IOException naming what failed (no pins there, no privilege)
     */
    public void putService(Service s) throws IOException {
        try (ServiceMap m = ServiceMap.open(libbpf(), pinDirectory)) {
            m.put(new ServiceMap.Service(s.vip(), s.local(), s.remote(), s.localOnly()));
        }
    }

    /**
     * Removes the Service of {@code vip}: new connects to it go through kube-proxy again.
     *
     * @return whether there was one
     */
    public boolean removeService(InetSocketAddress vip) throws IOException {
        try (ServiceMap m = ServiceMap.open(libbpf(), pinDirectory)) {
            return m.remove(vip);
        }
    }

    /** The Services in the pin directory's Service map. */
    public List<Service> services() throws IOException {
        try (ServiceMap m = ServiceMap.open(libbpf(), pinDirectory)) {
            return m.list().stream().map(x -> new Service(x.vip(), x.local(), x.remote(), x.localOnly())).toList();
        }
    }

    /**
     * A pod with a service mesh's sidecar proxy whose hops the kernel accelerates (docs/mesh.md):
     * its applications' connects go straight to its proxy on loopback, other meshed pods' proxies'
     * connects to it straight to its proxy's inbound port, as its NAT rules would send them, and
     * each proxy is told the original destination. Root's only: the node agent puts a pod from its
     * own annotations.
     *
     * @param netns        the cookie of the pod's network namespace
     * @param proxyUid     the proxy's uid (Istio's 1337): its connects are never sent to itself
     * @param proxyGid     the proxy's gid (Istio's 1337, its NAT's {@code -g}), whose tasks' connects
     *                     its NAT leaves alone as the uid's: the capture leaves them alone too; -1
     *                     for none (Linkerd's NAT leaves no group alone)
     * @param outboundPort the proxy's outbound port (Istio's 15001)
     * @param inboundPort  the proxy's inbound port (Istio's 15006)
     * @param addresses    the pod's addresses
     * @param outboundSkip the destination ports its NAT leaves out of the outbound redirect, at
     *                     most 8 (Istio's {@code excludeOutboundPorts}): an application's connect
     *                     to one goes where it was dialed
     * @param inboundSkip  the ports its NAT leaves out of the inbound redirect, at most 8 (Istio's:
     *                     {@link #ISTIO_INBOUND_SKIP}, and {@code excludeInboundPorts}): another
     *                     proxy's connect to one goes to that port
     */
    public record MeshedPod(long netns, int proxyUid, int proxyGid, int outboundPort, int inboundPort,
                            List<InetAddress> addresses, List<Integer> outboundSkip,
                            List<Integer> inboundSkip) {
        /**
         * The ports Istio's init container leaves out of a sidecar's inbound redirect: the proxy's
         * own (HBONE 15008, the agent's 15020, health 15021, Envoy's metrics 15090).
         */
        public static final List<Integer> ISTIO_INBOUND_SKIP = List.of(15008, 15020, 15021, 15090);

        public MeshedPod {
            io.github.sockmap4j.linux.bpf.MeshMap.Pod checked = new io.github.sockmap4j.linux.bpf.MeshMap.Pod(netns,
                    proxyUid, proxyGid, outboundPort, inboundPort, addresses, outboundSkip, inboundSkip);
            addresses = checked.addresses();
            outboundSkip = checked.outboundSkip();
            inboundSkip = checked.inboundSkip();
        }

        /** A pod whose proxy's group is its uid's, as Istio's sidecar runs (uid and gid 1337). */
        public static MeshedPod istio(long netns, int proxyUid, int outboundPort, int inboundPort,
                                      List<InetAddress> addresses,
                                      List<Integer> outboundSkip, List<Integer> inboundSkip) {
            return new MeshedPod(netns, proxyUid, proxyUid, outboundPort, inboundPort, addresses, outboundSkip,
                    inboundSkip);
        }
    }

    /**
     * The cookie of the network namespace process {@code pid} is in, as the kernel programs and
     * {@link MeshedPod#netns()} name it (entering another process's namespace needs CAP_SYS_ADMIN).
     *
     * @throws IOException naming the pid when it is gone or its namespace cannot be entered
     */
    public static long networkNamespaceOf(long pid) throws IOException {
        return io.github.sockmap4j.linux.sys.NetnsCookie.ofProcess(pid);
    }

    /** Puts (or replaces) the meshed pod of {@code pod.netns()}. */
    public void putMeshedPod(MeshedPod pod) throws IOException {
        try (io.github.sockmap4j.linux.bpf.MeshMap m = io.github.sockmap4j.linux.bpf.MeshMap.open(libbpf(),
                pinDirectory)) {
            m.put(new io.github.sockmap4j.linux.bpf.MeshMap.Pod(pod.netns(), pod.proxyUid(), pod.proxyGid(),
                    pod.outboundPort(),
                    pod.inboundPort(), pod.addresses(), pod.outboundSkip(), pod.inboundSkip()));
        }
    }

    /**
     * Removes the meshed pod of namespace {@code netns}: its connects go through its NAT rules again.
     *
     * @return whether there was one
     */
    public boolean removeMeshedPod(long netns) throws IOException {
        try (io.github.sockmap4j.linux.bpf.MeshMap m = io.github.sockmap4j.linux.bpf.MeshMap.open(libbpf(),
                pinDirectory)) {
            return m.remove(netns);
        }
    }

    /** The meshed pods of the pin directory. */
    public List<MeshedPod> meshedPods() throws IOException {
        try (io.github.sockmap4j.linux.bpf.MeshMap m = io.github.sockmap4j.linux.bpf.MeshMap.open(libbpf(),
                pinDirectory)) {
            return m.list().stream().map(p -> new MeshedPod(p.netns(), p.proxyUid(), p.proxyGid(), p.outboundPort(),
                    p.inboundPort(), p.addresses(), p.outboundSkip(), p.inboundSkip())).toList();
        }
    }

    /**
     * Another program that puts sockets in a sockmap of its own on this node: which sockets of
     * opted-in ports it held (they stay on TCP under its sk_msg program; the most recent first, up
     * to 1,024), and which sock_ops programs besides sockmap4j's run for {@code cgroup} (on it, an
     * ancestor or a cgroup below it), as "id N 'NAME' on CGROUP".
     */
    public record Collisions(List<String> sockets, List<String> programs) {
    }

    /** What {@link Collisions} says for the pin directory and {@code cgroup}. */
    public Collisions collisions(Path cgroup) throws IOException {
        List<String> sockets = io.github.sockmap4j.linux.bpf.Collisions.busySockets(libbpf(), pinDirectory)
                .stream().map(Object::toString).toList();
        return new Collisions(sockets,
                io.github.sockmap4j.linux.bpf.Collisions.otherSockopsPrograms(libbpf(), pinDirectory, cgroup));
    }

    /**
     * How many sockets whose connect was translated to a Service's endpoint are open (the
     * kernel remembers each one's Service, for getpeername, until it closes; at most 65,536).
     */
    public int translatedSockets() throws IOException {
        return ServiceMap.translatedSockets(libbpf(), pinDirectory);
    }

    /**
     * Says where on this node a registered socket's server may be: the node's own addresses and
     * its pods' (the node agent keeps them from the Kubernetes API). A client whose server is
     * at another address is not registered: its sends would only miss, through a slower send
     * path than TCP's own (docs/services.md). Loopback is always local. Pins start with every
     * address ({@code ::/0}); {@link #allLocalPeers} goes back to that.
     *
     * @param networks the node's address prefixes (replacing those there)
     * @throws IOException naming what failed (no pins there, no privilege)
     */
    public void setLocalPeers(Collection<Network> networks) throws IOException {
        Set<LocalPeersMap.Prefix> p = new HashSet<>();
        for (Network n : networks) {
            p.add(new LocalPeersMap.Prefix(n.address(), n.prefixBits()));
        }
        try (LocalPeersMap m = LocalPeersMap.open(libbpf(), pinDirectory)) {
            m.replace(p);
        }
    }

    /** Every address may be a local peer again, as when the pins were made. */
    public void allLocalPeers() throws IOException {
        setLocalPeers(List.of(new Network(InetAddress.ofLiteral("::"), 0)));
    }

    /** The local peer prefixes of the pin directory. */
    public List<Network> localPeers() throws IOException {
        try (LocalPeersMap m = LocalPeersMap.open(libbpf(), pinDirectory)) {
            return m.list().stream().map(x -> new Network(x.address(), x.bits())).toList();
        }
    }

    private static Libbpf libbpf() throws IOException {
        return Libbpf.loadOrThrow();
    }
}
