package io.github.sockmap4j.netty.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.testbed.Await;
import io.github.sockmap4j.testbed.ChildJvm;
import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapStats;
import io.github.sockmap4j.testbed.Cgroup2;
import io.github.sockmap4j.agent.NodeAgent;
import io.github.sockmap4j.admin.SockmapAdmin;
import io.github.sockmap4j.testbed.NodeBed;
import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.ServerServiceDefinition;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ServerCalls;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * gRPC-Java with {@link SockmapGrpc} on both sides, each in a pod of the node-shaped bed (two
 * JVMs, each in its pod's network namespace, under a node agent), the client dialing a Service
 * VIP that the Service map sends to the server's pod: the calls' bytes are redirected and the
 * client's channel sees the VIP as its peer.
 */
@Tag("kernel")
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class GrpcServiceVipTest {
    static final String VIP = "10.96.0.50";
    static final int PORT = 46450;
    static final int CALLS = 2_000;

    /** A child JVM in a pod: {@code server BIND PORT} serves the echo until stdin closes; {@code client VIP PORT N}. */
    public static final class Peer {
        public static void main(String[] args) throws Exception {
            if (args[0].equals("server")) {
                Server server = SockmapGrpc.configure(NettyServerBuilder.forAddress(new InetSocketAddress(
                        InetAddress.ofLiteral(args[1]), Integer.parseInt(args[2])))).addService(
                        ServerServiceDefinition.builder("sockmap4j.Echo").addMethod(GrpcFastPathTest.UNARY,
                                ServerCalls.asyncUnaryCall((req, out) -> {
                                    out.onNext(req);
                                    out.onCompleted();
                                })).build()).build().start();
                System.out.println("listening=1");
                System.in.read(); // until the test closes stdin
                server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
            } else {
                ManagedChannel ch = SockmapGrpc.configure(NettyChannelBuilder.forAddress(args[1],
                        Integer.parseInt(args[2]))).usePlaintext().build();
                try {
                    byte[] req = new byte[1024];
                    for (int i = 0, n = Integer.parseInt(args[3]); i < n; i++) {
                        Arrays.fill(req, (byte) i);
                        byte[] got = ClientCalls.blockingUnaryCall(ch, GrpcFastPathTest.UNARY, CallOptions.DEFAULT, req);
                        if (!Arrays.equals(req, got)) {
                            System.out.println("error=echo " + i);
                            return;
                        }
                    }
                    System.out.println("active=" + Sockmap.global().isActive());
                    System.out.println("ok=1");
                } finally {
                    ch.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
                }
            }
        }
    }

    static List<String> peer(Path pins, Path cgroup, String... args) {
        List<String> cmd = new ArrayList<>(ChildJvm.javaCommand(Peer.class, args));
        cmd.addAll(1, List.of("-Dsockmap4j.pinDir=" + pins, "-Dsockmap4j.cgroup=" + cgroup, "-Dsockmap4j.require=true",
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"));
        return cmd;
    }

    @Test
    void aGrpcClientDialingAServiceVipIsRedirectedToTheServersPod() throws Exception {
        Path cgroup = Cgroup2.create("grpcvip");
        Path pins = Path.of("/sys/fs/bpf").resolve(Cgroup2.uniqueName("grpcvip"));
        try (NodeBed bed = NodeBed.create("gv", 2)) {
            bed.service(VIP, PORT, NodeBed.podAddress(1) + ":" + PORT);
            try (NodeAgent agent = NodeAgent.start(new NodeAgent.Options(pins, List.of(cgroup), null, 65535, false))) {
                assertTrue(agent.isReady(), "the agent serves");
                SockmapAdmin.of(pins).putService(new SockmapAdmin.Service(new InetSocketAddress(InetAddress.ofLiteral(VIP),
                        PORT), List.of(new InetSocketAddress(InetAddress.ofLiteral(NodeBed.podAddress(1)), PORT)),
                        List.of(), false));
                SockmapStats before = SockmapAdmin.of(pins).stats();
                try (ChildJvm server = ChildJvm.startInCgroup(cgroup, NodeBed.inNetwork(bed.pod(1), peer(pins, cgroup,
                        "server", NodeBed.podAddress(1), Integer.toString(PORT))))) {
                    server.expect("listening=", 60);
                    try (ChildJvm client = ChildJvm.startInCgroup(cgroup, NodeBed.inNetwork(bed.pod(0), peer(pins, cgroup,
                            "client", VIP, Integer.toString(PORT), Integer.toString(CALLS))))) {
                        assertEquals("true", client.expect("active=", 120), client.output());
                        assertEquals("1", client.expect("ok=", 30), client.output());
                    }
                    server.closeInput();
                    assertEquals(0, server.waitFor(30), server.output());
                }
                SockmapStats after = SockmapAdmin.of(pins).stats();
                long redirected = after.bytesRedirected() - before.bytesRedirected();
                long tcp = after.bytesPassed() - before.bytesPassed();
                System.out.printf(Locale.ROOT, "gRPC over the VIP %s: %d calls of 1 KiB, %d B redirected, %d B by TCP, "
                        + "%d connect(s) translated%n", VIP, CALLS, redirected, tcp,
                        after.servicesTranslated() - before.servicesTranslated());
                assertTrue(after.servicesTranslated() - before.servicesTranslated() >= 1, "the connect was translated");
                assertTrue(redirected >= 0.99 * (redirected + tcp) && redirected > 2L * CALLS * 1024,
                        "at least 99% of the bytes redirected: " + redirected + " of " + (redirected + tcp));
            } finally {
                SockmapAdmin.of(pins).removePins();
            }
        } finally {
            Await.until("the pods' JVMs left " + cgroup, () -> Files.readString(cgroup.resolve("cgroup.procs")).isBlank());
            Files.delete(cgroup);
        }
    }
}
