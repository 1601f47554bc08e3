package io.github.sockmap4j.agent.kubernetes;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/**
 * A meshed pod's NAT read from its Istio or Linkerd init container's arguments, as their injectors
 * write them, and the arguments that leave the pod to its NAT, each named; needs no privilege.
 */
class PodNatTest {
    /** istio-init's arguments as Istio's injection template renders them with its defaults. */
    static final List<String> DEFAULTS = List.of("istio-iptables", "-p", "15001", "-z", "15006", "-u", "1337", "-m",
            "REDIRECT", "-i", "*", "-x", "", "-b", "*", "-d", "15090,15021,15020");

    static Pod pod(String initContainer, List<String> command, List<String> args, Map<String, String> annotations) {
        return new PodBuilder().withNewMetadata().withName("p").withNamespace("n").withAnnotations(annotations)
                .endMetadata().withNewSpec().addNewInitContainer().withName(initContainer).withCommand(command)
                .withArgs(args).endInitContainer().addNewContainer().withName("app").endContainer().endSpec().build();
    }

    static Pod istioInit(List<String> args) {
        return pod("istio-init", List.of(), args, Map.of());
    }

    static List<String> with(List<String> args, String... more) {
        List<String> out = new ArrayList<>(args);
        out.addAll(List.of(more));
        return out;
    }

    @Test
    void istiosDefaultsAreRead() {
        PodNat read = PodNat.ofInitContainer(istioInit(DEFAULTS)).orElseThrow();
        assertEquals(new PodNat(1337, 1337, 15001, 15006, List.of(), List.of(15008, 15090, 15021, 15020)), read);
        // The same ports the agent leaves out by default for a pod without the container.
        assertEquals(java.util.Set.copyOf(MeshPods.Shape.ISTIO.inboundSkip()), java.util.Set.copyOf(read.inboundSkip()));
    }

    /**
     * The installation's own settings (values.global.proxy.excludeOutboundPorts and
     * excludeInboundPorts, which no annotation of the pod carries) are in the arguments: followed.
     */
    @Test
    void portsTheInstallationLeavesOutAreFollowed() {
        List<String> args = new ArrayList<>(DEFAULTS);
        args.set(args.size() - 1, "15090,15021,15020,5433,");
        args.addAll(List.of("-o", "5432, 6379"));
        assertEquals(Optional.of(new PodNat(1337, 1337, 15001, 15006, List.of(5432, 6379),
                List.of(15008, 15090, 15021, 15020, 5433))), PodNat.ofInitContainer(istioInit(args)));
    }

    /** Istio's CNI plugin writes the NAT; its validation container carries the same arguments. */
    @Test
    void theCniPluginsValidationContainerIsRead() {
        Pod p = pod("istio-validation", List.of(), with(DEFAULTS, "--run-validation", "--skip-rule-apply",
                "--log_output_level=default:info"), Map.of());
        assertEquals(1337, PodNat.ofInitContainer(p).orElseThrow().proxyUid());
    }

    /** The command as pilot-agent runs it, long flags, flags with '=' and glued values. */
    @Test
    void flagsInEachFormAreRead() {
        Pod p = pod("istio-init", List.of("/usr/local/bin/pilot-agent"), List.of("istio-iptables", "--envoy-port=15011",
                "-z=15016", "-u2000", "--istio-inbound-interception-mode", "REDIRECT", "-i", "*", "--istio-inbound-ports=*",
                "--istio-local-exclude-ports", "15090", "--log_output_level", "default:debug", "-e", "15018"), Map.of());
        assertEquals(new PodNat(2000, 2000, 15011, 15016, List.of(), List.of(15018, 15090)),
                PodNat.ofInitContainer(p).orElseThrow());
    }

