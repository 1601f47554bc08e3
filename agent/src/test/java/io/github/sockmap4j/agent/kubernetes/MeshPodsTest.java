package io.github.sockmap4j.agent.kubernetes;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.github.sockmap4j.admin.SockmapAdmin;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * Which pods' NAT the kernel's capture mirrors (Istio's defaults and its exclude-ports
 * annotations), and the ports it then leaves alone; needs no privilege.
 */
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
                "traffic.sidecar.istio.io/excludeOutboundIPRanges", " "))));
    }

    @Test
    void anAnnotationThatChangesTheNatIsNamed() {
        assertEquals("traffic.sidecar.istio.io/excludeOutboundIPRanges=10.0.0.0/8", MeshPods.unlikeItsNat(pod(
                Map.of("traffic.sidecar.istio.io/excludeOutboundIPRanges", "10.0.0.0/8"))));
        assertEquals("traffic.sidecar.istio.io/includeOutboundIPRanges=10.96.0.0/12", MeshPods.unlikeItsNat(pod(
                Map.of("traffic.sidecar.istio.io/includeOutboundIPRanges", "10.96.0.0/12"))));
        assertEquals("sidecar.istio.io/interceptionMode=TPROXY", MeshPods.unlikeItsNat(pod(Map.of(
                "sidecar.istio.io/interceptionMode", "TPROXY"))));
        assertEquals("traffic.sidecar.istio.io/includeInboundPorts=8080", MeshPods.unlikeItsNat(pod(Map.of(
                "traffic.sidecar.istio.io/includeInboundPorts", "8080"))));
    }

    /** The exclude-ports annotations are followed: the capture leaves those ports alone, as the NAT does. */
    @Test
    void theExcludePortsAnnotationsAreFollowed() {
        assertNull(MeshPods.unlikeItsNat(pod(Map.of(MeshPods.EXCLUDE_OUTBOUND_PORTS, "5432",
                MeshPods.EXCLUDE_INBOUND_PORTS, "8080"))));
        MeshPods.NatPorts ports = MeshPods.natPorts(pod(Map.of(MeshPods.EXCLUDE_OUTBOUND_PORTS, "5432, 6379",
                MeshPods.EXCLUDE_INBOUND_PORTS, "8080,15020")), MeshPods.Shape.ISTIO);
        assertEquals(List.of(5432, 6379), ports.outbound());
        assertEquals(List.of(15008, 15020, 15021, 15090, 8080), ports.inbound(), "the proxy's own, then the pod's");
        MeshPods.NatPorts none = MeshPods.natPorts(pod(Map.of(MeshPods.ISTIO_SIDECAR, "{}")), MeshPods.Shape.ISTIO);
        assertEquals(List.of(), none.outbound());
        assertEquals(SockmapAdmin.MeshedPod.ISTIO_INBOUND_SKIP, none.inbound());
    }

    /** What the kernel's entry cannot hold, or what is not a port, leaves the pod to its NAT, naming why. */
    @Test
    void portsTheCaptureCannotFollowAreNamed() {
        for (Map<String, String> ann : List.of(Map.of(MeshPods.EXCLUDE_OUTBOUND_PORTS, "1,2,3,4,5,6,7,8,9"),
                Map.of(MeshPods.EXCLUDE_INBOUND_PORTS, "1,2,3,4,5"), Map.of(MeshPods.EXCLUDE_OUTBOUND_PORTS, "db"),
                Map.of(MeshPods.EXCLUDE_OUTBOUND_PORTS, "1000-2000"), Map.of(MeshPods.EXCLUDE_INBOUND_PORTS, "15006"),
                Map.of(MeshPods.EXCLUDE_OUTBOUND_PORTS, "0"))) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> MeshPods.natPorts(pod(ann), MeshPods.Shape.ISTIO), ann.toString());
            String name = ann.keySet().iterator().next();
            assertTrue(e.getMessage().contains(name), e.getMessage());
        }
    }
}
