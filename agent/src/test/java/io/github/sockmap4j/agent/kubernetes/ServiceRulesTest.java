package io.github.sockmap4j.agent.kubernetes;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.fabric8.kubernetes.api.model.Service;
import io.fabric8.kubernetes.api.model.ServiceBuilder;
import io.fabric8.kubernetes.api.model.discovery.v1.EndpointSlice;
import io.fabric8.kubernetes.api.model.discovery.v1.EndpointSliceBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.github.sockmap4j.admin.SockmapAdmin;
import io.github.sockmap4j.agent.NodeAgent;
import io.github.sockmap4j.agent.Owner;
import io.github.sockmap4j.testbed.Await;
import io.github.sockmap4j.testsupport.MockApi;
import io.github.sockmap4j.testsupport.Leftovers;
import io.github.sockmap4j.testsupport.TestKernel;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/**
 * Services and EndpointSlices as Service map entries: fabric8's mock API server (CRUD mode, on
 * loopback) as the Kubernetes API, a node agent on pins of its own and the real kernel's maps. A
 * Service created, its endpoint made not ready, moved to another node and back, its traffic
 * policy changed, the agent restarted, the annotation removed and the Service deleted: the map
 * (read back from the kernel) follows each step. NodeBedTest shows what an entry does to a
 * connect; this shows where entries come from.
 */
