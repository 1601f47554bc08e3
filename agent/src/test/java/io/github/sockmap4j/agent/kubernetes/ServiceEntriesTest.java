package io.github.sockmap4j.agent.kubernetes;

import io.github.sockmap4j.admin.Rule;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.fabric8.kubernetes.api.model.Service;
import io.fabric8.kubernetes.api.model.ServiceBuilder;
import io.fabric8.kubernetes.api.model.discovery.v1.EndpointSlice;
import io.fabric8.kubernetes.api.model.discovery.v1.EndpointSliceBuilder;
import io.github.sockmap4j.agent.NodeAgent;
import io.github.sockmap4j.admin.SockmapAdmin;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.List;
import org.junit.jupiter.api.Test;

/** What a Service and its EndpointSlices become ({@link ServiceRules#entriesOf}): pure, no kernel. */
class ServiceEntriesTest {
    static InetSocketAddress at(String ip, int port) {
        return new InetSocketAddress(InetAddress.ofLiteral(ip), port);
    }

    static ServiceBuilder svc(String ports) {
        ServiceBuilder b = new ServiceBuilder().withNewMetadata().withName("db").withNamespace("n").endMetadata()
                .withNewSpec().withClusterIP("10.96.1.1").addNewPort().withPort(5432).endPort().endSpec();
        if (ports != null) {
            b.editMetadata().addToAnnotations(ServiceRules.PORTS_ANNOTATION, ports).endMetadata();
        }
        return b;
    }

    /** One IPv4 slice of unnamed port 15432 with endpoints "ip@node" (a trailing "!" marks not ready). */
    static EndpointSlice slice(String... endpoints) {
        EndpointSliceBuilder b = new EndpointSliceBuilder().withNewMetadata().withName("db-1").withNamespace("n")
                .endMetadata().withAddressType("IPv4").addNewPort().withPort(15432).endPort();
        for (String e : endpoints) {
            boolean ready = !e.endsWith("!");
            String[] p = e.replace("!", "").split("@");
            b.addNewEndpoint().withAddresses(p[0]).withNodeName(p[1]).withNewConditions().withReady(ready)
                    .endConditions().withNewTargetRef().withKind("Pod").withName("pod-" + p[0]).endTargetRef()
                    .endEndpoint();
        }
        return b.build();
    }

    static ServiceRules.Entries of(Service s, EndpointSlice... slices) {
        return ServiceRules.entriesOf(s, List.of(slices), "me");
    }

    @Test
    void aServiceWithALocalEndpointGetsOneEntryAndARule() {
        ServiceRules.Entries e = of(svc("5432").build(), slice("10.244.0.2@me", "10.244.9.2@other", "10.244.9.3@other!"));
        assertEquals(List.of(new SockmapAdmin.Service(at("10.96.1.1", 5432), List.of(at("10.244.0.2", 15432)),
                List.of(at("10.244.9.2", 15432)), false)), e.services(), "not-ready endpoints are left out");
        assertEquals(List.of(new Rule(15432, InetAddress.ofLiteral("10.244.0.2"), 32, 0)), e.rules());
    }

    @Test
    void withoutTheAnnotationALocalEndpointOrAClusterIpThereIsNothing() {
        assertEquals(ServiceRules.Entries.NONE, of(svc(null).build(), slice("10.244.0.2@me")));
        assertEquals(ServiceRules.Entries.NONE, of(svc("5432").build(), slice("10.244.9.2@other")));
        assertEquals(ServiceRules.Entries.NONE, of(svc("5432").build(), slice("10.244.0.2@me!")));
        assertEquals(ServiceRules.Entries.NONE, of(svc("5432").editSpec().withClusterIP("None").endSpec().build(),
                slice("10.244.0.2@me")), "headless");
        assertEquals(ServiceRules.Entries.NONE, of(svc("80").build(), slice("10.244.0.2@me")), "a port it does not have");
        assertEquals(ServiceRules.Entries.NONE, of(svc("5432").editSpec().editFirstPort().withProtocol("UDP").endPort()
                .endSpec().build(), slice("10.244.0.2@me")), "UDP");
    }

