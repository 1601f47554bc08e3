package io.github.sockmap4j.agent.kubernetes;

import io.fabric8.kubernetes.api.model.Pod;
import io.github.sockmap4j.admin.SockmapAdmin;
import io.github.sockmap4j.linux.bpf.MeshMap;
import io.github.sockmap4j.linux.sys.NetNamespace;
import java.io.IOException;
import java.net.InetAddress;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The node agent's mesh mode (docs/mesh.md): each pod of this node that carries a mesh's sidecar
 * (Istio's {@code sidecar.istio.io/status} annotation, or the one configured) and asks for it by
 * its own annotation ({@code sockmap4j.io/mesh: accelerate}) is put in the kernel's meshed pods:
 * its applications' connects go straight to its proxy, other meshed pods' proxies' connects to it
 * straight to its proxy's inbound port, each proxy told the original destination. A pod is found
 * by its processes: those in its cgroup where the kubelet puts it under the agent's cgroups
 * ({@link PodCgroups}), in the one network namespace they agree on that its runtime made and that
 * holds the pod's addresses ({@link PodNetns}); until then it waits, looked for at each tick (a
 * second), all waiting pods by one look at the cgroups, outside the lock that pod events take. A
 * pod of another node, a finished one (Succeeded, Failed), one that loses either annotation, or goes,
 * is taken out; so is every pod when the agent stops (their NAT rules carry their connects again),
 * and at the first list every pod a previous agent put that is not meshed now.
 *
 * <p>The capture follows the NAT the pod got: as its Istio or Linkerd init container's arguments
 * say ({@link PodNat}), or, for a pod without one, the agent's {@link Shape} and the pod's Istio
 * exclude annotations; a pod whose NAT captures otherwise is left to it. Either way a pod's own spec
 * decides only its own entry: where its own connects go, and where other proxies' connects to it
 * go, inside its own namespace, as its NAT already does.
 *
 * <p><b>Note:</b> threadsafe: its state is guarded by this object.
 */
public final class MeshPods implements AutoCloseable {
    /** The pod's own opt-in: {@code accelerate}. */
    public static final String ANNOTATION = "sockmap4j.io/mesh";
    public static final String ACCELERATE = "accelerate";
    /** Istio's sidecar injector marks each pod it injected with this annotation. */
    public static final String ISTIO_SIDECAR = "sidecar.istio.io/status";
    /**
     * Linkerd's proxy injector marks each pod it injected with this annotation; such a pod is
     * meshed only as its {@code linkerd-init} container's arguments say ({@link PodNat}).
     */
    public static final String LINKERD_SIDECAR = "linkerd.io/proxy-version";
    private static final Logger LOG = LoggerFactory.getLogger(MeshPods.class);

    /**
     * What a meshed pod's sidecar looks like: Istio's by default.
     *
     * @param sidecarAnnotation the annotation a pod with the sidecar carries
     * @param proxyUid          the proxy's uid, which the pod's NAT leaves alone
     * @param proxyGid          the proxy's gid, which the pod's NAT leaves alone too (-1: none)
     * @param outboundPort      where the pod's NAT sends its outbound connects
     * @param inboundPort       where the pod's NAT sends connections to it
     * @param inboundSkip       the ports every pod's NAT leaves out of that (Istio's: the proxy's own)
     */
    public record Shape(String sidecarAnnotation, int proxyUid, int proxyGid, int outboundPort, int inboundPort,
                        List<Integer> inboundSkip) {
        public static final Shape ISTIO = new Shape(ISTIO_SIDECAR, 1337, 1337, 15001, 15006,
                SockmapAdmin.MeshedPod.ISTIO_INBOUND_SKIP);

        public Shape {
            inboundSkip = List.copyOf(inboundSkip);
        }
    }

    /** Istio's annotation of the destination ports a pod's NAT leaves out of the outbound redirect. */
    public static final String EXCLUDE_OUTBOUND_PORTS = "traffic.sidecar.istio.io/excludeOutboundPorts";
    /** Istio's annotation of the ports a pod's NAT leaves out of the inbound redirect. */
    public static final String EXCLUDE_INBOUND_PORTS = "traffic.sidecar.istio.io/excludeInboundPorts";