@Tag("kernel")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class ServiceRulesTest {
    static final String NODE = "node-1";
    static final InetSocketAddress VIP4 = new InetSocketAddress(InetAddress.ofLiteral("10.96.0.10"), 6334);
    static final InetSocketAddress VIP6 = new InetSocketAddress(InetAddress.ofLiteral("fd00:96::10"), 6334);
    static final InetSocketAddress LOCAL4 = new InetSocketAddress(InetAddress.ofLiteral("10.244.1.2"), 16334);
    static final InetSocketAddress OTHER4 = new InetSocketAddress(InetAddress.ofLiteral("10.244.2.2"), 16334);
    static final InetSocketAddress LOCAL6 = new InetSocketAddress(InetAddress.ofLiteral("fd00:244:1::2"), 16334);
    static final InetSocketAddress STRAY = new InetSocketAddress(InetAddress.ofLiteral("10.96.0.99"), 80);

    MockApi api;
    KubernetesClient client;
    Path cgroup;
    Path pins;
    NodeAgent agent;
    ServiceRules rules;
    PodRules pods;

    @BeforeAll
    void start() throws Exception {
        api = MockApi.start();
        client = api.client;
        cgroup = TestKernel.newCgroup("kubepods-svc");
        pins = Path.of("/sys/fs/bpf").resolve(TestKernel.uniqueName("svc"));
        agent = NodeAgent.start(new NodeAgent.Options(pins, List.of(cgroup), null, 65535, false));
    }

    @AfterAll
    void stop() throws Exception {
        Leftovers.closeAll(rules, pods, agent, api, () -> TestKernel.removePins(pins),
                () -> Leftovers.removeCgroups(cgroup));
    }

    static Service service(String ports, String internalTrafficPolicy) {
        ServiceBuilder b = new ServiceBuilder().withNewMetadata().withName("qdrant").withNamespace("rag").endMetadata()
                .withNewSpec().withClusterIP("10.96.0.10").withClusterIPs("10.96.0.10", "fd00:96::10")
                .withInternalTrafficPolicy(internalTrafficPolicy)
                .addNewPort().withName("grpc").withPort(6334).withProtocol("TCP").endPort()
                .addNewPort().withName("http").withPort(6333).withProtocol("TCP").endPort()
                .endSpec();
        if (ports != null) {
            b.editMetadata().addToAnnotations(ServiceRules.PORTS_ANNOTATION, ports).endMetadata();
        }
        return b.build();
    }

    /** The IPv4 slice: the local endpoint on {@code localNode}, ready or not, and one on node-2. */
    static EndpointSlice slice4(String localNode, boolean ready) {
        return new EndpointSliceBuilder().withNewMetadata().withName("qdrant-v4").withNamespace("rag")
                .addToLabels(ServiceRules.SERVICE_NAME_LABEL, "qdrant").endMetadata()
                .withAddressType("IPv4")
                .addNewPort().withName("grpc").withPort(16334).withProtocol("TCP").endPort()
                .addNewPort().withName("http").withPort(16333).withProtocol("TCP").endPort()
                .addNewEndpoint().withAddresses("10.244.1.2").withNodeName(localNode)
                .withNewConditions().withReady(ready).endConditions()
                .withNewTargetRef().withKind("Pod").withName("qdrant-0").withNamespace("rag").endTargetRef().endEndpoint()
                .addNewEndpoint().withAddresses("10.244.2.2").withNodeName("node-2")
                .withNewConditions().withReady(true).endConditions().endEndpoint()
                .build();
    }

    static EndpointSlice slice6() {
        return new EndpointSliceBuilder().withNewMetadata().withName("qdrant-v6").withNamespace("rag")
                .addToLabels(ServiceRules.SERVICE_NAME_LABEL, "qdrant").endMetadata()
                .withAddressType("IPv6")
                .addNewPort().withName("grpc").withPort(16334).withProtocol("TCP").endPort()
                .addNewEndpoint().withAddresses("fd00:244:1::2").withNodeName(NODE)
                .withNewTargetRef().withKind("Pod").withName("qdrant-0").endTargetRef().endEndpoint()
                .build();
    }

    /** The local endpoint's pod, annotated with {@code ports}. */
    static io.fabric8.kubernetes.api.model.Pod pod(String ports) {
        return new io.fabric8.kubernetes.api.model.PodBuilder().withNewMetadata().withName("qdrant-0")
                .withNamespace("rag").addToAnnotations(PodRules.DEFAULT_ANNOTATION, ports).endMetadata()
                .withNewSpec().withNodeName(NODE).addNewContainer().withName("qdrant").withImage("qdrant").endContainer()
                .endSpec().withNewStatus().withPodIP("10.244.1.2").addNewPodIP().withIp("10.244.1.2").endPodIP()
                .addNewPodIP().withIp("fd00:244:1::2").endPodIP().endStatus().build();
    }

    Set<SockmapAdmin.Service> map() throws Exception {
        return Set.copyOf(SockmapAdmin.of(pins).services());
    }

    static SockmapAdmin.Service entry(InetSocketAddress vip, List<InetSocketAddress> local,
                                      List<InetSocketAddress> remote, boolean localOnly) {
        return new SockmapAdmin.Service(vip, local, remote, localOnly);
    }

    boolean ruleFor(InetSocketAddress endpoint) {
        String prefix = endpoint.getPort() + "/" + endpoint.getAddress().getHostAddress();
        return agent.describeRules().stream().anyMatch(r -> r.startsWith(prefix));
    }

    /** Waits for the map to hold {@code expected}; prints how long after the API server took the change. */
    void awaitMap(String what, Set<SockmapAdmin.Service> expected) throws InterruptedException {
        long t0 = System.nanoTime();
        Await.until(what, Duration.ofSeconds(10), () -> map().equals(expected));
        System.out.printf("service-rules: %s: %.0f ms%n", what, (System.nanoTime() - t0) / 1e6);
    }

    @Test
    void theMapFollowsServicesAndTheirEndpoints() throws Exception {
        // An entry no Service accounts for (an operator's, or one of a Service deleted while no
        // agent ran): the agent owns the map once it watches the API server.
        SockmapAdmin.of(pins).putService(entry(STRAY, List.of(new InetSocketAddress(InetAddress.ofLiteral("10.244.1.9"), 80)),
                List.of(), false));
        pods = PodRules.start(agent, client, NODE, PodRules.DEFAULT_ANNOTATION, false);
        rules = ServiceRules.start(agent, client, NODE, pods);
        Await.until("the first lists", Duration.ofSeconds(30), rules::isSynced);
        assertEquals(Set.of(), map(), "the stray entry is gone once both lists are in");

        client.resource(slice4(NODE, true)).create();
        client.resource(slice6()).create();
        client.resource(service("grpc", null)).create();
        Set<SockmapAdmin.Service> both = Set.of(entry(VIP4, List.of(LOCAL4), List.of(OTHER4), false),
                entry(VIP6, List.of(LOCAL6), List.of(), false));
        awaitMap("the Service's entries (port named in the annotation; both families)", both);
        assertTrue(ruleFor(LOCAL4) && ruleFor(LOCAL6), "the local endpoints' ports are opted in: " + agent.describeRules());
        assertTrue(!ruleFor(OTHER4), "another node's endpoint gets no rule");

        client.resource(slice4(NODE, false)).update();
        awaitMap("the local endpoint not ready: no IPv4 entry", Set.of(entry(VIP6, List.of(LOCAL6), List.of(), false)));
        Await.until("its rule released", Duration.ofSeconds(10), () -> !ruleFor(LOCAL4));

        client.resource(slice4(NODE, true)).update();
        awaitMap("ready again", both);

        client.resource(slice4("node-3", true)).update();
        awaitMap("the endpoint moved to another node: no IPv4 entry",
                Set.of(entry(VIP6, List.of(LOCAL6), List.of(), false)));

        client.resource(slice4(NODE, true)).update();
        awaitMap("back on this node", both);

        client.resource(service("grpc", "Local")).update();
        Set<SockmapAdmin.Service> localOnly = Set.of(entry(VIP4, List.of(LOCAL4), List.of(), true),
                entry(VIP6, List.of(LOCAL6), List.of(), true));
        awaitMap("internalTrafficPolicy Local: local endpoints only", localOnly);

        // An agent restart: the entries stay in the pinned map, and the new watch keeps them.
        rules.close();
        pods.close();
        agent.close();
        assertEquals(localOnly, map(), "the entries outlive the agent");
        agent = NodeAgent.start(new NodeAgent.Options(pins, List.of(cgroup), null, 65535, false));
        pods = PodRules.start(agent, client, NODE, PodRules.DEFAULT_ANNOTATION, false);
        rules = ServiceRules.start(agent, client, NODE, pods);
        Await.until("the first lists after the restart", Duration.ofSeconds(30), rules::isSynced);
        assertEquals(localOnly, map(), "the entries after the restart");
        assertTrue(ruleFor(LOCAL4), "the rules after the restart: " + agent.describeRules());

        client.resource(service("6333", "Local")).update();
        Set<SockmapAdmin.Service> http = Set.of(
                entry(new InetSocketAddress(VIP4.getAddress(), 6333),
                        List.of(new InetSocketAddress(LOCAL4.getAddress(), 16333)), List.of(), true));
        awaitMap("the annotation names the other port (by number; no IPv6 endpoint has it)", http);

        client.resource(service(null, "Local")).update();
        awaitMap("the annotation removed: nothing", Set.of());
        Await.until("its rules released", Duration.ofSeconds(10), () -> agent.owners(Owner.Kind.SERVICE).isEmpty());

        // The endpoint's pod opts its port in by its own annotation: the Service port targeting it follows.
        client.resource(pod("16334")).create();
        awaitMap("the endpoint's pod annotated with the grpc target port", localOnly);
        client.resource(pod("16333")).update();
        awaitMap("the pod's annotation names the http target port", http);
        client.resource(pod("16333")).delete();
        awaitMap("the pod deleted: nothing", Set.of());

        client.resource(service("grpc", null)).update();
        awaitMap("annotated again", both);
        client.resource(service("grpc", null)).delete();
        awaitMap("the Service deleted: nothing", Set.of());
        client.resource(slice4(NODE, true)).delete();
        client.resource(slice6()).delete();
        Await.until("no rules left", Duration.ofSeconds(10), () -> agent.owners(Owner.Kind.SERVICE).isEmpty());
        assertEquals(Set.of(), agent.owners(Owner.Kind.SERVICE).stream().collect(Collectors.toSet()));
    }
}
