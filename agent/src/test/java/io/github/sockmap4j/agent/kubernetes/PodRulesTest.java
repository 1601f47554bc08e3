package io.github.sockmap4j.agent.kubernetes;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.github.sockmap4j.SockmapStats;
import io.github.sockmap4j.admin.SockmapAdmin;
import io.github.sockmap4j.agent.NodeAgent;
import io.github.sockmap4j.testbed.Await;
import io.github.sockmap4j.testbed.ChildJvm;
import io.github.sockmap4j.testbed.VethPods;
import io.github.sockmap4j.testsupport.MockApi;
import io.github.sockmap4j.testsupport.Leftovers;
import io.github.sockmap4j.testsupport.TestKernel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/**
 * Pod annotations as rules: fabric8's mock API server (CRUD mode, on loopback) stands for the
 * Kubernetes API, two network namespaces on a veth pair for two pods of this node, a cgroup for
 * kubepods, and the real kernel. A pod's annotation added, removed and the pod deleted turn its
 * connections' redirect on and off.
 */
@Tag("kernel")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class PodRulesTest {
    static final String NODE = "node-1";
    static final String DB_ADDR = "10.254.79.1";
    static final String APP_ADDR = "10.254.79.2";

    MockApi api;
    KubernetesClient client;
    Path cgroup;
    Path pins;
    Path work;
    Path peer;
    VethPods vethPods;
    String nsDb;
    String nsApp;
    NodeAgent agent;
    PodRules pods;

    @BeforeAll
    void start() throws Exception {
        api = MockApi.start();
        client = api.client;
        work = Files.createTempDirectory("sockmap4j-pods", PosixFilePermissions.asFileAttribute(
                PosixFilePermissions.fromString("rwxr-xr-x")));
        peer = work.resolve("peer");
        ChildJvm.compilePeer(peer);
        cgroup = TestKernel.newCgroup("kubepods");
        pins = Path.of("/sys/fs/bpf").resolve(TestKernel.uniqueName("pods"));
        vethPods = VethPods.create("k", DB_ADDR, APP_ADDR);
        nsDb = vethPods.nsA;
        nsApp = vethPods.nsB;
        agent = NodeAgent.start(new NodeAgent.Options(pins, List.of(cgroup), null, 65535, false));
        // The mock server answers a spec.nodeName field selector with nothing: every pod is listed,
        // and PodRules keeps this node's (the other-node pod below checks that it does).
        pods = PodRules.start(agent, client, NODE, PodRules.DEFAULT_ANNOTATION, false, pins);
        Await.until("the first pod list", Duration.ofSeconds(30), pods::isSynced);
    }

    @AfterAll
    void stop() throws Exception {
        Leftovers.closeAll(pods, agent, api, () -> TestKernel.removePins(pins), vethPods,
                () -> Leftovers.removeCgroups(cgroup), () -> Leftovers.removeDirectory(work));
    }

    static Pod pod(String name, String node, String ip, String ports) {
        PodBuilder b = new PodBuilder().withNewMetadata().withName(name).withNamespace("rag").endMetadata()
                .withNewSpec().withNodeName(node).addNewContainer().withName("main").withImage("qdrant").endContainer()
                .endSpec().withNewStatus().withPodIP(ip).endStatus();
        if (ports != null) {
            b.editMetadata().addToAnnotations(PodRules.DEFAULT_ANNOTATION, ports).endMetadata();
        }
        return b.build();
    }

    boolean ruleFor(int port) {
        return agent.describeRules().stream().anyMatch(r -> r.startsWith(port + "/" + DB_ADDR));
    }

    /** Redirected messages of a 64 B ping-pong from the app pod to the db pod. */
    long redirectedRoundTrips(int port, int count) throws Exception {
        SockmapStats before = SockmapAdmin.of(pins).stats();
        try (ChildJvm server = ChildJvm.startInCgroup(cgroup, List.of("ip", "netns", "exec", nsDb, peer.toString(),
                "pp-server", DB_ADDR, Integer.toString(port)))) {
            server.expect("port=", 30);
            try (ChildJvm c = ChildJvm.startInCgroup(cgroup, List.of("ip", "netns", "exec", nsApp, peer.toString(),
                    "pp-client", DB_ADDR, Integer.toString(port), Integer.toString(count), "64"))) {
                assertEquals("1", c.expect("ok=", 60), c.output());
            }
            server.expect("ok=", 30);
        }
        SockmapStats after = SockmapAdmin.of(pins).stats();
        return after.messagesRedirected() - before.messagesRedirected();
    }

    @Test
    void anAnnotatedPodsPortsAreRedirectedUntilTheAnnotationOrThePodGoes() throws Exception {
        int port = 47401;
        client.pods().inNamespace("rag").resource(pod("other-node-db", "node-2", DB_ADDR, "47401")).create();
        client.pods().inNamespace("rag").resource(pod("vector-db", NODE, DB_ADDR, null)).create();
        assertEquals(0, redirectedRoundTrips(port, 500), "no annotation, no rule (and another node's pod is not ours)");

        client.pods().inNamespace("rag").withName("vector-db").edit(p -> new PodBuilder(p).editMetadata()
                .addToAnnotations(PodRules.DEFAULT_ANNOTATION, port + ",47402").endMetadata().build());
        Await.until("the annotation's rules", Duration.ofSeconds(30), () -> ruleFor(port) && ruleFor(47402));
        assertTrue(redirectedRoundTrips(port, 2000) >= 0.99 * 4000, "the annotated port is redirected");

        client.pods().inNamespace("rag").withName("vector-db").edit(p -> new PodBuilder(p).editMetadata()
                .removeFromAnnotations(PodRules.DEFAULT_ANNOTATION).endMetadata().build());
        Await.until("the rules go with the annotation", Duration.ofSeconds(30), () -> !ruleFor(port));
        assertEquals(0, redirectedRoundTrips(port, 500));

        client.pods().inNamespace("rag").withName("vector-db").edit(p -> new PodBuilder(p).editMetadata()
                .addToAnnotations(PodRules.DEFAULT_ANNOTATION, Integer.toString(port)).endMetadata().build());
        Await.until("the rule is back", Duration.ofSeconds(30), () -> ruleFor(port));
        client.pods().inNamespace("rag").withName("vector-db").delete();
        Await.until("the rules go with the pod", Duration.ofSeconds(30), () -> !ruleFor(port));
        client.pods().inNamespace("rag").withName("other-node-db").delete();
        assertEquals(0, agent.rules(), "nothing left: " + agent.describeRules());
    }

    @Test
    void aBadAnnotationLeavesThePodOnTcp() throws Exception {
        client.pods().inNamespace("rag").resource(pod("bad", NODE, DB_ADDR, "http")).create();
        client.pods().inNamespace("rag").resource(pod("good", NODE, APP_ADDR, "47403")).create();
        Await.until("the good pod's rule", Duration.ofSeconds(30),
                () -> agent.describeRules().stream().anyMatch(r -> r.startsWith("47403/" + APP_ADDR)));
        assertTrue(agent.describeRules().stream().noneMatch(r -> r.contains("/" + DB_ADDR)), agent.describeRules()
                .toString());
        client.pods().inNamespace("rag").withName("bad").delete();
        client.pods().inNamespace("rag").withName("good").delete();
        Await.until("released", Duration.ofSeconds(30), () -> agent.rules() == 0);
    }
}
