package io.github.sockmap4j.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.fabric8.kubernetes.api.model.PodBuilder;
import io.fabric8.kubernetes.api.model.ServiceBuilder;
import io.fabric8.kubernetes.api.model.discovery.v1.EndpointSliceBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.github.sockmap4j.MeshStats;
import io.github.sockmap4j.SockmapStats;
import io.github.sockmap4j.admin.SockmapAdmin;
import io.github.sockmap4j.agent.kubernetes.MeshPods;
import io.github.sockmap4j.agent.kubernetes.ServiceRules;
import io.github.sockmap4j.testbed.Await;
import io.github.sockmap4j.testbed.Bpftool;
import io.github.sockmap4j.testbed.ChildJvm;
import io.github.sockmap4j.testbed.NodeBed;
import io.github.sockmap4j.testbed.Sh;
import io.github.sockmap4j.testbed.Sidecar;
import io.github.sockmap4j.testsupport.Leftovers;
import io.github.sockmap4j.testsupport.MockApi;
import io.github.sockmap4j.testsupport.TestKernel;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.Timeout;

/**
 * A meshed node's calls, NAT and agent ({@link MeshBedBase}): an application's connect goes
 * straight to its proxy, the proxy's straight to the other pod's inbound port, each proxy is told
 * where the connection was going, and every leg of a call is redirected.
 */
