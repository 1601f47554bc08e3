package io.github.sockmap4j.agent.kubernetes;

import io.fabric8.kubernetes.api.model.Pod;
import io.github.sockmap4j.admin.SockmapAdmin;
import io.github.sockmap4j.linux.bpf.MeshMap;
import io.github.sockmap4j.linux.sys.NetnsCookie;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The node agent's mesh mode (docs/mesh.md): each pod of this node that carries a mesh's sidecar
 * (Istio's {@code sidecar.istio.io/status} annotation, or the one configured) and asks for it by
 * its own annotation ({@code sockmap4j.io/mesh: accelerate}) is put in the kernel's meshed pods:
 * its applications' connects go straight to its proxy, other meshed pods' proxies' connects to it
 * straight to its proxy's inbound port, each proxy told the original destination. A pod is found
 * by its processes: a cgroup under the agent's cgroups named for the pod's uid (as the kubelet
 * names them), whose network namespace must hold the pod's addresses; until one runs, it is looked
 * for again each second. A pod that loses either annotation, or goes, is taken out; so is every
 * pod when the agent stops (their NAT rules carry their connects again), and at the first list
 * every pod a previous agent put that is not meshed now.
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
     * @param outboundPort      where the pod's NAT sends its outbound connects
     * @param inboundPort       where the pod's NAT sends connections to it
     * @param inboundSkip       the ports every pod's NAT leaves out of that (Istio's: the proxy's own)
     */
    public record Shape(String sidecarAnnotation, int proxyUid, int outboundPort, int inboundPort,
                        List<Integer> inboundSkip) {
        public static final Shape ISTIO = new Shape(ISTIO_SIDECAR, 1337, 15001, 15006,
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

    private final SockmapAdmin admin;
    private final List<Path> cgroups;
    private final Shape shape;
    private final PodRules pods;
    private final long hostNetns;
    /** Pods put, by "namespace/name": the namespace cookie they were put under. */
    private final Map<String, SockmapAdmin.MeshedPod> put = new HashMap<>();
    /** Meshed pods whose processes were not found yet. */
    private final Map<String, Pod> waiting = new HashMap<>();
    private final ScheduledExecutorService retry = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "sockmap4j-mesh-pods");
        t.setDaemon(true);
        return t;
    });
    /** Pods refused for an annotation, each said once. */
    private final Set<String> refused = new java.util.HashSet<>();
    private boolean closed;

    private MeshPods(PodRules pods, Path pinDir, List<Path> cgroups, Shape shape) throws IOException {
        this.admin = SockmapAdmin.of(pinDir);
        this.cgroups = List.copyOf(cgroups);
        this.shape = shape;
        this.pods = pods;
        this.hostNetns = NetnsCookie.here();
        admin.meshedPods(); // the pins have the maps (an older agent's do not): fail here, with their name
    }

    /** Starts following the pods {@code pods} lists; the caller closes it before {@code pods}. */
    public static MeshPods start(PodRules pods, Path pinDir, List<Path> cgroups, Shape shape) throws IOException {
        MeshPods m = new MeshPods(pods, pinDir, cgroups, shape);
        pods.onChange(m::changed);
        pods.listedPods().forEach(m::changed); // those the informer had before this listened
        pods.synced().thenRun(m::dropStale);
        m.retry.scheduleWithFixedDelay(m::lookAgain, 1, 1, TimeUnit.SECONDS);
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

    /** Whether pod {@code p} is to be meshed: this node's, listed, with a sidecar (the shape's or Linkerd's), asking for it. */
    boolean wants(Pod p) {
        Map<String, String> ann = p.getMetadata().getAnnotations();
        return pods.isListed(p) && !PodRules.podIps(p).isEmpty() && ann != null
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

    private synchronized void changed(Pod p) {
        if (closed) {
            return;
        }
        String key = key(p);
        if (!wants(p)) {
            waiting.remove(key);
            take(key, "it no longer asks for it, lost its sidecar or is gone");
            return;
        }
        PodNat nat;
        try {
            nat = podNat(p, shape);
        } catch (IllegalArgumentException e) {
            waiting.remove(key);
            if (refused.add(key + " " + e.getMessage())) {
                LOG.warn("Pod {} asks to be meshed, but its NAT is not one the kernel's capture follows ({}): its NAT "
                        + "carries it, by TCP", key, e.getMessage());
            }
            take(key, "its NAT is not one the kernel follows (" + e.getMessage() + ")");
            return;
        }
        SockmapAdmin.MeshedPod now = find(p, nat);
        if (now == null) {
            if (waiting.put(key, p) == null) {
                LOG.info("Meshed pod {}: no process of it yet in a cgroup named for its uid {} under {} whose network "
                        + "namespace has its addresses {}; looking again each second", key, p.getMetadata().getUid(),
                        cgroups, PodRules.podIps(p));
            }
            return;
        }
        waiting.remove(key);
        SockmapAdmin.MeshedPod before = put.get(key);
        if (now.equals(before)) {
            return;
        }
        try {
            if (before != null && before.netns() != now.netns()) {
                admin.removeMeshedPod(before.netns());
            }
            admin.putMeshedPod(now);
            put.put(key, now);
            LOG.info("Meshed pod {}: its applications' connects go to its proxy (uid {}, port {}), other meshed pods' "
                    + "proxies' to port {} of {}; left to its NAT: connects to ports {}, to its ports {}", key,
                    now.proxyUid(), now.outboundPort(), now.inboundPort(),
                    now.addresses().stream().map(InetAddress::getHostAddress).toList(), now.outboundSkip(),
                    now.inboundSkip());
        } catch (IOException | RuntimeException e) {
            LOG.warn("Meshed pod {} could not be put ({}); its NAT rules carry it", key, e.getMessage());
        }
    }

    private void take(String key, String why) {
        SockmapAdmin.MeshedPod was = put.remove(key);
        if (was == null) {
            return;
        }
        try {
            admin.removeMeshedPod(was.netns());
            LOG.info("Pod {} is no longer meshed ({}): its NAT rules carry its connects", key, why);
        } catch (IOException | RuntimeException e) {
            LOG.warn("Pod {} could not be taken out of the meshed pods: {}", key, e.getMessage());
        }
    }

    private synchronized void lookAgain() {
        for (Pod p : List.copyOf(waiting.values())) {
            changed(p);
        }
    }

    /** Drops what a previous agent put that no pod listed now is meshed under. */
    private synchronized void dropStale() {
        try {
            Set<Long> mine = new java.util.HashSet<>();
            put.values().forEach(m -> mine.add(m.netns()));
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
        return new PodNat(shape.proxyUid(), shape.outboundPort(), shape.inboundPort(), ports.outbound(),
                ports.inbound());
    }

    /**
     * The pod as meshed, as {@code nat} says: its network namespace through
     * its processes, a cgroup named for its uid under the agent's cgroups, a process there whose
     * namespace holds every address of the pod (and is not the host's). Null while none runs.
     */
    private SockmapAdmin.MeshedPod find(Pod p, PodNat nat) {
        String uid = p.getMetadata().getUid();
        Set<InetAddress> ips = new LinkedHashSet<>(PodRules.podIps(p));
        if (uid == null || uid.isBlank()) {
            return null;
        }
        for (long pid : processesOf(uid)) {
            try {
                long netns = NetnsCookie.inNamespaceOf(pid, () -> holdsAll(ips) ? NetnsCookie.here() : 0L);
                if (netns != 0 && netns != hostNetns) {
                    return new SockmapAdmin.MeshedPod(netns, nat.proxyUid(), nat.outboundPort(),
                            nat.inboundPort(), new ArrayList<>(ips), nat.outboundSkip(), nat.inboundSkip());
                }
            } catch (IOException e) {
                LOG.debug("Pod {}: pid {} gave no namespace: {}", key(p), pid, e.getMessage());
            }
        }
        return null;
    }

    /** Whether this thread's network namespace has every one of {@code ips} (a socket binds to each). */
    private static boolean holdsAll(Set<InetAddress> ips) throws IOException {
        for (InetAddress ip : ips) {
            try (ServerSocketChannel ch = ServerSocketChannel.open()) {
                ch.bind(new InetSocketAddress(ip, 0));
            } catch (java.net.BindException e) {
                return false;
            }
        }
        return true;
    }

    /** The pids in cgroups under the agent's whose name holds pod uid {@code uid} (kubelet: dashes or underscores). */
    private List<Long> processesOf(String uid) {
        String dashed = "pod" + uid;
        String underscored = "pod" + uid.replace('-', '_');
        List<Long> pids = new ArrayList<>();
        for (Path root : cgroups) {
            try (Stream<Path> dirs = Files.walk(root, 6)) {
                dirs.filter(Files::isDirectory).filter(d -> {
                    String n = d.getFileName().toString();
                    return n.contains(dashed) || n.contains(underscored);
                }).forEach(d -> collect(d, pids));
            } catch (IOException | java.io.UncheckedIOException e) {
                LOG.debug("Walking {} for pod {}: {}", root, uid, e.getMessage());
            }
        }
        return pids;
    }

    private static void collect(Path cgroup, List<Long> pids) {
        try (Stream<Path> dirs = Files.walk(cgroup, 4)) {
            dirs.filter(Files::isDirectory).forEach(d -> {
                try {
                    for (String line : Files.readAllLines(d.resolve("cgroup.procs"))) {
                        if (!line.isBlank() && pids.size() < 16) {
                            pids.add(Long.parseLong(line.strip()));
                        }
                    }
                } catch (IOException | NumberFormatException ignored) {
                    // A cgroup gone meanwhile, or not one.
                }
            });
        } catch (IOException | java.io.UncheckedIOException ignored) {
            // Gone meanwhile.
        }
    }

    private static String key(Pod p) {
        return p.getMetadata().getNamespace() + "/" + p.getMetadata().getName();
    }

    /** The pods put now, for the tests: "namespace/name" to the namespace cookie. */
    public synchronized Map<String, Long> meshed() {
        Map<String, Long> out = new HashMap<>();
        put.forEach((k, v) -> out.put(k, v.netns()));
        return out;
    }

    /** Takes every pod it put out: their NAT rules carry their connects again. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        retry.shutdownNow();
        for (String key : List.copyOf(put.keySet())) {
            take(key, "the agent stops");
        }
    }
}
