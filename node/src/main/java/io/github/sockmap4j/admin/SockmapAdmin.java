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
import io.github.sockmap4j.linux.sys.HostCheck;
import java.io.Closeable;
import java.io.IOException;
import java.nio.file.Path;

/**
 * What operators and tools do with a pin directory, as opposed to what an application does with
 * its own {@link Sockmap}: set it up for an agent, read its counters from outside, remove it,
 * turn the kernel's run statistics on. The CLI and the node agent use this class.
 *
 * <p><b>Note:</b> this class is threadsafe (it holds no state).
 */
public final class SockmapAdmin {
    private SockmapAdmin() {
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
    }

    /** Where the node agent of {@code pinDirectory} listens for opt-ins (see {@link PolicyClient}). */
    public static Path agentSocket(Path pinDirectory) {
        return AgentRequest.socketPath(LockDir.pathFor(pinDirectory));
    }

    /**
     * A network as an operator writes it, {@code ADDRESS} or {@code ADDRESS/PREFIX}.
     *
     * @param address    an address literal
     * @param prefixBits how many leading bits of it the network fixes
     */
    public record Network(java.net.InetAddress address, int prefixBits) {
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
        public static java.net.InetAddress literal(String text) {
            return Cidr.literal(text);
        }
    }

    /**
     * An endpoint as an operator writes it, {@code ADDRESS:PORT} or {@code [IPV6]:PORT}, address
     * literals only (no name is looked up).
     *
     * @throws IllegalArgumentException saying what is wrong with {@code text}
     */
    public static java.net.InetSocketAddress endpoint(String text) {
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
            return new java.net.InetSocketAddress(Network.literal(host), port);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("'" + text + "': " + e.getMessage(), e);
        }
    }

    /** Whether a node agent answers on the control socket of {@code pinDirectory} now. */
    public static boolean agentRunning(Path pinDirectory) {
        try (AgentClient agent = AgentClient.connectIfRunning(agentSocket(pinDirectory))) {
            return agent != null;
        } catch (IOException e) {
            return true; // a socket there that refuses us is an agent's all the same
        }
    }

    /** Whether an agent ({@link #up}) owns the pins of {@code pinDirectory}. */
    public static boolean isUp(Path pinDirectory) {
        return Pins.isAgentOwned(pinDirectory);
    }

    /** The ids of the cgroups the pins of {@code pinDirectory} attach their sockops program to, sorted. */
    public static java.util.List<Long> attachedCgroups(Path pinDirectory) throws IOException {
        return Pins.attachedCgroups(pinDirectory);
    }

    /**
     * The sets of another sockmap4j version an agent retired in {@code pinDirectory} and has not
     * removed yet: each waits for its last connection to close (docs/operations.md, "Upgrades").
     */
    public static java.util.List<Path> retiredSets(Path pinDirectory) throws IOException {
        return RetiredSets.list(pinDirectory);
    }

    /**
     * The counters of a pin directory read from its pins, attaching nothing; null when nothing
     * is pinned there.
     */
    public static SockmapStats stats(Path pinDirectory) throws IOException {
        long[] c = Pins.readStats(libbpf(), pinDirectory);
        return c == null ? null : SockmapStats.of(c, c[c.length - 1]);
    }

    /**
     * Removes the pins of {@code pinDirectory} (maps, programs, cgroup attachments) even while
     * processes use them: their connections leave the fast path, and redirected bytes not yet
     * read may be lost. For operators cleaning up after crashed services; {@link Sockmap#close()}
     * is the normal way out.
     *
     * @return how many pins were removed
     */
    public static int removePins(Path pinDirectory) throws IOException {
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
    public record Service(java.net.InetSocketAddress vip, java.util.List<java.net.InetSocketAddress> local,
                          java.util.List<java.net.InetSocketAddress> remote, boolean localOnly) {
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
    public static void putService(Path pinDirectory, Service s) throws IOException {
        try (ServiceMap m = ServiceMap.open(libbpf(), pinDirectory)) {
            m.put(new ServiceMap.Service(s.vip(), s.local(), s.remote(), s.localOnly()));
        }
    }

    /**
     * Removes the Service of {@code vip}: new connects to it go through kube-proxy again.
     *
     * @return whether there was one
     */
    public static boolean removeService(Path pinDirectory, java.net.InetSocketAddress vip) throws IOException {
        try (ServiceMap m = ServiceMap.open(libbpf(), pinDirectory)) {
            return m.remove(vip);
        }
    }

    /** The Services in the pin directory's Service map. */
    public static java.util.List<Service> services(Path pinDirectory) throws IOException {
        try (ServiceMap m = ServiceMap.open(libbpf(), pinDirectory)) {
            return m.list().stream().map(x -> new Service(x.vip(), x.local(), x.remote(), x.localOnly())).toList();
        }
    }

    /**
     * Another program that puts sockets in a sockmap of its own on this node: which sockets of
     * opted-in ports it held (they stay on TCP under its sk_msg program; the most recent first, up
     * to 1,024), and which sock_ops programs besides sockmap4j's run for {@code cgroup} (on it, an
     * ancestor or a cgroup below it), as "id N 'NAME' on CGROUP".
     */
    public record Collisions(java.util.List<String> sockets, java.util.List<String> programs) {
    }

    /** What {@link Collisions} says for the pin directory and {@code cgroup}. */
    public static Collisions collisions(Path pinDirectory, Path cgroup) throws IOException {
        java.util.List<String> sockets = io.github.sockmap4j.linux.bpf.Collisions.busySockets(libbpf(), pinDirectory)
                .stream().map(Object::toString).toList();
        return new Collisions(sockets,
                io.github.sockmap4j.linux.bpf.Collisions.otherSockopsPrograms(libbpf(), pinDirectory, cgroup));
    }

    /**
     * How many sockets whose connect was translated to a Service's endpoint are open (the
     * kernel remembers each one's Service, for getpeername, until it closes; at most 65,536).
     */
    public static int translatedSockets(Path pinDirectory) throws IOException {
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
    public static void setLocalPeers(Path pinDirectory, java.util.Collection<Network> networks) throws IOException {
        java.util.Set<LocalPeersMap.Prefix> p = new java.util.HashSet<>();
        for (Network n : networks) {
            p.add(new LocalPeersMap.Prefix(n.address(), n.prefixBits()));
        }
        try (LocalPeersMap m = LocalPeersMap.open(libbpf(), pinDirectory)) {
            m.replace(p);
        }
    }

    /** Every address may be a local peer again, as when the pins were made. */
    public static void allLocalPeers(Path pinDirectory) throws IOException {
        setLocalPeers(pinDirectory, java.util.List.of(new Network(java.net.InetAddress.ofLiteral("::"), 0)));
    }

    /** The local peer prefixes of the pin directory. */
    public static java.util.List<Network> localPeers(Path pinDirectory) throws IOException {
        try (LocalPeersMap m = LocalPeersMap.open(libbpf(), pinDirectory)) {
            return m.list().stream().map(x -> new Network(x.address(), x.bits())).toList();
        }
    }

    private static Libbpf libbpf() throws IOException {
        return Libbpf.loadOrThrow();
    }
}