    /**
     * The ports a meshed pod's NAT leaves out of each redirect, as the kernel's capture follows them.
     *
     * @param outbound destination ports of its applications' connects
     * @param inbound  its ports, to which other proxies' connects are not sent to its inbound port
     */
    record NatPorts(List<Integer> outbound, List<Integer> inbound) {
    }

    /**
     * The ports pod {@code p}'s NAT leaves out of each redirect: its exclude annotations, and
     * {@code shape}'s inbound ones first.
     *
     * @throws IllegalArgumentException naming the annotation, where one is not a list of ports or
     *                                  the kernel's entry cannot hold them (the pod is then left to its NAT)
     */
    static NatPorts natPorts(Pod p, Shape shape) {
        Map<String, String> ann = p.getMetadata().getAnnotations();
        List<Integer> in = new ArrayList<>(shape.inboundSkip());
        ports(ann, EXCLUDE_INBOUND_PORTS).stream().filter(x -> !in.contains(x)).forEach(in::add);
        try {
            return new NatPorts(MeshMap.checkSkip(ports(ann, EXCLUDE_OUTBOUND_PORTS), "outbound", -1),
                    MeshMap.checkSkip(in, "inbound", shape.inboundPort()));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(EXCLUDE_OUTBOUND_PORTS + "=" + ann.get(EXCLUDE_OUTBOUND_PORTS) + ", "
                    + EXCLUDE_INBOUND_PORTS + "=" + ann.get(EXCLUDE_INBOUND_PORTS) + ": " + e.getMessage(), e);
        }
    }

    /** The ports of annotation {@code name} (a comma-separated list, as Istio takes it); none when absent or blank. */
    private static List<Integer> ports(Map<String, String> ann, String name) {
        String v = ann == null ? null : ann.get(name);
        if (v == null || v.isBlank()) {
            return List.of();
        }
        List<Integer> ports = new ArrayList<>();
        for (String part : v.split(",")) {
            if (part.isBlank()) {
                continue;
            }
            try {
                ports.add(Integer.parseInt(part.strip()));
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException(name + "=" + v + " is not a list of ports");
            }
        }
        return ports;
    }

    /** How often waiting pods are looked for. */
    static final long TICK_MILLIS = 1000;
    /**
     * The longest wait between looks at a pod whose cgroup is there but whose namespace was not
     * found (its sandbox starting, or its processes disagreeing): from a tick, doubling.
     */
    static final long MAX_BACKOFF_MILLIS = 8000;

