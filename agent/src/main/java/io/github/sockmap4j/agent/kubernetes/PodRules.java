package io.github.sockmap4j.agent.kubernetes;

import io.github.sockmap4j.admin.Rule;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodIP;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.informers.ResourceEventHandler;
import io.fabric8.kubernetes.client.informers.SharedIndexInformer;
import io.github.sockmap4j.agent.NodeAgent;
import io.github.sockmap4j.agent.Owner;
import io.github.sockmap4j.admin.SockmapAdmin;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Pods of this node that opt in by annotation. A pod annotated
 * {@code sockmap4j.io/ports: "8080,9090"} (optionally {@code sockmap4j.io/bound: "BYTES"}) gets a
 * rule for each port on each of its pod IPs, held by {@code pod:NAMESPACE/NAME} in the agent: it
 * goes when the annotation or the pod goes. The pods are watched through the API server with an
 * informer on {@code spec.nodeName}: a list, then a watch, relisted after a lost watch.
 *
 * <p><b>Note:</b> this class is threadsafe (the informer calls back on one thread).
 */
public final class PodRules extends Reconciler {
    public static final String DEFAULT_ANNOTATION = PortsAnnotation.NAME;
    static final String BOUND_ANNOTATION = "sockmap4j.io/bound";
    private static final Logger LOG = LoggerFactory.getLogger(PodRules.class);

    private final String annotation;
    private final String nodeName;
    private final SharedIndexInformer<Pod> informer;
    /** Where the node's address prefixes go (sm4j_local), or null to leave them alone. */
    private final Path pinDir;
    private Set<SockmapAdmin.Network> localPeers = Set.of();
    /** Told of every pod added, changed or deleted, after its rules (ServiceRules: Services that pods opt in). */
    private final List<java.util.function.Consumer<Pod>> listeners = new java.util.concurrent.CopyOnWriteArrayList<>();

    private PodRules(NodeAgent agent, KubernetesClient client, String nodeName, String annotation,
                     boolean serverSideFilter, Path pinDir) {
        super(agent, Owner.Kind.POD);
        this.pinDir = pinDir;
        this.annotation = annotation;
        this.nodeName = nodeName;
        var all = client.pods().inAnyNamespace();
        this.informer = (serverSideFilter ? all.withField("spec.nodeName", nodeName) : all).inform(new Handler(), 0);
        whenListed(informer.start(), "the pods of node " + nodeName);
    }

    @Override
    protected void listed() {
        updateLocalPeers();
    }

    @Override
    protected boolean stillListed(Owner owner) {
        return informer.getStore().getByKey(owner.name()) != null;
    }

    /**
     * With a client of the caller's (who closes it). {@code serverSideFilter} false lists every pod and keeps this
     * node's here (fabric8's mock server does not filter on spec.nodeName; an API server does).
     */
    public static PodRules start(NodeAgent agent, KubernetesClient client, String nodeName, String annotation,
                          boolean serverSideFilter) {
        return new PodRules(agent, client, nodeName, annotation, serverSideFilter, null);
    }

    /**
     * As {@link #start(NodeAgent, KubernetesClient, String, String, boolean)}, and keeps the
     * local peers of {@code pinDir} ({@link SockmapAdmin#setLocalPeers(java.util.Collection)}) to this node's own
     * addresses and its pods' IPs, once the first list is in: a client of a server elsewhere
     * then stays off the map.
     */
    public static PodRules start(NodeAgent agent, KubernetesClient client, String nodeName, String annotation,
                          boolean serverSideFilter, Path pinDir) {
        return new PodRules(agent, client, nodeName, annotation, serverSideFilter, pinDir);
    }

    /** This node's own addresses (its interfaces here, in the agent's network namespace) and its pods' IPs. */
    private synchronized void updateLocalPeers() {
        if (pinDir == null) {
            return;
        }
        Set<SockmapAdmin.Network> now = new HashSet<>();
        try {
            for (NetworkInterface ni : java.util.Collections.list(NetworkInterface.getNetworkInterfaces())) {
                for (InetAddress a : java.util.Collections.list(ni.getInetAddresses())) {
                    now.add(host(InetAddress.getByAddress(a.getAddress())));
                }
            }
        } catch (java.io.IOException e) {
            LOG.warn("The node's own addresses could not be listed ({}); every address stays a local peer",
                    e.toString());
            return;
        }
        for (Pod p : informer.getStore().list()) {
            if (p.getSpec() != null && nodeName.equals(p.getSpec().getNodeName())) {
                podIps(p).forEach(ip -> now.add(host(ip)));
            }
        }
        if (now.equals(localPeers)) {
            return;
        }
        try {
            SockmapAdmin.of(pinDir).setLocalPeers(now);
            localPeers = now;
            LOG.info("Local peers: {} addresses of this node and its pods", now.size());
        } catch (java.io.IOException | RuntimeException e) {
            LOG.warn("The local peers could not be set ({}); those before stay", e.getMessage());
        }
    }

