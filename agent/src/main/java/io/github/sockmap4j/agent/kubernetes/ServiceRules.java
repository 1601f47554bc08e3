package io.github.sockmap4j.agent.kubernetes;

import io.github.sockmap4j.admin.Rule;
import io.fabric8.kubernetes.api.model.Service;
import io.fabric8.kubernetes.api.model.ServicePort;
import io.fabric8.kubernetes.api.model.discovery.v1.Endpoint;
import io.fabric8.kubernetes.api.model.discovery.v1.EndpointPort;
import io.fabric8.kubernetes.api.model.discovery.v1.EndpointSlice;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.informers.ResourceEventHandler;
import io.fabric8.kubernetes.client.informers.SharedIndexInformer;
import io.github.sockmap4j.agent.NodeAgent;
import io.github.sockmap4j.agent.Owner;
import io.github.sockmap4j.admin.SockmapAdmin;
import java.io.IOException;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Kubernetes Services on the fast path (docs/services.md): a Service annotated
 * {@code sockmap4j.io/ports: "6334"} (its ports, by number or name) gets, for each of those TCP
 * ports and each of its ClusterIPs, an entry in the Service map with its ready endpoints, this
 * node's first, so that a connect to the VIP goes straight to a local endpoint; and a rule for
 * each local endpoint's target port, held by {@code svc:NAMESPACE/NAME}, so both ends register.
 * A Service port is opted in too, without the Service's annotation, when one of its ready local
 * endpoints is a pod whose own annotation ({@link PodRules}) lists the endpoint's port.
 * Services and EndpointSlices are watched with informers; an entry changes as they change and
 * goes with the Service, its annotation or its last local endpoint (new connects then take
 * kube-proxy's path; open ones are untouched).
 *
 * <p>With this on, the agent owns the Service map: an entry that no Service of the API server
 * accounts for is removed once both first lists are in (an entry an operator added with
 * {@code sockmap4j service add}, or one of a Service deleted while no agent ran).
 *
 * <p><b>Note:</b> this class is threadsafe: the two informers call back on their own threads,
 * and every change goes through one lock.
 */
public final class ServiceRules extends Reconciler {
    public static final String PORTS_ANNOTATION = PortsAnnotation.NAME;
    /** {@code "true"}: every connection to a local endpoint, whatever the Service's own policy says. */
    static final String PREFER_LOCAL_ANNOTATION = "sockmap4j.io/prefer-local";
    public static final String SERVICE_NAME_LABEL = "kubernetes.io/service-name";
    private static final Logger LOG = LoggerFactory.getLogger(ServiceRules.class);

    private final String nodeName;
    private final SharedIndexInformer<Service> services;
    private final SharedIndexInformer<EndpointSlice> slices;
    private final PodPorts pods;
    private final Object lock = new Object();
    /** The map entries each Service ({@code NAMESPACE/NAME}) has put, by VIP and port. */
    private final Map<String, Map<InetSocketAddress, SockmapAdmin.Service>> applied = new HashMap<>();
    /** The rules each Service holds now. */
    private final Map<String, List<Rule>> heldRules = new HashMap<>();

    /** Which pods of this node opt a port in by their own annotation. */
    @FunctionalInterface
    interface PodPorts {
        PodPorts NONE = (namespace, pod, port) -> false;

        boolean optsIn(String namespace, String pod, int port);
    }

    private ServiceRules(NodeAgent agent, KubernetesClient client, String nodeName, PodRules podRules) {
        super(agent, Owner.Kind.SERVICE);
        this.nodeName = nodeName;
        this.pods = podRules == null ? PodPorts.NONE : podRules::optsIn;
        agent.refuseServiceRequests("this agent takes the Service map from the Kubernetes API (--kubernetes): "
                + "annotate the Service (" + PORTS_ANNOTATION + ") or its pods instead");
        // Made, given their handlers, then started: a handler may run as soon as its informer starts, and
        // it reads both informers' stores.
        this.services = client.services().inAnyNamespace().runnableInformer(0);
        this.slices = client.discovery().v1().endpointSlices().inAnyNamespace().runnableInformer(0);
        services.addEventHandler(new Handler<>(ServiceRules::keyOf));
        slices.addEventHandler(new Handler<>(ServiceRules::serviceKeyOf));
        if (podRules != null) {
            // Before the informers start: a pod changed before this is in the pods' store when a
            // Service is first applied; one changed after is told here.
            podRules.onChange(this::podChanged);
        }
        whenListed(services.start().thenCombine(slices.start(), (a, b) -> null), "Services and EndpointSlices");
    }

    /**
     * Watches with {@code client}; writes the agent's Service map through the agent
     * ({@link NodeAgent#putService}, as root) and holds rules in {@code agent}.
     */
    public static ServiceRules start(NodeAgent agent, KubernetesClient client, String nodeName) {
        return new ServiceRules(agent, client, nodeName, null);
    }

    /**
     * As {@link #start(NodeAgent, KubernetesClient, String)}, also opting in the Service
     * ports whose local endpoints' pods ask for it by their annotation, as {@code pods} sees them.
     */
    public static ServiceRules start(NodeAgent agent, KubernetesClient client, String nodeName, PodRules pods) {
        return new ServiceRules(agent, client, nodeName, pods);
    }

    /** A pod changed: the Services whose EndpointSlices name it as an endpoint. */
    private void podChanged(io.fabric8.kubernetes.api.model.Pod pod) {
        String ns = pod.getMetadata().getNamespace();
        String name = pod.getMetadata().getName();
        Set<String> keys = new HashSet<>();
        for (EndpointSlice s : slices.getIndexer().byIndex(io.fabric8.kubernetes.client.informers.cache.Cache.NAMESPACE_INDEX, ns)) {
            if (s.getEndpoints() != null && s.getEndpoints().stream().anyMatch(e -> isPod(e, ns, name, ns))) {
                keys.add(serviceKeyOf(s));
            }
        }
        keys.forEach(this::update);
    }

    /** Whether endpoint {@code e} of a slice in {@code sliceNs} is pod {@code ns/name}. */
    private static boolean isPod(Endpoint e, String ns, String name, String sliceNs) {
        var ref = e.getTargetRef();
        return ref != null && "Pod".equals(ref.getKind()) && name.equals(ref.getName())
                && ns.equals(ref.getNamespace() == null ? sliceNs : ref.getNamespace());
    }

    private static String keyOf(Service s) {
        return s.getMetadata().getNamespace() + "/" + s.getMetadata().getName();
    }

    /** The Service an EndpointSlice belongs to, or null for one without the label. */
    private static String serviceKeyOf(EndpointSlice s) {
        Map<String, String> labels = s.getMetadata().getLabels();
        String name = labels == null ? null : labels.get(SERVICE_NAME_LABEL);
        return name == null ? null : s.getMetadata().getNamespace() + "/" + name;
    }

    /** Puts the map and the rules in line with the Service {@code key} as the informers hold it now. */
    private void update(String key) {
        if (key == null) {
            return;
        }
        synchronized (lock) {
            Service svc = services.getStore().getByKey(key);
            List<EndpointSlice> mine = new ArrayList<>();
            for (EndpointSlice s : slices.getStore().list()) {
                if (key.equals(serviceKeyOf(s))) {
                    mine.add(s);
                }
            }
            Entries want = svc == null ? Entries.NONE : entriesOf(svc, mine, nodeName, pods);
            // The endpoints' ports are opted in before a connect can be sent to them, and released
            // only once no entry sends connects there: rules held then, and those left let go after.
            List<Rule> before = heldRules.getOrDefault(key, List.of());
            Set<Rule> during = new LinkedHashSet<>(before);
            during.addAll(want.rules());
            agent.hold(Owner.service(key), List.copyOf(during));
            Map<InetSocketAddress, SockmapAdmin.Service> had = applied.getOrDefault(key, Map.of());
            Map<InetSocketAddress, SockmapAdmin.Service> now = new HashMap<>();
            for (SockmapAdmin.Service s : want.services()) {
                now.put(s.vip(), s);
            }
            try {
                for (SockmapAdmin.Service s : want.services()) {
                    if (!s.equals(had.get(s.vip()))) {
                        agent.putService(s);
                        LOG.info("Service {} {}: {} local, {} other endpoints{}", key, s.vip(), s.local().size(),
                                s.remote().size(), s.localOnly() ? " (local only)" : "");
                    }
                }
                for (InetSocketAddress vip : had.keySet()) {
                    if (!now.containsKey(vip)) {
                        agent.removeService(vip);
                        LOG.info("Service {} {}: removed, new connects go through kube-proxy", key, vip);
                    }
                }
            } catch (IOException | RuntimeException e) {
                LOG.warn("Service {}: the Service map could not be updated ({}); its connects go through kube-proxy",
                        key, e.getMessage());
            }
            if (now.isEmpty()) {
                applied.remove(key);
            } else {
                applied.put(key, now);
            }
            agent.hold(Owner.service(key), want.rules());
            if (want.rules().isEmpty()) {
                heldRules.remove(key);
            } else {
                heldRules.put(key, want.rules());
            }
        }
    }

    /**
     * Once both informers have listed: every listed Service applied (their handlers may not have
     * run yet), then map entries nothing accounts for go.
     */
    @Override
    protected void listed() {
        synchronized (lock) {
            for (Service s : services.getStore().list()) {
                update(keyOf(s));
            }
            Set<InetSocketAddress> wanted = new HashSet<>();
            applied.values().forEach(m -> wanted.addAll(m.keySet()));
            try {
                for (InetSocketAddress vip : agent.serviceVips()) {
                    if (!wanted.contains(vip)) {
                        agent.removeService(vip);
                        LOG.info("Service map entry {} removed: no annotated Service of the API server has it", vip);
                    }
                }
            } catch (IOException e) {
                LOG.warn("The Service map could not be read ({}); entries nothing accounts for stay", e.getMessage());
            }
            LOG.info("Services and EndpointSlices listed: {} annotated Service(s) with a local endpoint in the Service map",
                    applied.size());
        }
    }

    @Override
    protected boolean stillListed(Owner owner) {
        return services.getStore().getByKey(owner.name()) != null;
    }

    /** What one Service asks for: its map entries and the rules of its local endpoints. */
    record Entries(List<SockmapAdmin.Service> services, List<Rule> rules) {
        static final Entries NONE = new Entries(List.of(), List.of());
    }

    /**
     * The map entries and rules of {@code svc} with its {@code slices}, seen from node
     * {@code nodeName}. None without the annotation, for a Service without a ClusterIP, or for a
     * port with no ready endpoint on this node. An endpoint counts when its {@code ready}
     * condition is true or unset (the API's reading), once per address and port.
     */
    static Entries entriesOf(Service svc, List<EndpointSlice> slices, String nodeName) {
        return entriesOf(svc, slices, nodeName, PodPorts.NONE);
    }

    /**
     * As {@link #entriesOf(Service, List, String)}; a port the Service's annotation does not name
     * is opted in as well when {@code pods} says a ready local endpoint's pod lists its port.
     */
    static Entries entriesOf(Service svc, List<EndpointSlice> slices, String nodeName, PodPorts pods) {
        PortsAnnotation wanted = PortsAnnotation.of(svc.getMetadata().getAnnotations(), PORTS_ANNOTATION);
        if ((pods == PodPorts.NONE && wanted.isEmpty()) || svc.getSpec() == null
                || svc.getSpec().getPorts() == null) {
            return Entries.NONE;
        }
        String key = keyOf(svc);
        boolean localOnly = localOnly(svc);
        boolean affinity = "ClientIP".equals(svc.getSpec().getSessionAffinity());
        List<SockmapAdmin.Service> entries = new ArrayList<>();
        Set<Rule> rules = new LinkedHashSet<>();
        for (ServicePort sp : svc.getSpec().getPorts()) {
            boolean annotated = wanted.names(sp.getPort(), sp.getName());
            if (sp.getProtocol() != null && !"TCP".equals(sp.getProtocol())) {
                if (annotated) {
                    LOG.warn("Service {} port {}: {} is not TCP; it stays with kube-proxy", key, sp.getPort(),
                            sp.getProtocol());
                }
                continue;
            }
            for (InetAddress vip : clusterIps(svc)) {
                List<InetSocketAddress> local = new ArrayList<>();
                List<InetSocketAddress> remote = new ArrayList<>();
                boolean podOptsIn = endpoints(slices, sp, vip instanceof Inet4Address, nodeName, pods, local, remote);
                if (!annotated && !podOptsIn) {
                    continue;
                }
                if (local.isEmpty()) {
                    continue; // nothing to shorten: kube-proxy carries it, as without sockmap4j
                }
                if (localOnly) {
                    remote.clear();
                } else if (affinity && local.size() + remote.size() > 1) {
                    LOG.warn("Service {} port {}: sessionAffinity ClientIP with several endpoints; it stays with "
                            + "kube-proxy, whose affinity a connect-time pick would not keep", key, sp.getPort());
                    continue;
                }
                try {
                    entries.add(new SockmapAdmin.Service(new InetSocketAddress(vip, sp.getPort()), local, remote,
                            localOnly));
                } catch (IllegalArgumentException e) {
                    LOG.warn("Service {} port {}: {}", key, sp.getPort(), e.getMessage());
                    continue;
                }
                for (InetSocketAddress e : local) {
                    rules.add(new Rule(e.getPort(), e.getAddress(), e.getAddress().getAddress().length * 8, 0));
                }
            }
        }
        return new Entries(List.copyOf(entries), List.copyOf(rules));
    }

    /**
     * Whether every connection should go to a local endpoint: where the Service says so
     * ({@code internalTrafficPolicy: Local}, {@code trafficDistribution: PreferSameNode} or
     * {@code PreferClose}) or the annotation asks for it. Otherwise a connect picks among all
     * ready endpoints as kube-proxy would, and only a local pick stays on this node.
     */
    static boolean localOnly(Service svc) {
        var spec = svc.getSpec();
        Map<String, String> ann = svc.getMetadata().getAnnotations();
        return "Local".equals(spec.getInternalTrafficPolicy())
                || "PreferSameNode".equals(spec.getTrafficDistribution())
                || "PreferClose".equals(spec.getTrafficDistribution())
                || (ann != null && "true".equalsIgnoreCase(Objects.requireNonNullElse(ann.get(PREFER_LOCAL_ANNOTATION), "")
                .trim()));
    }

    private static List<InetAddress> clusterIps(Service svc) {
        Set<String> ips = new LinkedHashSet<>();
        if (svc.getSpec().getClusterIPs() != null) {
            ips.addAll(svc.getSpec().getClusterIPs());
        }
        if (svc.getSpec().getClusterIP() != null) {
            ips.add(svc.getSpec().getClusterIP());
        }
        List<InetAddress> out = new ArrayList<>();
        for (String ip : ips) {
            if (ip == null || ip.isBlank() || "None".equals(ip)) {
                continue; // headless: clients dial the pods, whose own rules apply
            }
            try {
                out.add(SockmapAdmin.Network.literal(ip));
            } catch (IllegalArgumentException e) {
                LOG.warn("Service {}: ClusterIP '{}' is not an address literal; skipped", keyOf(svc), ip);
            }
        }
        return out;
    }

    /**
     * The ready endpoints of Service port {@code sp} of one family, this node's in {@code local};
     * returns whether the pod of one of the local ones opts its port in ({@code pods}).
     */
    private static boolean endpoints(List<EndpointSlice> slices, ServicePort sp, boolean v4, String nodeName,
                                     PodPorts pods, List<InetSocketAddress> local, List<InetSocketAddress> remote) {
        String name = sp.getName() == null ? "" : sp.getName();
        Set<InetSocketAddress> seen = new HashSet<>();
        boolean podOptsIn = false;
        for (EndpointSlice slice : slices) {
            if (!(v4 ? "IPv4" : "IPv6").equals(slice.getAddressType()) || slice.getPorts() == null
                    || slice.getEndpoints() == null) {
                continue;
            }
            Integer port = null;
            for (EndpointPort ep : slice.getPorts()) {
                String epName = ep.getName() == null ? "" : ep.getName();
                if (epName.equals(name) && (ep.getProtocol() == null || "TCP".equals(ep.getProtocol()))) {
                    port = ep.getPort();
                }
            }
            if (port == null) {
                continue;
            }
            for (Endpoint e : slice.getEndpoints()) {
                if (e.getAddresses() == null || e.getAddresses().isEmpty()
                        || (e.getConditions() != null && Boolean.FALSE.equals(e.getConditions().getReady()))) {
                    continue;
                }
                InetAddress a;
                try {
                    a = SockmapAdmin.Network.literal(e.getAddresses().get(0));
                } catch (IllegalArgumentException bad) {
                    continue;
                }
                InetSocketAddress at = new InetSocketAddress(a, port);
                boolean here = nodeName.equals(e.getNodeName());
                if (seen.add(at)) {
                    (here ? local : remote).add(at);
                }
                var ref = e.getTargetRef();
                if (here && !podOptsIn && ref != null && "Pod".equals(ref.getKind()) && ref.getName() != null) {
                    String ns = ref.getNamespace() == null ? slice.getMetadata().getNamespace() : ref.getNamespace();
                    podOptsIn = pods.optsIn(ns, ref.getName(), port);
                }
            }
        }
        return podOptsIn;
    }

    private final class Handler<T> implements ResourceEventHandler<T> {
        private final java.util.function.Function<T, String> serviceKey;

        Handler(java.util.function.Function<T, String> serviceKey) {
            this.serviceKey = serviceKey;
        }

        @Override
        public void onAdd(T o) {
            update(serviceKey.apply(o));
        }

        @Override
        public void onUpdate(T old, T o) {
            String before = serviceKey.apply(old);
            String after = serviceKey.apply(o);
            if (before != null && !before.equals(after)) {
                update(before);
            }
            update(after);
        }

        @Override
        public void onDelete(T o, boolean finalStateUnknown) {
            update(serviceKey.apply(o));
        }
    }

    @Override
    public void close() {
        services.close();
        slices.close();
    }
}