@Tag("kernel")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class MeshBedTest extends MeshBedBase {
    @Test
    @Order(1)
    void theAgentMeshesThePodsWithTheSidecarThatAskForIt() throws Exception {
        awaitMeshed(2);
        List<SockmapAdmin.MeshedPod> meshed = SockmapAdmin.of(pins).meshedPods();
        for (SockmapAdmin.MeshedPod m : meshed) {
            assertEquals(PROXY_UID, m.proxyUid());
            assertEquals(OUT, m.outboundPort());
            assertEquals(IN, m.inboundPort());
            assertEquals(2, m.addresses().size(), m.toString());
        }
        List<String> addresses = meshed.stream().flatMap(m -> m.addresses().stream())
                .map(java.net.InetAddress::getHostAddress).sorted().toList();
        assertEquals(List.of(NodeBed.podAddress(0), NodeBed.podAddress(1)), addresses.stream()
                .filter(a -> !a.contains(":")).toList(), "pods 0 and 1; pod 2 has no sidecar");
    }

    /**
     * The call of pod 0's application to pod 1's goes application, proxy, proxy, application:
     * three legs, each redirected both ways; each proxy learned where the connection was going.
     */
    @Test
    @Order(2)
    void everyLegOfAMeshedCallIsRedirected() throws Exception {
        awaitMeshed(2);
        int trips = 2_000;
        try (ChildJvm p0 = sidecar(0); ChildJvm p1 = sidecar(1)) {
            SockmapStats before = SockmapAdmin.of(pins).stats();
            String seen = call(0, NodeBed.podAddress(1), trips);
            assertTrue(p0.isAlive() && p1.isAlive(), "the sidecars ran through: " + p0.output() + p1.output());
            awaitClosed();
            SockmapStats after = SockmapAdmin.of(pins).stats();
            MeshStats b = before.mesh();
            MeshStats a = after.mesh();
            MeshStats.Leg appProxy = minus(a.appToProxy(), b.appToProxy());
            MeshStats.Leg proxyProxy = minus(a.proxyToProxy(), b.proxyToProxy());
            MeshStats.Leg proxyApp = minus(a.proxyToApp(), b.proxyToApp());
            System.out.printf(Locale.ROOT, "mesh bed: pod 0 -> pod 1 through both sidecars, %d x 64 B: captured %d, "
                    + "inbound %d, original destinations told %d; app->proxy %s, proxy->proxy %s, proxy->app %s; "
                    + "messages by TCP %d%n", trips, a.captured() - b.captured(), a.inbound() - b.inbound(),
                    a.originalDestinations() - b.originalDestinations(), appProxy, proxyProxy, proxyApp,
                    after.messagesPassed() - before.messagesPassed());
            assertEquals(NodeBed.podAddress(1) + ":" + PORT, seen, "the application's getpeername: where it dialed");
            assertEquals(1, a.captured() - b.captured(), "the application's connect went to its proxy");
            assertEquals(1, a.inbound() - b.inbound(), "the proxy's connect went to pod 1's inbound port");
            assertEquals(2, a.originalDestinations() - b.originalDestinations(), "each proxy was told");
            assertEveryLegRedirected(b, a, trips);
            // The same counters as the agent's /metrics serves them (its meters, over the pins).
            io.micrometer.core.instrument.simple.SimpleMeterRegistry registry =
                    new io.micrometer.core.instrument.simple.SimpleMeterRegistry();
            io.github.sockmap4j.metrics.SockmapMetrics.of(() -> {
                try {
                    return SockmapAdmin.of(pins).stats();
                } catch (IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            }, () -> true).bindTo(registry);
            for (String leg : List.of("app-proxy", "proxy-proxy", "proxy-app")) {
                MeshStats.Leg l = switch (leg) {
                    case "app-proxy" -> a.appToProxy();
                    case "proxy-proxy" -> a.proxyToProxy();
                    default -> a.proxyToApp();
                };
                assertEquals((double) l.bytesRedirected(), registry.get("sockmap4j.mesh.leg.bytes").tag("leg", leg)
                        .tag("path", "redirected").functionCounter().count(), leg);
                assertEquals((double) l.bytesByTcp(), registry.get("sockmap4j.mesh.leg.bytes").tag("leg", leg)
                        .tag("path", "tcp").functionCounter().count(), leg);
            }
            assertEquals((double) a.captured(), registry.get("sockmap4j.mesh.captured").functionCounter().count());
        }
    }

    /**
     * The application dials the Service: its proxy is told the Service (as its NAT would have
     * kept it), the proxy's own connect to it is translated to pod 1, sent to pod 1's inbound
     * port, and pod 1's proxy is told the endpoint (as its NAT would have kept it).
     */
    @Test
    @Order(3)
    void aMeshedCallToAServiceIsTranslatedForTheProxyAlone() throws Exception {
        awaitMeshed(2);
        InetSocketAddress vip = new InetSocketAddress(InetAddress.ofLiteral(VIP), PORT);
        Await.until("the Service's entry", Duration.ofSeconds(Await.scaled(10)),
                () -> SockmapAdmin.of(pins).services().stream().anyMatch(e -> e.vip().equals(vip)));
        int trips = 1_000;
        try (ChildJvm p0 = sidecar(0); ChildJvm p1 = sidecar(1)) {
            SockmapStats before = SockmapAdmin.of(pins).stats();
            String seen = call(0, VIP, trips);
            assertTrue(p0.isAlive() && p1.isAlive(), "the sidecars ran through: " + p0.output() + p1.output());
            awaitClosed();
            SockmapStats after = SockmapAdmin.of(pins).stats();
            assertEquals(VIP + ":" + PORT, seen, "the application's getpeername: the Service");
            assertEquals(1, after.servicesTranslated() - before.servicesTranslated(),
                    "the proxy's connect, not the application's (its went to the proxy)");
            assertEquals(1, after.mesh().captured() - before.mesh().captured());
            assertEquals(1, after.mesh().inbound() - before.mesh().inbound());
            assertEquals(2, after.mesh().originalDestinations() - before.mesh().originalDestinations());
            assertEveryLegRedirected(before.mesh(), after.mesh(), trips);
        }
    }

    /**
     * Over IPv6, with the bed's own proxy (peer.c mesh-proxy, which asks IP6T_SO_ORIGINAL_DST;
     * HAProxy 2.6 asks for IPv4 connections only): each proxy prints what it was told.
     */
    @Test
    @Order(4)
    void anIpv6CallIsMeshedAndEachProxyToldWhereItWasGoing() throws Exception {
        awaitMeshed(2);
        int trips = 1_000;
        String target = NodeBed.podAddress6(1) + ":" + PORT;
        SockmapStats before = SockmapAdmin.of(pins).stats();
        try (ChildJvm server = inPod(1, "pp-server", NodeBed.podAddress6(1), Integer.toString(PORT));
             ChildJvm in = ChildJvm.startInCgroup(podCgroups[1], NodeBed.in(bed.pod(1), List.of("env",
                     "SM4J_PEER_BIND=::6:0", "setpriv", "--reuid=" + PROXY_UID, "--regid=" + PROXY_UID,
                     "--clear-groups", peer.toString(), "mesh-proxy", "::", Integer.toString(IN))));
             ChildJvm out = ChildJvm.startInCgroup(podCgroups[0], NodeBed.in(bed.pod(0), List.of("setpriv",
                     "--reuid=" + PROXY_UID, "--regid=" + PROXY_UID, "--clear-groups", peer.toString(), "mesh-proxy",
                     "::", Integer.toString(OUT))))) {
            server.expect("port=", 30);
            in.expect("port=", 30);
            out.expect("port=", 30);
            try (ChildJvm c = inPod(0, "pp-client", NodeBed.podAddress6(1), Integer.toString(PORT),
                    Integer.toString(trips), "64")) {
                assertEquals(target, c.expect("peer=", 30));
                assertEquals(target, out.expect("origdst=", 30), "pod 0's proxy told where its application dialed");
                assertEquals(target, in.expect("origdst=", 30), "pod 1's proxy told where pod 0's proxy dialed");
                assertEquals("1", c.expect("ok=", 120), c.output());
            }
            assertEquals("1", server.expect("ok=", 30), server.output());
        }
        awaitClosed();
        SockmapStats after = SockmapAdmin.of(pins).stats();
        assertEquals(1, after.mesh().captured() - before.mesh().captured());
        assertEquals(1, after.mesh().inbound() - before.mesh().inbound());
        assertEveryLegRedirected(before.mesh(), after.mesh(), trips);
    }

    /** Pod 2 asks but has no sidecar: never meshed, its connects never captured; pod 1's NAT still takes its call. */
    @Test
    @Order(5)
    void aPodWithoutTheSidecarIsNeverMeshed() throws Exception {
        awaitMeshed(2);
        assertTrue(SockmapAdmin.of(pins).meshedPods().stream().noneMatch(m -> m.addresses().contains(
                InetAddress.ofLiteral(NodeBed.podAddress(2)))), "pod 2 is not meshed");
        try (ChildJvm p1 = sidecar(1)) {
            MeshStats before = mesh();
            call(2, NodeBed.podAddress(1), 100);
            assertTrue(p1.isAlive(), p1.output());
            MeshStats after = mesh();
            assertEquals(0, after.captured() - before.captured(), "pod 2's connect left alone");
            assertEquals(0, after.inbound() - before.inbound());
            assertEquals(0, minus(after.appToProxy(), before.appToProxy()).sockets());
        }
    }

    /**
     * Trust: with pod 0's proxy not running, a user of the pod listens on the proxy's port. The
     * application's connect is never sent there by sockmap4j (the listener is not the proxy's
     * uid's); the pod's own NAT rule does what it does without sockmap4j.
     */
    @Test
    @Order(6)
    void anApplicationsConnectIsNeverSentToAnotherUsersListener() throws Exception {
        awaitMeshed(2);
        try (ChildJvm squat = ChildJvm.startInCgroup(podCgroups[0], NodeBed.in(bed.pod(0), List.of("setpriv",
                "--reuid=" + ATTACKER_UID, "--regid=" + ATTACKER_UID, "--clear-groups", peer.toString(),
                "conn-server", "127.0.0.1", Integer.toString(OUT))))) {
            squat.expect("port=", 30);
            MeshStats before = mesh();
            int svcsock = Bpftool.mapEntries(pins.resolve("svcsock"));
            try (ChildJvm c = inPod(0, "conn-client", NodeBed.podAddress(1), Integer.toString(PORT), "1")) {
                c.expect("ok=", 30);
                assertEquals(0, mesh().captured() - before.captured(), "not captured into another user's listener");
                assertEquals(0, mesh().inbound() - before.inbound(), "nor sent to pod 1's proxy: not the proxy's connect");
                assertEquals(svcsock, Bpftool.mapEntries(pins.resolve("svcsock")), "nothing filed for the connect");
            }
            squat.closeInput();
        }
    }

    /** The meshed pods' maps are root's: no user can open them, let alone capture a pod. */
    @Test
    @Order(7)
    void onlyRootWritesTheMeshedPods() throws Exception {
        for (String pin : List.of("mesh", "meshaddr")) {
            Path p = pins.resolve(pin);
            assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(p)), pin);
            assertEquals("root", Files.getOwner(p).getName(), pin);
            try (ChildJvm user = ChildJvm.start(List.of("setpriv", "--reuid=" + ATTACKER_UID, "--regid=" + ATTACKER_UID,
                    "--clear-groups", Sh.tool("bpftool"), "map", "show", "pinned", p.toString()))) {
                assertTrue(user.waitFor(30) != 0, "a user opened " + pin + ": " + user.output());
            }
        }
    }

    /**
     * A pod whose NAT leaves some connects alone in a way the capture does not follow (Istio's
     * excludeOutboundIPRanges) is not meshed. Its annotation taken away, it is meshed again.
     */
    @Test
    @Order(8)
    void aPodWhoseNatExcludesPortsIsTakenOut() throws Exception {
        awaitMeshed(2);
        String excluded = "traffic.sidecar.istio.io/excludeOutboundIPRanges";
        client.pods().inNamespace("rag").withName("pod-0").edit(p -> new PodBuilder(p).editMetadata()
                .addToAnnotations(excluded, "10.96.0.0/12").endMetadata().build());
        awaitMeshed(1);
        assertTrue(SockmapAdmin.of(pins).meshedPods().get(0).addresses().contains(
                InetAddress.ofLiteral(NodeBed.podAddress(1))), "pod 1 stays");
        client.pods().inNamespace("rag").withName("pod-0").edit(p -> new PodBuilder(p).editMetadata()
                .removeFromAnnotations(excluded).endMetadata().build());
        awaitMeshed(2);
    }

    /**
     * A proxy's connect to a port its peer's NAT leaves out of the inbound redirect (Istio's own
     * ports, the agent's default) goes to that port, as through the NAT: with pod 1's proxy down,
     * pod 0's proxy uid reaches a listener on pod 1's 15020 directly; sent to pod 1's inbound port
     * it would be refused.
     */
    @Test
    @Order(9)
    void aProxysConnectToAPortItsPeersNatLeavesAloneGoesThere() throws Exception {
        awaitMeshed(2);
        int skipped = 15020;
        for (SockmapAdmin.MeshedPod m : SockmapAdmin.of(pins).meshedPods()) {
            assertEquals(SockmapAdmin.MeshedPod.ISTIO_INBOUND_SKIP, m.inboundSkip(), "the agent's default: Istio's");
            assertEquals(List.of(), m.outboundSkip(), "no annotation leaves an outbound port out");
        }
        try (ChildJvm server = inPod(1, "pp-server", NodeBed.podAddress(1), Integer.toString(skipped))) {
            server.expect("port=", 30);
            MeshStats before = mesh();
            try (ChildJvm c = ChildJvm.startInCgroup(podCgroups[0], NodeBed.in(bed.pod(0), List.of("setpriv",
                    "--reuid=" + PROXY_UID, "--regid=" + PROXY_UID, "--clear-groups", peer.toString(), "pp-client",
                    NodeBed.podAddress(1), Integer.toString(skipped), "100", "64")))) {
                assertEquals(NodeBed.podAddress(1) + ":" + skipped, c.expect("peer=", 30), c.output());
                assertEquals("1", c.expect("ok=", 60), c.output());
            }
            assertEquals("1", server.expect("ok=", 30), server.output());
            MeshStats after = mesh();
            assertEquals(0, after.inbound() - before.inbound(), "not sent to pod 1's inbound port");
            assertEquals(0, after.captured() - before.captured(), "the proxy's connect is never captured");
        }
    }

    /**
     * Istio's exclude-ports annotations, followed rather than refused: pod 0's NAT leaves its
     * application's connects to port 5432 alone, pod 1's leaves connects to its 5433 alone (the
     * rules istio-init writes for them added to the bed's NAT). The application's connect to pod
     * 1's 5432 is not captured; its connect to 5433 is, and pod 0's proxy's connect from there is
     * not sent to pod 1's inbound port.
     */
    @Test
    @Order(10)
    void theExcludePortsAnnotationsAreFollowed() throws Exception {
        leftOutPortsAreFollowed(5432, 5433, () -> {
            annotate(0, MeshPods.EXCLUDE_OUTBOUND_PORTS, "5432");
            annotate(1, MeshPods.EXCLUDE_INBOUND_PORTS, " 5433 ");
        }, () -> {
            annotate(0, MeshPods.EXCLUDE_OUTBOUND_PORTS, null);
            annotate(1, MeshPods.EXCLUDE_INBOUND_PORTS, null);
        });
    }

    /**
     * The same, with the ports in the pods' istio-init arguments alone, as an installation's own
     * settings put them there (values.global.proxy.excludeOutboundPorts and excludeInboundPorts),
     * no annotation saying so: what the pod's NAT was written from is what the capture follows.
     */
    @Test
    @Order(10)
    void theInitContainersArgumentsAreFollowed() throws Exception {
        leftOutPortsAreFollowed(5434, 5435, () -> {
            istioInit(0, "-o", "5434");
            istioInit(1, "-d", "15090,15021,15020,5435");
        }, () -> {
            istioInit(0);
            istioInit(1);
        });
    }

    static final int LINKERD_UID = 2102;
    static final int LINKERD_OUT = 4140;
    static final int LINKERD_IN = 4143;
    /** linkerd-init's arguments as Linkerd's chart renders them by default. */
    static final List<String> LINKERD_INIT_ARGS = List.of("--incoming-proxy-port", Integer.toString(LINKERD_IN),
            "--outgoing-proxy-port", Integer.toString(LINKERD_OUT), "--proxy-uid", Integer.toString(LINKERD_UID),
            "--inbound-ports-to-ignore", "4190,4191,4567,4568", "--outbound-ports-to-ignore", "4567,4568");

    /**
     * Pods 0 and 1 meshed as Linkerd meshes them: linkerd-init's NAT (proxy uid 2102, outbound
     * 4140, inbound 4143, its default left-out ports) in place of Istio's, Linkerd's annotation in
     * place of Istio's, and a linkerd-init container whose arguments the agent reads; each sidecar
     * HAProxy as uid 2102 on 4140 and 4143. A call's three legs are all redirected and each proxy
     * told where it was going; a connect to a port linkerd-init leaves out (4567) is not captured.
     * Istio's shape is put back after.
     */
    @Test
    @Order(10)
    void aPodMeshedTheWayLinkerdMeshesItIsFollowed() throws Exception {
        awaitMeshed(2);
        List<String> linkerdSidecar = Sidecar.haproxy(work.resolve("linkerd-sidecar.cfg"), LINKERD_OUT, LINKERD_IN, 0);
        int trips = 500;
        int leftOut = 4567;
        try {
            for (int i = 0; i < 2; i++) {
                bed.linkerdSidecarNat(i, LINKERD_UID, LINKERD_OUT, LINKERD_IN, List.of("4190", "4191", "4567", "4568"),
                        List.of("4567", "4568"));
                meshedAsLinkerd(i, true);
            }
            Await.until("pods 0 and 1 put as their linkerd-init says", Duration.ofSeconds(Await.scaled(20)), () -> {
                List<SockmapAdmin.MeshedPod> m = SockmapAdmin.of(pins).meshedPods();
                return m.size() == 2 && m.stream().allMatch(p -> p.proxyUid() == LINKERD_UID
                        && p.outboundPort() == LINKERD_OUT && p.inboundPort() == LINKERD_IN
                        && p.outboundSkip().equals(List.of(4567, 4568))
                        && p.inboundSkip().equals(List.of(4190, 4191, 4567, 4568)));
            });
            try (ChildJvm p0 = sidecar(0, LINKERD_UID, linkerdSidecar, LINKERD_OUT, LINKERD_IN);
                    ChildJvm p1 = sidecar(1, LINKERD_UID, linkerdSidecar, LINKERD_OUT, LINKERD_IN)) {
                MeshStats b = mesh();
                String seen = call(0, NodeBed.podAddress(1), trips);
                awaitClosed();
                MeshStats a = mesh();
                assertEquals(NodeBed.podAddress(1) + ":" + PORT, seen, "the application's getpeername");
                assertEquals(1, a.captured() - b.captured(), "the application's connect went to its proxy's 4140");
                assertEquals(1, a.inbound() - b.inbound(), "the proxy's connect went to pod 1's 4143");
                assertEquals(2, a.originalDestinations() - b.originalDestinations(), "each proxy was told");
                assertEveryLegRedirected(b, a, trips);
                MeshStats[] around = roundTripsTo(leftOut);
                assertEquals(0, around[1].captured() - around[0].captured(), "the connect to " + leftOut + " captured");
                assertEquals(0, around[1].inbound() - around[0].inbound(), "sent to pod 1's inbound port");
                assertTrue(p0.isAlive() && p1.isAlive(), p0.output() + p1.output());
            }
        } finally {
            for (int i = 0; i < 2; i++) {
                meshedAsLinkerd(i, false);
                bed.clearPodNat(i);
                bed.istioSidecarNat(i, PROXY_UID, OUT, IN);
            }
        }
        Await.until("pods 0 and 1 put as Istio's again", Duration.ofSeconds(Await.scaled(20)),
                () -> SockmapAdmin.of(pins).meshedPods().stream().filter(p -> p.proxyUid() == PROXY_UID
                        && p.inboundSkip().equals(SockmapAdmin.MeshedPod.ISTIO_INBOUND_SKIP)).count() == 2);
    }

    /**
     * Pod {@code i} as Linkerd's injector leaves it (its annotation, and a linkerd-init container
     * with {@link #LINKERD_INIT_ARGS}), or ({@code linkerd} false) as Istio's, with no init container.
     */
    void meshedAsLinkerd(int i, boolean linkerd) {
        client.pods().inNamespace("rag").withName("pod-" + i).edit(p -> linkerd
                ? new PodBuilder(p).editMetadata().removeFromAnnotations(MeshPods.ISTIO_SIDECAR)
                        .addToAnnotations(MeshPods.LINKERD_SIDECAR, "stable-2.14.10").endMetadata().editSpec()
                        .withInitContainers(List.of()).addNewInitContainer().withName("linkerd-init")
                        .withImage("proxy-init").withArgs(LINKERD_INIT_ARGS).endInitContainer().endSpec().build()
                : new PodBuilder(p).editMetadata().removeFromAnnotations(MeshPods.LINKERD_SIDECAR)
                        .addToAnnotations(MeshPods.ISTIO_SIDECAR, "{\"containers\":[\"istio-proxy\"]}").endMetadata()
                        .editSpec().withInitContainers(List.of()).endSpec().build());
    }

    /**
     * Pod 0's NAT leaves its connects to port {@code out} alone, pod 1's connections to its port
     * {@code in}, once {@code leaveOut} has told the agent so ({@code restore} takes it back).
     */
    void leftOutPortsAreFollowed(int out, int in, ThrowingRunnable leaveOut, ThrowingRunnable restore)
            throws Exception {
        awaitMeshed(2);
        bed.istioExcludePorts(0, List.of(out), List.of());
        bed.istioExcludePorts(1, List.of(), List.of(in));
        leaveOut.run();
        try {
            Await.until("the pods' left-out ports in the kernel", Duration.ofSeconds(Await.scaled(20)), () -> {
                List<SockmapAdmin.MeshedPod> m = SockmapAdmin.of(pins).meshedPods();
                return m.size() == 2 && m.stream().anyMatch(p -> p.outboundSkip().equals(List.of(out)))
                        && m.stream().anyMatch(p -> p.inboundSkip().contains(in));
            });
            try (ChildJvm p0 = sidecar(0); ChildJvm p1 = sidecar(1)) {
                for (int port : List.of(out, in)) {
                    MeshStats[] around = roundTripsTo(port);
                    assertEquals(port == out ? 0 : 1, around[1].captured() - around[0].captured(),
                            "the application's connect to " + port + " captured");
                    assertEquals(0, around[1].inbound() - around[0].inbound(), "sent to pod 1's inbound port, for "
                            + port);
                }
                assertTrue(p0.isAlive() && p1.isAlive(), p0.output() + p1.output());
            }
        } finally {
            restore.run();
        }
        Await.until("the pods' left-out ports back to the agent's", Duration.ofSeconds(Await.scaled(20)),
                () -> SockmapAdmin.of(pins).meshedPods().stream().allMatch(p -> p.outboundSkip().isEmpty()
                        && p.inboundSkip().equals(SockmapAdmin.MeshedPod.ISTIO_INBOUND_SKIP)));
    }

    /** A step of a test that may throw. */
    interface ThrowingRunnable {
        void run() throws Exception;
    }

    /**
     * Gives pod {@code i} an istio-init container with the arguments Istio's injector writes by
     * default and {@code more} after them (none: takes the container away, the pod then read from
     * its annotations and the agent's shape again).
     */
    void istioInit(int i, String... more) {
        List<String> args = new ArrayList<>(List.of("istio-iptables", "-p", Integer.toString(OUT), "-z",
                Integer.toString(IN), "-u", Integer.toString(PROXY_UID), "-m", "REDIRECT", "-i", "*", "-x", "", "-b",
                "*", "-d", "15090,15021,15020"));
        args.addAll(List.of(more));
        client.pods().inNamespace("rag").withName("pod-" + i).edit(p -> more.length == 0
                ? new PodBuilder(p).editSpec().withInitContainers(List.of()).endSpec().build()
                : new PodBuilder(p).editSpec().withInitContainers(List.of()).addNewInitContainer()
                        .withName("istio-init").withImage("proxyv2").withArgs(args).endInitContainer().endSpec().build());
    }

    /**
     * The agent stopped while a meshed call runs: the call completes (its connections keep their
     * redirect), the pods are taken out, and the next call goes through the pods' NAT rules and
     * their sidecars by TCP. Started again, it meshes them again.
     */
    @Test
    @Order(11)
    void theAgentStoppedMidCallLosesNothingAndTheNatCarriesOn() throws Exception {
        awaitMeshed(2);
        try {
            long captured = callAcross(() -> {
                agent.terminate();
                assertEquals(0, agent.waitFor(30), agent.output());
            }, () -> assertEquals(List.of(), SockmapAdmin.of(pins).meshedPods(), "the stopped agent took its pods out"));
            assertEquals(0, captured, "the pod's NAT carried the next call");
        } finally {
            startAgent();
        }
        awaitMeshed(2);
    }

    /**
     * The agent killed while a meshed call runs: the kernel goes on without it (the call completes,
     * the next call is still captured), and a new agent takes the pods over.
     */
    @Test
    @Order(12)
    void theAgentKilledMidCallLosesNothingAndTheKernelCarriesOn() throws Exception {
        awaitMeshed(2);
        try {
            long captured = callAcross(agent::kill, () -> assertEquals(2, SockmapAdmin.of(pins).meshedPods().size(),
                    "the kernel's meshed pods stay"));
            assertEquals(1, captured, "still captured without an agent");
        } finally {
            startAgent();
        }
        awaitMeshed(2);
    }

    /** What happens to the agent mid-call. */
    interface Step {
        void run() throws Exception;
    }

    /**
     * With both sidecars up, a call of 30,000 round trips across {@code midCall} (done once it is
     * connected), which must complete; then {@code after}, then a call of 100; returns how many
     * connects that last call had captured.
     */
    long callAcross(Step midCall, Step after) throws Exception {
        try (ChildJvm p0 = sidecar(0); ChildJvm p1 = sidecar(1)) {
            try (ChildJvm server = inPod(1, "pp-server", NodeBed.podAddress(1), Integer.toString(PORT))) {
                server.expect("port=", 30);
                try (ChildJvm c = inPod(0, "pp-client", NodeBed.podAddress(1), Integer.toString(PORT), "30000",
                        "64")) {
                    c.expect("peer=", 30);
                    midCall.run();
                    assertEquals("1", c.expect("ok=", 120), "every round trip of the open call: " + c.output());
                }
                assertEquals("1", server.expect("ok=", 30), server.output());
            }
            after.run();
            MeshStats before = mesh();
            call(0, NodeBed.podAddress(1), 100);
            assertTrue(p0.isAlive() && p1.isAlive(), p0.output() + p1.output());
            return mesh().captured() - before.captured();
        }
    }
}
