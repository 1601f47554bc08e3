package io.github.sockmap4j.agent.kubernetes;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Which pods' NAT the kernel's capture mirrors (Istio's defaults only); needs no privilege. */
class MeshPodsTest {
    static Pod pod(Map<String, String> annotations) {
        return new PodBuilder().withNewMetadata().withName("p").withNamespace("n").withAnnotations(annotations)
                .endMetadata().build();
    }

    @Test
    void istiosDefaultsAreMirrored() {
        assertNull(MeshPods.unlikeItsNat(pod(Map.of(MeshPods.ISTIO_SIDECAR, "{}"))));
        assertNull(MeshPods.unlikeItsNat(pod(Map.of("traffic.sidecar.istio.io/includeOutboundIPRanges", "*",
                "traffic.sidecar.istio.io/includeInboundPorts", "*", "sidecar.istio.io/interceptionMode", "REDIRECT",
                "traffic.sidecar.istio.io/excludeOutboundPorts", " "))));
    }

    @Test
    void anAnnotationThatChangesTheNatIsNamed() {
        assertEquals("traffic.sidecar.istio.io/excludeOutboundPorts=5432", MeshPods.unlikeItsNat(pod(Map.of(
                "traffic.sidecar.istio.io/excludeOutboundPorts", "5432"))));
        assertEquals("traffic.sidecar.istio.io/includeOutboundIPRanges=10.96.0.0/12", MeshPods.unlikeItsNat(pod(
                Map.of("traffic.sidecar.istio.io/includeOutboundIPRanges", "10.96.0.0/12"))));
        assertEquals("sidecar.istio.io/interceptionMode=TPROXY", MeshPods.unlikeItsNat(pod(Map.of(
                "sidecar.istio.io/interceptionMode", "TPROXY"))));
        assertEquals("traffic.sidecar.istio.io/excludeInboundPorts=8080", MeshPods.unlikeItsNat(pod(Map.of(
                "traffic.sidecar.istio.io/excludeInboundPorts", "8080"))));
    }
}