    @Test
    void localOnlyWhereTheServiceOrTheAnnotationAsksForIt() {
        for (Service s : List.of(svc("5432").editSpec().withInternalTrafficPolicy("Local").endSpec().build(),
                svc("5432").editSpec().withTrafficDistribution("PreferSameNode").endSpec().build(),
                svc("5432").editSpec().withTrafficDistribution("PreferClose").endSpec().build(),
                svc("5432").editMetadata().addToAnnotations(ServiceRules.PREFER_LOCAL_ANNOTATION, "true").endMetadata()
                        .build())) {
            var e = of(s, slice("10.244.0.2@me", "10.244.9.2@other"));
            assertEquals(1, e.services().size());
            assertTrue(e.services().get(0).localOnly(), s.toString());
            assertEquals(List.of(), e.services().get(0).remote(), "a local-only entry carries no other endpoint");
        }
        assertFalse(ServiceRules.localOnly(svc("5432").editSpec().withInternalTrafficPolicy("Cluster").endSpec().build()));
    }

    @Test
    void whatTheMapCannotHoldStaysWithKubeProxy() {
        String[] many = new String[17];
        many[0] = "10.244.0.2@me";
        for (int i = 1; i < many.length; i++) {
            many[i] = "10.244.9." + i + "@other";
        }
        assertEquals(List.of(), of(svc("5432").build(), slice(many)).services(), "17 endpoints: more than an entry holds");
        assertEquals(1, of(svc("5432").editSpec().withInternalTrafficPolicy("Local").endSpec().build(), slice(many))
                .services().size(), "local only: the one local endpoint is all it needs");
        assertEquals(List.of(), of(svc("5432").editSpec().withSessionAffinity("ClientIP").endSpec().build(),
                slice("10.244.0.2@me", "10.244.9.2@other")).services(), "ClientIP affinity with a choice to make");
    }

    @Test
    void anEndpointInTwoSlicesCountsOnce() {
        var e = of(svc("5432").build(), slice("10.244.0.2@me"), slice("10.244.0.2@me", "10.244.9.2@other"));
        assertEquals(List.of(at("10.244.0.2", 15432)), e.services().get(0).local());
        assertEquals(List.of(at("10.244.9.2", 15432)), e.services().get(0).remote());
    }

    /** A Service without the annotation whose local endpoint's pod lists its target port in its own. */
    @Test
    void aLocalPodsAnnotationOptsItsServicePortIn() {
        ServiceRules.PodPorts pod2 = (ns, pod, port) -> ns.equals("n") && pod.equals("pod-10.244.0.2") && port == 15432;
        var e = ServiceRules.entriesOf(svc(null).build(), List.of(slice("10.244.0.2@me", "10.244.9.2@other")), "me",
                pod2);
        assertEquals(List.of(new SockmapAdmin.Service(at("10.96.1.1", 5432), List.of(at("10.244.0.2", 15432)),
                List.of(at("10.244.9.2", 15432)), false)), e.services());
        assertEquals(List.of(new Rule(15432, InetAddress.ofLiteral("10.244.0.2"), 32, 0)), e.rules());
        assertEquals(ServiceRules.Entries.NONE, ServiceRules.entriesOf(svc(null).build(),
                List.of(slice("10.244.0.2@me!", "10.244.9.2@other")), "me", pod2), "its pod not ready");
        assertEquals(ServiceRules.Entries.NONE, ServiceRules.entriesOf(svc(null).build(),
                List.of(slice("10.244.0.2@other")), "me", pod2), "its pod on another node");
        assertEquals(ServiceRules.Entries.NONE, ServiceRules.entriesOf(svc(null).build(),
                List.of(slice("10.244.0.3@me")), "me", pod2), "another pod, not annotated");
    }
}