    private final SockmapAdmin admin;
    private final List<Path> cgroups;
    private final Shape shape;
    private final PodRules pods;
    /** The agent's own network and user namespaces' identities: the node's. */
    private final String nodeNetns;
    private final String nodeUserns;
    /** Pods put, by "namespace/name". */
    private final Map<String, Put> put = new HashMap<>();
    /** Meshed pods whose namespace was not found yet, by "namespace/name". */
    private final Map<String, Waiting> waiting = new HashMap<>();
    private final ScheduledExecutorService finder = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "sockmap4j-mesh-pods");
        t.setDaemon(true);
        return t;
    });
    /** Whether a look is queued on the finder already (a new waiting pod asks for one). */
    private final AtomicBoolean lookQueued = new AtomicBoolean();
    /** What was last said of each pod waiting or refused, by "namespace/name": each line said once. */
    private final Map<String, String> said = new HashMap<>();
    private boolean closed;

    /** A pod put in the kernel: the entry, and what it was put from. */
    private record Put(SockmapAdmin.MeshedPod entry, String uid, Set<InetAddress> addresses, PodNat nat) {
    }

    /** A pod waiting for its namespace, as its last event gave it (a newer event replaces it). */
    private static final class Waiting {
        final Pod pod;
        final PodNat nat;
        long nextLookMillis;
        long backoffMillis = TICK_MILLIS;

        Waiting(Pod pod, PodNat nat) {
            this.pod = pod;
            this.nat = nat;
        }
    }

    private MeshPods(PodRules pods, Path pinDir, List<Path> cgroups, Shape shape) throws IOException {
        this.admin = SockmapAdmin.of(pinDir);
        this.cgroups = List.copyOf(cgroups);
        this.shape = shape;
        this.pods = pods;
        this.nodeNetns = NetNamespace.ownId();
        this.nodeUserns = NetNamespace.ownUserNamespace();
        admin.meshedPods(); // the pins have the maps (an older agent's do not): fail here, with their name
    }

    /** Starts following the pods {@code pods} lists; the caller closes it before {@code pods}. */
    public static MeshPods start(PodRules pods, Path pinDir, List<Path> cgroups, Shape shape) throws IOException {
        MeshPods m = new MeshPods(pods, pinDir, cgroups, shape);
        pods.onChange(m::changed);
        pods.listedPods().forEach(m::changed); // those the informer had before this listened
        pods.synced().thenRun(m::dropStale);
        m.finder.scheduleWithFixedDelay(m::look, TICK_MILLIS, TICK_MILLIS, TimeUnit.MILLISECONDS);
        return m;
    }

    /**
     * Istio's annotations that make a pod's NAT leave some connects alone, or catch them another way,
     * that the kernel's capture does not follow (it follows the exclude-ports ones, {@link #natPorts}):
     * a pod carrying one is not meshed (its NAT carries it, as without sockmap4j) rather than have
     * connects its NAT excludes sent to its proxy.
     */
    static final List<String> NAT_CHANGING = List.of("traffic.sidecar.istio.io/excludeOutboundIPRanges",
            "traffic.sidecar.istio.io/includeOutboundPorts", "traffic.sidecar.istio.io/includeInboundPorts",
            "traffic.sidecar.istio.io/kubevirtInterfaces", "sidecar.istio.io/interceptionMode");

    /**
     * Whether pod {@code p} is to be meshed: listed, of this node, not finished, with addresses and
     * a sidecar (the shape's or Linkerd's), asking for it.
     */
    boolean wants(Pod p) {
        Map<String, String> ann = p.getMetadata().getAnnotations();
        String phase = p.getStatus() == null ? null : p.getStatus().getPhase();
        return pods.isListed(p) && pods.isOfThisNode(p) && !"Succeeded".equals(phase) && !"Failed".equals(phase)
                && !PodRules.podIps(p).isEmpty() && ann != null
                && (ann.containsKey(shape.sidecarAnnotation()) || ann.containsKey(LINKERD_SIDECAR))
                && ACCELERATE.equals(Optional.ofNullable(ann.get(ANNOTATION)).map(String::trim).orElse(null));
    }

    /** Why pod {@code p}'s NAT is not the one the kernel mirrors, or null when it is (Istio's defaults). */
    static String unlikeItsNat(Pod p) {
        Map<String, String> ann = p.getMetadata().getAnnotations();
        for (String a : NAT_CHANGING) {
            String v = ann.get(a);
            if (v == null) {
                continue;
            }
            boolean asDefault = switch (a) {
                case "sidecar.istio.io/interceptionMode" -> v.trim().equals("REDIRECT");
                case "traffic.sidecar.istio.io/includeInboundPorts" -> v.trim().equals("*");
                default -> v.isBlank();
            };
            if (!asDefault) {
                return a + "=" + v;
            }
        }
        String include = ann.get("traffic.sidecar.istio.io/includeOutboundIPRanges");
        return include == null || include.trim().equals("*") ? null
                : "traffic.sidecar.istio.io/includeOutboundIPRanges=" + include;
    }

    /**
     * A pod event, on the informer's thread: what the pod asks for now. Quick: it reads no file and
     * enters no namespace (the finder does, outside this lock); taking a pod out is one map update.
     */
    private synchronized void changed(Pod p) {
        if (closed) {
            return;
        }
        String key = key(p);
        if (!wants(p)) {
            waiting.remove(key);
            said.remove(key);
            take(key, "it no longer asks for it, lost its sidecar, finished, is not of this node or is gone");
            return;
        }
        PodNat nat;
        try {
            nat = podNat(p, shape);
        } catch (IllegalArgumentException e) {
            waiting.remove(key);
            sayOnce(key, "Pod " + key + " asks to be meshed, but its NAT is not one the kernel's capture follows ("
                    + e.getMessage() + "): its NAT carries it, by TCP", true);
            take(key, "its NAT is not one the kernel follows (" + e.getMessage() + ")");
            return;
        }
        Put was = put.get(key);
        if (was != null && was.uid().equals(p.getMetadata().getUid()) && was.addresses().equals(PodRules.podIps(p))
                && was.nat().equals(nat)) {
            return; // as put
        }
        take(key, "it changed (its uid, addresses or NAT); looked for again");
        Waiting before = waiting.get(key);
        if (before == null) {
            LOG.info("Meshed pod {}: waiting for its processes (uid {}, in its cgroup under {}) in a network "
                    + "namespace of its own with its addresses {}", key, p.getMetadata().getUid(), cgroups,
                    PodRules.podIps(p));
        }
        waiting.put(key, new Waiting(p, nat));
        lookSoon();
    }

    /** Queues a look on the finder, unless one is queued. */
    private void lookSoon() {
        if (lookQueued.compareAndSet(false, true)) {
            try {
                finder.execute(this::look);
            } catch (java.util.concurrent.RejectedExecutionException closing) {
                lookQueued.set(false);
            }
        }
    }

    private void take(String key, String why) {
        Put was = put.remove(key);
        if (was == null) {
            return;
        }
        try {
            admin.removeMeshedPod(was.entry().netns());
            LOG.info("Pod {} is no longer meshed ({}): its NAT rules carry its connects", key, why);
        } catch (IOException | RuntimeException e) {
            LOG.warn("Pod {} could not be taken out of the meshed pods: {}", key, e.getMessage());
        }
    }

    /**
     * One look, on the finder's thread, for every waiting pod that is due: one look at the
     * cgroups for all of them, then each found pod's namespace, none of it under the lock.
     */
    private void look() {
        lookQueued.set(false);
        List<Waiting> due = new ArrayList<>();
        long now = System.currentTimeMillis();
        synchronized (this) {
            if (closed) {
                return;
            }
            for (Waiting w : waiting.values()) {
                if (w.nextLookMillis <= now) {
                    due.add(w);
                }
            }
        }
        if (due.isEmpty()) {
            return;
        }
        Map<String, List<PodCgroups.PodDir>> layout = PodCgroups.look(cgroups);
        for (Waiting w : due) {
            Pod p = w.pod;
            List<Path> dirs = PodCgroups.of(layout, p.getMetadata().getUid(),
                    p.getStatus() == null ? null : p.getStatus().getQosClass());
            if (dirs.isEmpty()) {
                continue; // not started on this node yet (or never: a pod elsewhere, a finished Job's)
            }
            boolean hostUsers = p.getSpec() == null || !Boolean.FALSE.equals(p.getSpec().getHostUsers());
            PodNetns.Result r = PodNetns.find(PodCgroups.processes(dirs), PodRules.podIps(p), hostUsers, nodeNetns,
                    nodeUserns);
            found(w, r, now);
        }
    }

    /** What a look found for {@code w}: put, or said and looked for again later; nothing if an event came since. */
    private synchronized void found(Waiting w, PodNetns.Result r, long now) {
        String key = key(w.pod);
        if (closed || waiting.get(key) != w) {
            return;
        }
        if (!(r instanceof PodNetns.Found f)) {
            w.nextLookMillis = now + w.backoffMillis;
            w.backoffMillis = Math.min(MAX_BACKOFF_MILLIS, w.backoffMillis * 2);
            sayOnce(key, r instanceof PodNetns.CannotTell
                    ? "Meshed pod " + key + " is left to its NAT while the agent cannot tell its network namespace: "
                            + r.why()
                    : "Meshed pod " + key + ": not found yet (" + r.why() + "); looking again",
                    r instanceof PodNetns.CannotTell);
            return;
        }
        waiting.remove(key);
        PodNat nat = w.nat;
        Set<InetAddress> ips = PodRules.podIps(w.pod);
        SockmapAdmin.MeshedPod entry = new SockmapAdmin.MeshedPod(f.cookie(), nat.proxyUid(), nat.proxyGid(),
                nat.outboundPort(),
                nat.inboundPort(), new ArrayList<>(ips), nat.outboundSkip(), nat.inboundSkip());
        try {
            admin.putMeshedPod(entry);
            put.put(key, new Put(entry, w.pod.getMetadata().getUid(), ips, nat));
            said.remove(key);
            LOG.info("Meshed pod {} (network namespace {}): its applications' connects go to its proxy (uid {}, gid {}, port {}), "
                    + "other meshed pods' proxies' to port {} of {}; left to its NAT: connects to ports {}, to its ports {}",
                    key, f.id(), entry.proxyUid(), entry.proxyGid() < 0 ? "none" : entry.proxyGid(), entry.outboundPort(),
                    entry.inboundPort(),
                    entry.addresses().stream().map(InetAddress::getHostAddress).toList(), entry.outboundSkip(),
                    entry.inboundSkip());
        } catch (IOException | RuntimeException e) {
            LOG.warn("Meshed pod {} could not be put ({}); its NAT rules carry it", key, e.getMessage());
        }
    }

    /** Logs {@code line} about pod {@code key} unless it was the last said of it (until the pod is put or goes). */
    private void sayOnce(String key, String line, boolean warn) {
        if (line.equals(said.put(key, line))) {
            return;
        }
        if (warn) {
            LOG.warn(line);
        } else {
            LOG.info(line);
        }
    }

    /** Drops what a previous agent put that no pod listed now is meshed under. */
    private synchronized void dropStale() {
        try {
            Set<Long> mine = new HashSet<>();
            put.values().forEach(m -> mine.add(m.entry().netns()));
            for (SockmapAdmin.MeshedPod m : admin.meshedPods()) {
                if (!mine.contains(m.netns())) {
                    admin.removeMeshedPod(m.netns());
                    LOG.info("Took out a meshed pod no listed pod is (namespace {}, {})", Long.toUnsignedString(m.netns()),
                            m.addresses());
                }
            }
        } catch (IOException | RuntimeException e) {
            LOG.warn("The meshed pods of an earlier agent could not be checked: {}", e.getMessage());
        }
    }

    /**
     * Pod {@code p}'s NAT, as the kernel's capture is to follow it: as its Istio or Linkerd init
     * container's arguments say ({@link PodNat#ofInitContainer}), or, where it has none, {@code
     * shape} with the ports of the pod's Istio exclude annotations ({@link #natPorts}); a Linkerd
     * pod without its init container is refused.
     *
     * @throws IllegalArgumentException saying what the capture does not follow (the pod is then left to its NAT)
     */
    static PodNat podNat(Pod p, Shape shape) {
        Optional<PodNat> written = PodNat.ofInitContainer(p);
        if (written.isPresent()) {
            return written.get();
        }
        Map<String, String> ann = p.getMetadata().getAnnotations();
        if (ann != null && ann.containsKey(LINKERD_SIDECAR)) {
            throw new IllegalArgumentException("a Linkerd pod without its " + PodNat.LINKERD_INIT + " container (Linkerd's "
                    + "CNI plugin writes its NAT, from settings the agent does not read)");
        }
        String unlike = unlikeItsNat(p);
        if (unlike != null) {
            throw new IllegalArgumentException("its annotation " + unlike + " changes what its NAT sends to its proxy");
        }
        NatPorts ports = natPorts(p, shape);
        return new PodNat(shape.proxyUid(), shape.proxyGid(), shape.outboundPort(), shape.inboundPort(), ports.outbound(),
                ports.inbound());
    }

    private static String key(Pod p) {
        return p.getMetadata().getNamespace() + "/" + p.getMetadata().getName();
    }

    /** The pods put now, for the tests: "namespace/name" to the namespace cookie. */
    public synchronized Map<String, Long> meshed() {
        Map<String, Long> out = new HashMap<>();
        put.forEach((k, v) -> out.put(k, v.entry().netns()));
        return out;
    }

    /** How many meshed pods wait for their namespace. */
    public synchronized int waiting() {
        return waiting.size();
    }

    /** Takes every pod it put out: their NAT rules carry their connects again. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        finder.shutdownNow();
        for (String key : List.copyOf(put.keySet())) {
            take(key, "the agent stops");
        }
    }
}
