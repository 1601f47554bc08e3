package io.github.sockmap4j.netty.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.colocated.grpc.ColocatedGrpc;
import io.github.sockmap4j.colocated.grpc.Fallback;
import io.github.sockmap4j.testbed.Await;
import io.github.sockmap4j.testbed.ChildJvm;
import io.github.sockmap4j.testbed.Sh;
import io.github.sockmap4j.testbed.VethPods;
import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The fallback matrix of the co-located transport that needs processes of their own: the switch
 * off, a server whose hand-over another network namespace cannot reach (two pods), a client of
 * another user. Each stays on HTTP/2, every call answered, and says why: counted by reason (what
 * {@code stats}, the metrics and JFR show) with its words. (A server that is not ours and a proxy
 * between the ends are {@code AgreementTest}'s.)
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@Tag("kernel")
class ColocatedFallbackTest {
    private final List<AutoCloseable> cleanup = new ArrayList<>();

    @AfterEach
    void tearDown() throws Exception {
        for (int i = cleanup.size() - 1; i >= 0; i--) {
            cleanup.get(i).close();
        }
    }

    private static ServerInterceptor counting(AtomicInteger colocated, AtomicInteger all) {
        return new ServerInterceptor() {
            @Override
            public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
                                                              ServerCallHandler<Q, R> next) {
                all.incrementAndGet();
                if (Boolean.TRUE.equals(call.getAttributes().get(ColocatedGrpc.TRANSPORT_ATTR_COLOCATED))) {
                    colocated.incrementAndGet();
                }
                return next.startCall(call, headers);
            }
        };
    }

    private Server serve(Server s) {
        cleanup.add(() -> {
            s.shutdownNow();
            assertTrue(s.awaitTermination(10, TimeUnit.SECONDS), "the server terminates");
        });
        return s;
    }

    @Test
    void withTheSwitchOffCallsStayOnHttp2AndSayWhy() throws Exception {
        String set = System.getProperty(ColocatedGrpc.SWITCH);
        System.setProperty(ColocatedGrpc.SWITCH, "false"); // the one switch: on by default
        cleanup.add(() -> {
            if (set == null) {
                System.clearProperty(ColocatedGrpc.SWITCH);
            } else {
                System.setProperty(ColocatedGrpc.SWITCH, set);
            }
        });
        long off = ColocatedGrpc.fallbacks().get(Fallback.OFF);
        long upgrades = ColocatedGrpc.upgrades();
        AtomicInteger colocated = new AtomicInteger();
        AtomicInteger all = new AtomicInteger();
        Server s = serve(SockmapGrpc.configure(NettyServerBuilder.forAddress(
                        new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)))
                .addService(ColocatedPeer.service(x -> { })).intercept(counting(colocated, all)).build().start());
        ManagedChannel ch = SockmapGrpc.configure(NettyChannelBuilder.forAddress("127.0.0.1", s.getPort()))
                .usePlaintext().build();
        cleanup.add(() -> ch.shutdownNow().awaitTermination(10, TimeUnit.SECONDS));
        for (int i = 0; i < 50; i++) {
            byte[] m = new byte[] {(byte) i};
            assertEquals(m[0], ClientCalls.blockingUnaryCall(ch, ColocatedPeer.ECHO,
                    CallOptions.DEFAULT.withDeadlineAfter(10, TimeUnit.SECONDS), m)[0]);
        }
        assertEquals(50, all.get(), "every call reached the server, and only those: no agreement was asked for");
        assertEquals(0, colocated.get(), "none came co-located");
        assertEquals(upgrades, ColocatedGrpc.upgrades());
        assertEquals(off + 2, ColocatedGrpc.fallbacks().get(Fallback.OFF), "the server and the channel said OFF");
        assertTrue(ColocatedGrpc.lastFallback(Fallback.OFF).contains("-D" + ColocatedGrpc.SWITCH + " off"),
                ColocatedGrpc.lastFallback(Fallback.OFF));
    }

    /**
     * Two pods of one node (network namespaces joined by a veth pair): the client reaches the
     * server by TCP, not the server's hand-over (an abstract Unix socket of the server's
     * namespace), and says NO_BROKER.
     */
    @Test
    void aServerInAnotherPodHasNoBrokerTheClientCanReach() throws Exception {
        VethPods pods = VethPods.create("cf", "10.231.7.1", "10.231.7.2");
        cleanup.add(pods);
        ChildJvm server = ChildJvm.start(Sh.in(pods.nsA, ChildJvm.javaCommand(ColocatedPeer.class, "server-at", pods.addrA)));
        cleanup.add(server);
        String port = server.expect("PORT ", 30);
        ChildJvm client = ChildJvm.start(Sh.in(pods.nsB, ChildJvm.javaCommand(ColocatedPeer.class, "fallback-client",
                pods.addrA, port)));
        cleanup.add(client);
        String why = client.expect("FALLBACK ", 60);
        assertTrue(why.startsWith(Fallback.NO_BROKER.name()), why);
        assertEquals("20", client.expect("CALLS OK ", 30), "every call after the fallback answered over HTTP/2");
        assertEquals("0", client.expect("UPGRADES ", 10));
        assertEquals(0, client.waitFor(30), client.output());
    }

    /** {@code command} (a java command) with {@code flag} before its class path. */
    private static List<String> withFlag(List<String> command, String flag) {
        List<String> c = new ArrayList<>(command);
        c.add(1, flag);
        return c;
    }

    private static List<String> namesIn(Path dir) throws java.io.IOException {
        try (java.util.stream.Stream<Path> s = Files.list(dir)) {
            return s.map(p -> p.getFileName().toString()).sorted().toList();
        }
    }

    /**
     * Two pods of one node given one broker directory ({@code -Dsockmap4j.colocated.brokerDir},
     * as pods that mount one directory): the client reaches the server's hand-over there and its
     * calls go co-located. The server's socket and lock are removed as it exits; those of one
     * killed with SIGKILL stay until the next listener's sweep, which finds their lock free.
     */
    @Test
    void aServerInAnotherPodIsReachedThroughADirectoryBothMount() throws Exception {
        VethPods pods = VethPods.create("cb", "10.231.9.1", "10.231.9.2");
        cleanup.add(pods);
        Path parent = Files.createTempDirectory("sm4j-broker-pods");
        Path dir = parent.resolve("broker");
        cleanup.add(() -> {
            for (Path p : Files.exists(dir) ? namesIn(dir).stream().map(dir::resolve).toList() : List.<Path>of()) {
                Files.delete(p);
            }
            Files.deleteIfExists(dir);
            Files.delete(parent);
        });
        String flag = "-D" + ColocatedGrpc.BROKER_DIR + "=" + dir;
        for (boolean killed : new boolean[] {false, true}) {
            ChildJvm server = ChildJvm.start(Sh.in(pods.nsA, withFlag(ChildJvm.javaCommand(ColocatedPeer.class,
                    "server-at", pods.addrA), flag)));
            cleanup.add(server);
            String port = server.expect("PORT ", 30);
            ChildJvm client = ChildJvm.start(Sh.in(pods.nsB, withFlag(ChildJvm.javaCommand(ColocatedPeer.class,
                    "fallback-client", pods.addrA, port), flag)));
            cleanup.add(client);
            assertEquals("20", client.expect("CALLS OK ", 60), client.output());
            assertEquals("1", client.expect("UPGRADES ", 10), "the client made a co-located connection: "
                    + client.output());
            assertEquals(0, client.waitFor(30), client.output());
            List<String> names = namesIn(dir);
            assertEquals(2, names.size(), "the server's socket and lock: " + names);
            if (killed) {
                server.kill();
                assertEquals(names, namesIn(dir), "a killed server leaves them");
                assertEquals(1, io.github.sockmap4j.colocated.BrokerDirectory.of(dir).sweep(), "its lock is free");
            } else {
                server.terminate();
                server.waitFor(30);
            }
            assertEquals(List.of(), namesIn(dir), "nothing of the server is left in the directory");
        }
    }

    /** A client that runs as another user than the server: the server's hand-over refuses it, and both say NOT_ALLOWED. */
    @Test
    void aClientOfAnotherUserIsNotAllowedToShare() throws Exception {
        System.setProperty(ColocatedGrpc.SWITCH, "true");
        Server s;
        try {
            s = serve(ColocatedGrpc.configure(NettyServerBuilder.forAddress(
                            new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)))
                    .addService(ColocatedPeer.service(x -> { })).build().start());
        } finally {
            System.clearProperty(ColocatedGrpc.SWITCH);
        }
        long refusedHere = ColocatedGrpc.fallbacks().get(Fallback.NOT_ALLOWED);
        ChildJvm client = ChildJvm.startAsUser(65534, ChildJvm.javaCommand(ColocatedPeer.class, "fallback-client",
                "127.0.0.1", Integer.toString(s.getPort())));
        cleanup.add(client);
        String why = client.expect("FALLBACK ", 60);
        assertTrue(why.startsWith(Fallback.NOT_ALLOWED.name()), why);
        assertEquals("20", client.expect("CALLS OK ", 30), "every call after the fallback answered over HTTP/2");
        assertEquals("0", client.expect("UPGRADES ", 10));
        Await.until("the server counted its refusal", () -> ColocatedGrpc.fallbacks().get(Fallback.NOT_ALLOWED) > refusedHere);
        assertNotNull(ColocatedGrpc.lastFallback(Fallback.NOT_ALLOWED));
        assertEquals(0, client.waitFor(30), client.output());
    }
}