    private static SockmapAdmin.Network host(InetAddress a) {
        return new SockmapAdmin.Network(a, a.getAddress().length * 8);
    }

    /** The pods in the informer's store now. */
    List<Pod> listedPods() {
        return informer.getStore().list();
    }

    /** Whether {@code p} is in the informer's store now (a deleted pod is not). */
    boolean isListed(Pod p) {
        return informer.getStore().getByKey(p.getMetadata().getNamespace() + "/" + p.getMetadata().getName()) != null;
    }

    /** Whether {@code p} is scheduled on this node ({@code spec.nodeName}). */
    boolean isOfThisNode(Pod p) {
        return p.getSpec() != null && nodeName.equals(p.getSpec().getNodeName());
    }

    /** Calls {@code listener} with each pod added, changed or deleted from now on, on the informer's thread. */
    void onChange(java.util.function.Consumer<Pod> listener) {
        listeners.add(listener);
    }

    /**
     * Whether pod {@code namespace/name} is on this node and lists {@code port} in its annotation
     * (as it stands in the informer's store now).
     */
    boolean optsIn(String namespace, String name, int port) {
        Pod p = informer.getStore().getByKey(namespace + "/" + name);
        if (p == null || p.getSpec() == null || !nodeName.equals(p.getSpec().getNodeName())) {
            return false;
        }
        return PortsAnnotation.of(p.getMetadata().getAnnotations(), annotation).names(port, null);
    }

    private static Owner owner(Pod p) {
        return Owner.pod(p.getMetadata().getNamespace(), p.getMetadata().getName());
    }

    /** The rules a pod asks for now; empty without the annotation or pod IPs. */
    public List<Rule> rulesOf(Pod p) {
        return rulesOf(p, nodeName, annotation);
    }

    /** The rules a pod of node {@code nodeName} asks for with {@code annotation}. */
    public static List<Rule> rulesOf(Pod p, String nodeName, String annotation) {
        if (p.getSpec() == null || !nodeName.equals(p.getSpec().getNodeName())) {
            return List.of(); // the server's field selector should have left it out; another node's pod
        }
        Map<String, String> ann = p.getMetadata().getAnnotations();
        PortsAnnotation ports = PortsAnnotation.of(ann, annotation);
        if (ports.isEmpty()) {
            return List.of();
        }
        Set<InetAddress> ips = podIps(p);
        int bound = 0;
        String b = ann.get(BOUND_ANNOTATION);
        List<Rule> rules = new ArrayList<>();
        try {
            if (b != null && !b.isBlank()) {
                bound = Integer.parseInt(b.trim());
                if (bound < 0) {
                    throw new IllegalArgumentException("a bound is 0 or more bytes: " + b);
                }
            }
            for (int port : ports.ports()) {
                for (InetAddress ip : ips) {
                    rules.add(new Rule(port, ip, ip.getAddress().length * 8, bound));
                }
            }
        } catch (IllegalArgumentException e) {
            LOG.warn("Pod {} has a bad {} or {} annotation ('{}', '{}'): {}; it stays on TCP", owner(p), annotation,
                    BOUND_ANNOTATION, ann.get(annotation), b, e.getMessage());
            return List.of();
        }
        return rules;
    }

    /** A pod's IPs as its status gives them (podIPs, podIP), literals only. */
    static Set<InetAddress> podIps(Pod p) {
        Set<InetAddress> ips = new LinkedHashSet<>();
        if (p.getStatus() != null) {
            if (p.getStatus().getPodIPs() != null) {
                for (PodIP ip : p.getStatus().getPodIPs()) {
                    addIp(ips, ip.getIp());
                }
            }
            addIp(ips, p.getStatus().getPodIP());
        }
        return ips;
    }

    private static void addIp(Set<InetAddress> ips, String ip) {
        if (ip != null) {
            try {
                ips.add(io.github.sockmap4j.admin.SockmapAdmin.Network.literal(ip));
            } catch (IllegalArgumentException ignored) {
                // Not an address literal: the API server's word, never resolved.
            }
        }
    }

    private final class Handler implements ResourceEventHandler<Pod> {
        @Override
        public void onAdd(Pod p) {
            apply(p);
        }

        @Override
        public void onUpdate(Pod old, Pod p) {
            apply(p);
        }

        @Override
        public void onDelete(Pod p, boolean finalStateUnknown) {
            agent.hold(owner(p), List.of());
            LOG.info("Pod {} is gone: its rules released", owner(p));
            if (isSynced()) {
                updateLocalPeers();
            }
            listeners.forEach(l -> l.accept(p));
        }

        private void apply(Pod p) {
            List<Rule> rules = rulesOf(p);
            agent.hold(owner(p), rules);
            if (!rules.isEmpty()) {
                LOG.info("Pod {}: {} rules", owner(p), rules.size());
            }
            if (isSynced()) {
                updateLocalPeers(); // before the first list is in, every address stays local
            }
            listeners.forEach(l -> l.accept(p));
        }
    }

    @Override
    public void close() {
        informer.close();
    }
}