    /** The proxy's group, which Istio's NAT leaves alone as its uid: {@code -g}, or the uid. */
    @Test
    void theProxysGroupIsRead() {
        assertEquals(1338, PodNat.ofInitContainer(istioInit(with(DEFAULTS, "-g", "1338"))).orElseThrow().proxyGid());
        assertEquals(1337, PodNat.ofInitContainer(istioInit(DEFAULTS)).orElseThrow().proxyGid());
        assertEquals(2000, PodNat.ofInitContainer(istioInit(with(DEFAULTS, "--proxy-uid=2000"))).orElseThrow()
                .proxyGid(), "the uid, where -g is not given");
    }

    /** Each argument that makes the NAT capture otherwise than the kernel can leaves the pod to its NAT, named. */
    @Test
    void whatTheCaptureDoesNotFollowIsNamed() {
        List<List<String>> refused = List.of(
                with(DEFAULTS.subList(0, 11), "-x", "10.96.0.0/12", "-b", "*"),
                with(DEFAULTS.subList(0, 9), "-i", "10.96.0.0/12", "-b", "*"),
                with(DEFAULTS.subList(0, 9), "-i", "", "-b", "*"),
                with(DEFAULTS.subList(0, 9), "-b", "*"),
                with(DEFAULTS.subList(0, 13), "-b", "8080"),
                with(DEFAULTS.subList(0, 13)),
                with(DEFAULTS, "-m", "TPROXY"),
                with(DEFAULTS, "-q", "80,443"),
                with(DEFAULTS, "-k", "eth1"),
                with(DEFAULTS, "--redirect-dns"),
                with(DEFAULTS, "-g", "group"),
                with(DEFAULTS, "-o", "1,2,3,4,5,6,7,8,9"),
                with(DEFAULTS, "-o", "1000-2000"),
                with(DEFAULTS, "-d", "15006"),
                with(DEFAULTS, "-p", "15006"),
                with(DEFAULTS, "-u", "proxy"),
                with(DEFAULTS, "-p"),
                with(DEFAULTS, "stray"));
        for (List<String> args : refused) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> PodNat.ofInitContainer(istioInit(args)), args.toString());
            assertTrue(e.getMessage().startsWith("init container istio-init: "), e.getMessage());
        }
        String dns = assertThrows(IllegalArgumentException.class,
                () -> PodNat.ofInitContainer(istioInit(with(DEFAULTS, "--redirect-dns")))).getMessage();
        assertTrue(dns.contains("--redirect-dns"), dns);
        String ranges = assertThrows(IllegalArgumentException.class, () -> PodNat.ofInitContainer(
                istioInit(with(DEFAULTS.subList(0, 11), "-x", "10.96.0.0/12", "-b", "*")))).getMessage();
        assertTrue(ranges.contains("-x 10.96.0.0/12"), ranges);
    }

    /** linkerd-init's arguments as Linkerd's chart renders them with its defaults. */
    static final List<String> LINKERD = List.of("--incoming-proxy-port", "4143", "--outgoing-proxy-port", "4140",
            "--proxy-uid", "2102", "--inbound-ports-to-ignore", "4190,4191,4567,4568", "--outbound-ports-to-ignore",
            "4567,4568");

    @Test
    void linkerdsDefaultsAreRead() {
        assertEquals(new PodNat(2102, -1, 4140, 4143, List.of(4567, 4568), List.of(4190, 4191, 4567, 4568)),
                PodNat.ofInitContainer(pod("linkerd-init", List.of(), LINKERD, Map.of())).orElseThrow());
        // The nft binaries, logging, a command naming proxy-init first, ranges, a list given twice, short flags.
        Pod p = pod("linkerd-init", List.of("/usr/lib/linkerd/proxy-init"), List.of("--firewall-bin-path",
                "iptables-nft", "--firewall-save-bin-path", "iptables-nft-save", "-p", "4143", "-o4140", "-u=2102",
                "--inbound-ports-to-ignore", "4190,4191", "--inbound-ports-to-ignore", "9000-9002", "--log-level",
                "debug", "--outbound-ports-to-ignore=25,443", "-w", "--simulate=false"), Map.of());
        assertEquals(new PodNat(2102, -1, 4140, 4143, List.of(25, 443), List.of(4190, 4191, 9000, 9001, 9002)),
                PodNat.ofInitContainer(p).orElseThrow());
    }

    /** What linkerd-init writes that the capture does not follow leaves the pod to its NAT, named. */
    @Test
    void whatLinkerdsCaptureDoesThatTheKernelDoesNotIsNamed() {
        List<List<String>> refused = List.of(
                with(LINKERD, "--subnets-to-ignore", "10.0.0.0/8"),
                with(LINKERD, "--ports-to-redirect", "8080"),
                with(LINKERD, "-r", "8080"),
                with(LINKERD, "--simulate"),
                with(LINKERD, "--netns", "/proc/1/ns/net"),
                with(LINKERD, "--ipv6=false"),
                with(LINKERD, "--inbound-ports-to-ignore", "1000-2000"),
                with(LINKERD, "--outbound-ports-to-ignore", "1,2,3,4,5,6,7"),
                with(LINKERD, "--outbound-ports-to-ignore", "db"),
                with(LINKERD, "--proxy-uid", "-1"),
                LINKERD.subList(2, LINKERD.size()),
                with(LINKERD, "stray"));
        for (List<String> args : refused) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> PodNat.ofInitContainer(pod("linkerd-init", List.of(), args, Map.of())), args.toString());
            assertTrue(e.getMessage().startsWith("init container linkerd-init: "), e.getMessage());
        }
    }

    /** A Linkerd pod without linkerd-init (Linkerd's CNI plugin wrote its NAT) is refused, not read as Istio's. */
    @Test
    void aLinkerdPodWithoutItsInitContainerIsRefused() {
        String why = assertThrows(IllegalArgumentException.class, () -> MeshPods.podNat(MeshPodsTest.pod(Map.of(
                MeshPods.LINKERD_SIDECAR, "stable-2.14.10")), MeshPods.Shape.ISTIO)).getMessage();
        assertTrue(why.contains("linkerd-init"), why);
    }

    /** A pod without Istio's init container is not read here; nor is another container running something else. */
    @Test
    void aPodWithoutItIsLeftToItsAnnotations() {
        Pod bare = new PodBuilder().withNewMetadata().withName("p").withNamespace("n").endMetadata().build();
        assertEquals(Optional.empty(), PodNat.ofInitContainer(bare));
        assertEquals(Optional.empty(), PodNat.ofInitContainer(pod("istio-init", List.of("sh", "-c"), List.of("true"),
                Map.of())));
        assertEquals(Optional.empty(), PodNat.ofInitContainer(pod("migrate", List.of(), DEFAULTS, Map.of())));
    }

    /**
     * What the pod got wins over its annotations, which may have changed since (the injector
     * rendered the arguments from them); without the container the annotations and the agent's
     * shape say it, as before.
     */
    @Test
    void theArgumentsWinOverTheAnnotations() {
        Map<String, String> ann = Map.of("traffic.sidecar.istio.io/excludeOutboundIPRanges", "10.0.0.0/8",
                MeshPods.EXCLUDE_OUTBOUND_PORTS, "5432");
        assertEquals(new PodNat(1337, 1337, 15001, 15006, List.of(), List.of(15008, 15090, 15021, 15020)),
                MeshPods.podNat(pod("istio-init", List.of(), DEFAULTS, ann), MeshPods.Shape.ISTIO));
        String refused = assertThrows(IllegalArgumentException.class, () -> MeshPods.podNat(
                MeshPodsTest.pod(ann), MeshPods.Shape.ISTIO)).getMessage();
        assertTrue(refused.contains("excludeOutboundIPRanges=10.0.0.0/8"), refused);
        assertEquals(new PodNat(1337, 1337, 15001, 15006, List.of(5432), MeshPods.Shape.ISTIO.inboundSkip()),
                MeshPods.podNat(MeshPodsTest.pod(Map.of(MeshPods.EXCLUDE_OUTBOUND_PORTS, "5432")),
                        MeshPods.Shape.ISTIO));
    }
}
