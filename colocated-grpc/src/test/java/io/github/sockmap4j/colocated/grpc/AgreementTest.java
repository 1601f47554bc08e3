package io.github.sockmap4j.colocated.grpc;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.grpc.CallOptions;
import io.grpc.Grpc;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ServerCalls;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The agreement between a Netty server and channel over TCP loopback (no root: neither the rings
 * nor the agreement need the fast path): calls move to a co-located connection and still meet the
 * server's interceptors with their TCP connection's addresses; a server without it, a proxy in
 * between and a hand-over nobody listens at each leave the calls on HTTP/2 with their reason; the
 * co-located connection ends with its TCP connection; nothing is left once both ends shut down.
 */
class AgreementTest {
    private static final MethodDescriptor<byte[], byte[]> ECHO = ColocatedGrpcTest.ECHO;
    private static final Metadata.Key<String> TEXT = ColocatedGrpcTest.TEXT;
    private final List<Runnable> cleanup = new ArrayList<>();
    /** Each call the server's interceptor saw: over a co-located connection, and from where. */
    private final List<Seen> seen = new CopyOnWriteArrayList<>();
    /** The answers of calls to HANG, held until a test gives them. */
    private final java.util.concurrent.BlockingQueue<Runnable> held = new java.util.concurrent.LinkedBlockingQueue<>();

    record Seen(boolean colocated, SocketAddress remote) {
    }

    @AfterEach
    void tearDown() throws InterruptedException {
        for (int i = cleanup.size() - 1; i >= 0; i--) {
            cleanup.get(i).run();
        }
        waitFor(() -> Thread.getAllStackTraces().keySet().stream()
                .noneMatch(t -> t.getName().startsWith("sockmap4j-colocated-agreed")), "the co-located readers end");
    }

    private ServerServiceDefinition echo() {
        return ServerServiceDefinition.builder("test.Colocated")
                .addMethod(ECHO, ServerCalls.asyncUnaryCall((req, out) -> {
                    out.onNext(req);
                    out.onCompleted();
                }))
                .addMethod(ColocatedGrpcTest.FAIL, ServerCalls.asyncUnaryCall((req, out) ->
                        out.onError(Status.FAILED_PRECONDITION.withDescription("as asked").asRuntimeException())))
                .addMethod(ColocatedGrpcTest.HANG, ServerCalls.asyncUnaryCall((req, out) -> held.add(() -> {
                    out.onNext(req);
                    out.onCompleted();
                })))
                .build();
    }

    private final ServerInterceptor recording = new ServerInterceptor() {
        @Override
        public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
                                                          ServerCallHandler<Q, R> next) {
            seen.add(new Seen(Boolean.TRUE.equals(call.getAttributes().get(ColocatedGrpc.TRANSPORT_ATTR_COLOCATED)),
                    call.getAttributes().get(Grpc.TRANSPORT_ATTR_REMOTE_ADDR)));
            return next.startCall(call, headers);
        }
    };

    private Server server(boolean agree, NettyServerBuilder b) throws IOException {
        b.addService(echo()).intercept(recording);
        Server s = (agree ? ColocatedGrpc.configure(b) : b).build().start();
        cleanup.add(() -> {
            s.shutdownNow();
            try {
                assertTrue(s.awaitTermination(10, TimeUnit.SECONDS), () -> "the server terminates; its threads:\n" + threads());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        return s;
    }

    /** The stacks of the transports' and gRPC's threads: what a server that does not terminate waits for. */
    static String threads() {
        StringBuilder out = new StringBuilder();
        Thread.getAllStackTraces().forEach((t, stack) -> {
            if (t.getName().startsWith("sockmap4j") || t.getName().startsWith("grpc")) {
                out.append(t.getName()).append(' ').append(t.getState()).append('\n');
                for (StackTraceElement e : stack) {
                    out.append("    at ").append(e).append('\n');
                }
            }
        });
        return out.toString();
    }

    private Server server(boolean agree) throws IOException {
        return server(agree, NettyServerBuilder.forAddress(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)));
    }

    private ManagedChannel channel(int port) {
        return channel(port, b -> { });
    }

    private ManagedChannel channel(int port, java.util.function.Consumer<NettyChannelBuilder> settings) {
        NettyChannelBuilder b = ColocatedGrpc.configure(NettyChannelBuilder.forAddress("127.0.0.1", port)).usePlaintext();
        settings.accept(b); // after configure, as a user sets what the builder is for
        return closedAfter(b.build());
    }

    /** {@code ch}, shut down after the test (it must terminate). */
    private ManagedChannel closedAfter(ManagedChannel ch) {
        cleanup.add(() -> {
            ch.shutdownNow();
            try {
                assertTrue(ch.awaitTermination(10, TimeUnit.SECONDS), "the channel terminates");
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        return ch;
    }

    private static byte[] call(ManagedChannel ch, String text) {
        return ClientCalls.blockingUnaryCall(ch, ECHO, CallOptions.DEFAULT.withDeadlineAfter(10, TimeUnit.SECONDS),
                text.getBytes(StandardCharsets.UTF_8));
    }

    private static void waitFor(BooleanSupplier condition, String what) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!condition.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, "timed out waiting until " + what);
            Thread.sleep(5);
        }
    }

    /** Calls until one arrives over a co-located connection (each a real call, at most 20 s of them). */
    private void callUntilColocated(ManagedChannel ch) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        int before = seen.size();
        while (seen.subList(before, seen.size()).stream().noneMatch(Seen::colocated)) {
            assertTrue(System.nanoTime() < deadline, "no call went over a co-located connection; fallbacks: "
                    + ColocatedGrpc.fallbacks() + ", last: " + lastWords());
            assertArrayEquals("x".getBytes(StandardCharsets.UTF_8), call(ch, "x"));
        }
    }

    private static String lastWords() {
        StringBuilder b = new StringBuilder();
        for (Fallback f : Fallback.values()) {
            if (ColocatedGrpc.lastFallback(f) != null) {
                b.append(f).append(": ").append(ColocatedGrpc.lastFallback(f)).append("; ");
            }
        }
        return b.toString();
    }

    @Test
    void callsMoveToAColocatedConnectionAndStillMeetTheServersInterceptors() throws Exception {
        Server s = server(true);
        ManagedChannel ch = channel(s.getPort());
        long upgrades = ColocatedGrpc.upgrades();
        callUntilColocated(ch);
        assertTrue(ColocatedGrpc.upgrades() >= upgrades + 2, "both ends counted the upgrade");
        SocketAddress tcpClient = seen.get(0).remote();
        assertFalse(seen.get(0).colocated(), "the first call goes over HTTP/2 while the ends agree");
        int before = seen.size();
        for (int i = 0; i < 200; i++) {
            assertEquals("m" + i, new String(call(ch, "m" + i), StandardCharsets.UTF_8));
        }
        List<Seen> after = seen.subList(before, seen.size());
        assertEquals(200, after.size(), "the server's interceptor saw every call");
        assertTrue(after.stream().allMatch(Seen::colocated), "every call after the upgrade is co-located");
        assertTrue(after.stream().allMatch(x -> tcpClient.equals(x.remote())),
                "a co-located call carries its TCP connection's address: " + after.get(0).remote() + " vs " + tcpClient);
        // status and trailers as over HTTP/2
        io.grpc.StatusRuntimeException e = org.junit.jupiter.api.Assertions.assertThrows(
                io.grpc.StatusRuntimeException.class, () -> ClientCalls.blockingUnaryCall(ch, ColocatedGrpcTest.FAIL,
                        CallOptions.DEFAULT.withDeadlineAfter(10, TimeUnit.SECONDS), new byte[1]));
        assertEquals(Status.Code.FAILED_PRECONDITION, e.getStatus().getCode());
        assertEquals("as asked", e.getStatus().getDescription());
    }

    /** The thread a co-located async call's response callback runs on. */
    private String callbackThread(ManagedChannel ch) throws Exception {
        int before = seen.size();
        java.util.concurrent.CompletableFuture<String> where = new java.util.concurrent.CompletableFuture<>();
        ClientCalls.asyncUnaryCall(ch.newCall(ECHO, CallOptions.DEFAULT.withDeadlineAfter(10, TimeUnit.SECONDS)),
                new byte[] {1}, new io.grpc.stub.StreamObserver<>() {
                    @Override
                    public void onNext(byte[] value) {
                        where.complete(Thread.currentThread().getName());
                    }

                    @Override
                    public void onError(Throwable t) {
                        where.completeExceptionally(t);
                    }

                    @Override
                    public void onCompleted() {
                    }
                });
        String name = where.get(10, TimeUnit.SECONDS);
        assertTrue(seen.get(before).colocated(), "the call went co-located");
        return name;
    }

    @Test
    void aColocatedConnectionKeepsTheChannelsExecutorAndLimits() throws Exception {
        Server s = server(true, NettyServerBuilder.forAddress(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0))
                .maxInboundMessageSize(16 << 20));
        java.util.concurrent.ExecutorService own = java.util.concurrent.Executors.newFixedThreadPool(2,
                r -> Thread.ofPlatform().daemon().name("the-channels-own-executor").unstarted(r));
        cleanup.add(own::shutdownNow);
        ManagedChannel pooled = channel(s.getPort(), b -> b.executor(own).maxInboundMessageSize(16 << 20));
        callUntilColocated(pooled);
        assertEquals("the-channels-own-executor", callbackThread(pooled), "callbacks on the channel's own executor");
        // larger than gRPC's default limit of 4 MiB, within the channel's own
        byte[] large = new byte[6 << 20];
        new java.util.Random(7).nextBytes(large);
        int before = seen.size();
        assertArrayEquals(large, ClientCalls.blockingUnaryCall(pooled, ECHO,
                CallOptions.DEFAULT.withDeadlineAfter(20, TimeUnit.SECONDS), large));
        assertTrue(seen.get(before).colocated(), "the large call went co-located");

        ManagedChannel direct = channel(s.getPort(), NettyChannelBuilder::directExecutor);
        callUntilColocated(direct);
        String reader = callbackThread(direct);
        assertTrue(reader.startsWith("sockmap4j-colocated-"),
                "a direct channel's callbacks run on the thread that read them, its co-located reader: " + reader);
    }

    @Test
    void anAgreementStartedByACallInAContextThatEndsStillCompletes() throws Exception {
        Server s = server(true);
        ManagedChannel ch = channel(s.getPort());
        long failed = ColocatedGrpc.fallbacks().get(Fallback.FAILED);
        long upgrades = ColocatedGrpc.upgrades();
        // as a handler calling downstream does: the first call (which starts the agreement) runs in its
        // request's context, and that context is cancelled as soon as the call returns
        io.grpc.Context.CancellableContext request = io.grpc.Context.current().withCancellation();
        request.run(() -> call(ch, "from a handler"));
        request.cancel(null);
        waitFor(() -> ColocatedGrpc.upgrades() >= upgrades + 2, "both ends count the upgrade");
        assertEquals(failed, ColocatedGrpc.fallbacks().get(Fallback.FAILED),
                "no agreement failed: " + ColocatedGrpc.lastFallback(Fallback.FAILED));
    }

    @Test
    void aServerWithoutTheAgreementKeepsTheCallsOnHttp2AndSaysWhy() throws Exception {
        Server s = server(false);
        ManagedChannel ch = channel(s.getPort());
        long notOurs = ColocatedGrpc.fallbacks().get(Fallback.NOT_OURS);
        java.nio.file.Path jfr = java.nio.file.Files.createTempFile("sm4j-agreement", ".jfr");
        cleanup.add(() -> jfr.toFile().delete());
        try (jdk.jfr.Recording recording = new jdk.jfr.Recording()) {
            recording.enable("io.github.sockmap4j.ColocatedAgreement");
            recording.start();
            for (int i = 0; i < 20; i++) {
                call(ch, "plain " + i);
            }
            waitFor(() -> ColocatedGrpc.fallbacks().get(Fallback.NOT_OURS) > notOurs, "the fallback is counted");
            recording.stop();
            recording.dump(jfr);
        }
        assertTrue(jdk.jfr.consumer.RecordingFile.readAllEvents(jfr).stream()
                .anyMatch(e -> e.getEventType().getName().equals("io.github.sockmap4j.ColocatedAgreement")
                        && "NOT_OURS".equals(e.getString("outcome"))), "JFR has the fallback with its reason");
        for (int i = 0; i < 20; i++) {
            call(ch, "plain again " + i);
        }
        assertTrue(seen.stream().noneMatch(Seen::colocated), "no call went co-located");
        assertTrue(ColocatedGrpc.lastFallback(Fallback.NOT_OURS).contains("UNIMPLEMENTED"),
                ColocatedGrpc.lastFallback(Fallback.NOT_OURS));
    }

    /**
     * A broker directory named at both ends ({@link ColocatedGrpc#BROKER_DIR}), as two pods that
     * mount one directory are given: made where missing, with this user's mode only; nothing of it
     * left once the directory is left (a process leaves it as it exits). Returns the directory.
     */
    private java.nio.file.Path brokerDirectory() throws IOException {
        java.nio.file.Path parent = java.nio.file.Files.createTempDirectory("sm4j-agree-broker");
        java.nio.file.Path dir = parent.resolve("broker");
        System.setProperty(ColocatedGrpc.BROKER_DIR, dir.toString());
        cleanup.add(() -> {
            System.clearProperty(ColocatedGrpc.BROKER_DIR);
            Acceptor.Broker.leave(dir.toString());
            try {
                try (java.util.stream.Stream<java.nio.file.Path> left = java.nio.file.Files.list(dir)) {
                    assertEquals(List.of(), left.toList(), "the hand-over's socket and lock were removed");
                }
                java.nio.file.Files.delete(dir);
                java.nio.file.Files.delete(parent);
            } catch (IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        });
        return dir;
    }

    private static List<String> namesIn(java.nio.file.Path dir) throws IOException {
        try (java.util.stream.Stream<java.nio.file.Path> s = java.nio.file.Files.list(dir)) {
            return s.map(p -> p.getFileName().toString()).sorted().toList();
        }
    }

    @Test
    void withABrokerDirectoryTheHandOverListensThereToo() throws Exception {
        java.nio.file.Path dir = brokerDirectory();
        Server s = server(true);
        ManagedChannel ch = channel(s.getPort());
        callUntilColocated(ch);
        List<String> names = namesIn(dir);
        assertEquals(2, names.size(), names.toString());
        assertTrue(names.get(0).startsWith("sockmap4j-colocated-") && names.get(0).endsWith(".lock"), names.toString());
        assertEquals(names.get(0).replace(".lock", ".sock"), names.get(1));
        assertEquals("rwx------", java.nio.file.attribute.PosixFilePermissions.toString(
                java.nio.file.Files.getPosixFilePermissions(dir)));
        // someone removes the socket: the next agreement finds it gone and listens there again
        java.nio.file.Files.delete(dir.resolve(names.get(1)));
        callUntilColocated(channel(s.getPort()));
        assertEquals(names, namesIn(dir), "the socket is back, with its lock");
    }

    /**
     * Someone who can write into the broker directory puts a socket of its own in the hand-over's
     * place: the channel offers there first, the impostor cannot prove the connection's nonce and
     * gets no descriptor, and the channel's calls stay on HTTP/2, saying why.
     */
    @Test
    void aSocketPutInTheHandOversPlaceGetsNoRegionAndTheCallsStayOnHttp2() throws Exception {
        java.nio.file.Path dir = brokerDirectory();
        Server s = server(true);
        callUntilColocated(channel(s.getPort())); // the server's hand-over listens in the directory now
        java.nio.file.Path socket = dir.resolve(namesIn(dir).get(1));
        java.nio.file.Files.delete(socket);
        io.github.sockmap4j.linux.net.UnixListener impostor = io.github.sockmap4j.linux.net.UnixListener.listen(socket);
        java.util.concurrent.CompletableFuture<Integer> descriptors = java.util.concurrent.CompletableFuture.supplyAsync(
                () -> {
                    try (io.github.sockmap4j.linux.net.UnixListener.Connection c = impostor.accept()) {
                        c.readLine(256);
                        c.writeLine("PROOF " + "00".repeat(32));
                        try {
                            int[] fds = c.readLineAndFds(256, 10_000, 3).fds();
                            for (int fd : fds) {
                                io.github.sockmap4j.linux.ffi.LibC.close(fd);
                            }
                            return fds.length;
                        } catch (IOException hungUp) {
                            return 0;
                        }
                    } catch (IOException e) {
                        throw new java.io.UncheckedIOException(e);
                    }
                });
        cleanup.add(() -> {
            impostor.close(); // removes its socket file too, before the directory is looked at
            descriptors.cancel(true);
        });
        long failed = ColocatedGrpc.fallbacks().get(Fallback.FAILED);
        ManagedChannel ch = channel(s.getPort());
        int before = seen.size();
        for (int i = 0; i < 20; i++) {
            assertEquals("after " + i, new String(call(ch, "after " + i), StandardCharsets.UTF_8));
        }
        waitFor(() -> ColocatedGrpc.fallbacks().get(Fallback.FAILED) > failed, "the fallback is counted");
        assertEquals(0, descriptors.get(10, TimeUnit.SECONDS), "the impostor got no descriptor");
        assertTrue(ColocatedGrpc.lastFallback(Fallback.FAILED).contains("is not the other end"),
                ColocatedGrpc.lastFallback(Fallback.FAILED));
        for (int i = 0; i < 20; i++) {
            call(ch, "again " + i);
        }
        assertTrue(seen.subList(before, seen.size()).stream().noneMatch(Seen::colocated), "no call went co-located");
    }

    @Test
    void theSwitchIsOnUnlessSetFalse() {
        String set = System.getProperty(ColocatedGrpc.SWITCH);
        try {
            System.clearProperty(ColocatedGrpc.SWITCH);
            assertTrue(ColocatedGrpc.enabled(), "on by default");
            System.setProperty(ColocatedGrpc.SWITCH, "false");
            assertFalse(ColocatedGrpc.enabled());
            System.setProperty(ColocatedGrpc.SWITCH, "true");
            assertTrue(ColocatedGrpc.enabled());
        } finally {
            if (set == null) {
                System.clearProperty(ColocatedGrpc.SWITCH);
            } else {
                System.setProperty(ColocatedGrpc.SWITCH, set);
            }
        }
    }

    @Test
    void aChannelWhoseBuilderNamesABalancerKeepsItsCallsOnHttp2AndSaysWhy() throws Exception {
        Server s = server(true);
        long balanced = ColocatedGrpc.fallbacks().get(Fallback.BALANCED);
        ManagedChannel ch = channel(s.getPort(), b -> b.defaultLoadBalancingPolicy("round_robin"));
        for (int i = 0; i < 20; i++) {
            call(ch, "balanced " + i);
        }
        waitFor(() -> ColocatedGrpc.fallbacks().get(Fallback.BALANCED) > balanced, "the fallback is counted");
        for (int i = 0; i < 20; i++) {
            call(ch, "balanced again " + i);
        }
        assertEquals(40, seen.size(), "only the calls reached the server: no agreement was asked for");
        assertTrue(seen.stream().noneMatch(Seen::colocated), "no call went co-located: " + seen);
        assertTrue(ColocatedGrpc.lastFallback(Fallback.BALANCED).contains("'round_robin'"),
                ColocatedGrpc.lastFallback(Fallback.BALANCED));
    }

    @Test
    void aBalancerIsReadFromTheBuildersPolicyAndServiceConfig() throws Exception {
        assertEquals(null, ChannelSettings.balancer(null, null), "gRPC's default, pick_first");
        assertEquals(null, ChannelSettings.balancer("pick_first", null));
        assertEquals("round_robin", ChannelSettings.balancer("round_robin", null));
        assertEquals("round_robin", ChannelSettings.balancer(null, java.util.Map.of("loadBalancingPolicy", "round_robin")));
        assertEquals("weighted_round_robin", ChannelSettings.balancer("pick_first", java.util.Map.of("loadBalancingConfig",
                List.of(java.util.Map.of("weighted_round_robin", java.util.Map.of()), java.util.Map.of("pick_first", java.util.Map.of())))),
                "a service config's first policy over the builder's");
        assertEquals(null, ChannelSettings.balancer("round_robin", java.util.Map.of("loadBalancingConfig",
                List.of(java.util.Map.of("pick_first", java.util.Map.of())))));
        assertEquals("round_robin", ChannelSettings.balancer("round_robin", java.util.Map.of("methodConfig", List.of())),
                "a service config that names no policy leaves the builder's");
        org.junit.jupiter.api.Assertions.assertThrows(NoSuchFieldException.class,
                () -> ChannelSettings.balancer(42, null), "a field of another kind is refused, not guessed at");
    }

    @Test
    void aProxyBetweenTheEndsKeepsTheCallsOnHttp2() throws Exception {
        Server s = server(true);
        Relay relay = new Relay(s.getPort());
        cleanup.add(relay::close);
        ManagedChannel ch = channel(relay.port());
        long proxied = ColocatedGrpc.fallbacks().get(Fallback.PROXIED);
        for (int i = 0; i < 20; i++) {
            call(ch, "relayed " + i);
        }
        waitFor(() -> ColocatedGrpc.fallbacks().get(Fallback.PROXIED) > proxied, "the fallback is counted");
        for (int i = 0; i < 20; i++) {
            call(ch, "relayed again " + i);
        }
        assertTrue(seen.stream().noneMatch(Seen::colocated), "no call went co-located: " + seen);
        // the channel withdrew what the server accepted: it waits for no region (it would for 10 s)
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (Acceptor.waitingNow() > 0) {
            assertTrue(System.nanoTime() < deadline, "the server still waits for a region the channel withdrew");
            Thread.sleep(5);
        }
    }

    @Test
    void theColocatedConnectionEndsWithItsTcpConnectionAndTheChannelAgreesAgain() throws Exception {
        // the server ends each TCP connection after a second; the co-located one drains with it: its calls
        // run to their end, new ones go over HTTP/2 (a new TCP connection) until the next agreement
        Server s = server(true, NettyServerBuilder.forAddress(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0))
                .maxConnectionAge(1, TimeUnit.SECONDS).maxConnectionAgeGrace(1, TimeUnit.SECONDS));
        ManagedChannel ch = channel(s.getPort());
        callUntilColocated(ch);
        SocketAddress first = seen.stream().filter(Seen::colocated).findFirst().orElseThrow().remote();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        int failed = 0;
        while (seen.stream().noneMatch(x -> x.colocated() && !x.remote().equals(first))) {
            assertTrue(System.nanoTime() < deadline, "no second co-located connection: " + lastWords());
            try {
                call(ch, "y");
            } catch (io.grpc.StatusRuntimeException e) {
                assertEquals(Status.Code.UNAVAILABLE, e.getStatus().getCode(), e.toString());
                failed++;
                System.out.println("a call failed: " + e.getStatus());
            }
        }
        System.out.println("calls that failed as the co-located connection ended with its TCP connection: " + failed);
        assertEquals(0, failed, "a connection's maximum age fails no call, as over HTTP/2");
    }

    /**
     * A call open on the co-located connection when its TCP connection goes away (the server's
     * maximum connection age) is answered there, as over HTTP/2, while the channel's calls after it
     * go over HTTP/2, none failing.
     */
    @Test
    void aCallOpenWhenTheTcpConnectionGoesAwayIsStillAnswered() throws Exception {
        java.util.concurrent.CountDownLatch tcpEnded = new java.util.concurrent.CountDownLatch(1);
        Server s = server(true, NettyServerBuilder.forAddress(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0))
                .maxConnectionAge(2, TimeUnit.SECONDS).maxConnectionAgeGrace(1, TimeUnit.SECONDS)
                .addTransportFilter(new io.grpc.ServerTransportFilter() {
                    @Override
                    public void transportTerminated(io.grpc.Attributes a) {
                        if (!Boolean.TRUE.equals(a.get(ColocatedGrpc.TRANSPORT_ATTR_COLOCATED))) {
                            tcpEnded.countDown();
                        }
                    }
                }));
        ManagedChannel ch = channel(s.getPort());
        callUntilColocated(ch);
        int before = seen.size();
        com.google.common.util.concurrent.ListenableFuture<byte[]> open = io.grpc.stub.ClientCalls.futureUnaryCall(
                ch.newCall(ColocatedGrpcTest.HANG, CallOptions.DEFAULT.withDeadlineAfter(30, TimeUnit.SECONDS)),
                "held".getBytes(StandardCharsets.UTF_8));
        Runnable answer = held.poll(10, TimeUnit.SECONDS);
        assertTrue(answer != null, "the held call reached the server");
        assertTrue(seen.get(before).colocated(), "the held call went co-located");
        assertTrue(tcpEnded.await(20, TimeUnit.SECONDS), "the server ended the TCP connection at its maximum age");
        // the channel hears of it (its own TCP connection's end, or the server's word over the rings) a moment later
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        do {
            assertTrue(System.nanoTime() < deadline, "no call went over HTTP/2 after the TCP connection went away");
            assertEquals("meanwhile", new String(call(ch, "meanwhile"), StandardCharsets.UTF_8));
        } while (seen.get(seen.size() - 1).colocated());
        answer.run();
        assertEquals("held", new String(open.get(10, TimeUnit.SECONDS), StandardCharsets.UTF_8),
                "the call open on the co-located connection was answered there");
    }

    /**
     * Two channels built from one builder agree each on its own TCP connection: each one's calls go
     * over its own co-located connection, and one shut down now leaves the other's calls alone.
     */
    @Test
    void twoChannelsOfOneBuilderAgreeEachOnItsOwn() throws Exception {
        Server s = server(true);
        NettyChannelBuilder b = ColocatedGrpc.configure(NettyChannelBuilder.forAddress("127.0.0.1", s.getPort())).usePlaintext();
        ManagedChannel first = closedAfter(b.build());
        ManagedChannel second = closedAfter(b.build());
        callUntilColocated(first);
        SocketAddress firstEnd = seen.get(seen.size() - 1).remote();
        callUntilColocated(second);
        SocketAddress secondEnd = seen.get(seen.size() - 1).remote();
        assertFalse(firstEnd.equals(secondEnd), "each channel's calls go over its own connection: " + firstEnd);
        first.shutdownNow();
        assertTrue(first.awaitTermination(10, TimeUnit.SECONDS));
        int before = seen.size();
        for (int i = 0; i < 50; i++) {
            assertEquals("after " + i, new String(call(second, "after " + i), StandardCharsets.UTF_8));
        }
        assertTrue(seen.subList(before, seen.size()).stream().allMatch(x -> x.colocated() && secondEnd.equals(x.remote())),
                "the second channel's calls stayed on its own co-located connection");
    }

    @Test
    void aGracefulShutdownOfBothEndsLeavesNothing() throws Exception {
        Server s = server(true);
        ManagedChannel ch = channel(s.getPort());
        callUntilColocated(ch);
        s.shutdown();
        assertTrue(s.awaitTermination(10, TimeUnit.SECONDS), "a server with an idle co-located connection terminates");
        ch.shutdown();
        assertTrue(ch.awaitTermination(10, TimeUnit.SECONDS), "the channel terminates");
        // tearDown: no co-located reader thread left on either end
    }

    @Property(tries = 300)
    void anyAnswerIsReadOrRefusedWithAReason(@ForAll byte[] answer) {
        try {
            Agreement.Answer a = Agreement.parse(answer);
            assertNotNull(a);
        } catch (IllegalArgumentException expected) {
            assertNotNull(expected.getMessage());
        }
    }

    @Test
    void anAnswerOfSpacesOnlyIsRefused() {
        // found by the property above: a line of spaces splits into no field at all
        for (String s : new String[] {" ", "   ", ""}) {
            assertThrows(IllegalArgumentException.class, () -> Agreement.parse(s.getBytes(StandardCharsets.UTF_8)), s);
        }
    }

    @Test
    void answersAreReadAsWritten() {
        byte[] nonce = new byte[32];
        nonce[3] = 7;
        Agreement.Accept a = new Agreement.Accept(new InetSocketAddress(InetAddress.getLoopbackAddress(), 4242),
                "@sockmap4j-colocated-1-ab", nonce, 1 << 20);
        Agreement.Accept b = (Agreement.Accept) Agreement.parse(a.encode());
        assertEquals(a.clientAsSeen(), b.clientAsSeen());
        assertEquals(a.socket(), b.socket());
        assertArrayEquals(a.nonce(), b.nonce());
        assertEquals(a.capacity(), b.capacity());
        Agreement.Decline d = (Agreement.Decline) Agreement.parse(new Agreement.Decline(Fallback.BUSY, "full\n").encode());
        assertEquals(Fallback.BUSY, d.reason());
        assertEquals("full?", d.words());
        assertTrue(Agreement.parse("ACCEPT 2 x".getBytes(StandardCharsets.US_ASCII)) instanceof Agreement.Decline v
                && v.reason() == Fallback.OTHER_VERSION);
        assertTrue(Agreement.sameEnd(new InetSocketAddress("::ffff:127.0.0.1", 5), new InetSocketAddress("127.0.0.1", 5)));
        assertNotEquals(true, Agreement.sameEnd(new InetSocketAddress("127.0.0.1", 5), new InetSocketAddress("127.0.0.1", 6)));
    }

    /**
     * Lending is agreed in the agreement call's headers: with {@code lendBytes} unset (the
     * default) or a size at both ends, a lendable message's body goes lent over the agreed
     * connection; 0 or a setting that is not a size lends nothing, and the calls go on.
     */
    @Test
    void lendingIsAgreedWhereBothEndsLendAndOffOrABadSizeLendsNothing() throws Exception {
        String was = System.getProperty(ColocatedGrpc.LEND_BYTES);
        cleanup.add(() -> {
            if (was == null) {
                System.clearProperty(ColocatedGrpc.LEND_BYTES);
            } else {
                System.setProperty(ColocatedGrpc.LEND_BYTES, was);
            }
        });
        MethodDescriptor<byte[], byte[]> lendingEcho = ECHO.toBuilder(LendingTest.lendableBytes(), ColocatedGrpcTest.BYTES)
                .build();
        byte[] body = new byte[64 * 1024];
        new java.util.Random(5).nextBytes(body);
        for (String setting : new String[] {null, Long.toString(1 << 20), "0", "12345"}) {
            if (setting == null) {
                System.clearProperty(ColocatedGrpc.LEND_BYTES);
            } else {
                System.setProperty(ColocatedGrpc.LEND_BYTES, setting);
            }
            ManagedChannel ch = channel(server(true).getPort());
            callUntilColocated(ch);
            long lent = ColocatedGrpc.messagesLent();
            assertArrayEquals(body, ClientCalls.blockingUnaryCall(ch, lendingEcho,
                    CallOptions.DEFAULT.withDeadlineAfter(10, TimeUnit.SECONDS), body), setting);
            boolean lends = setting == null || setting.equals(Long.toString(1 << 20));
            assertEquals(lends ? 1 : 0, ColocatedGrpc.messagesLent() - lent, "lent with " + setting);
        }
    }

    @Test
    void aLendingHeaderIsASizeUpToThisEndsOrNothing() {
        Metadata h = new Metadata();
        assertEquals(0, Agreement.lendBytes(h, 1 << 20), "absent");
        assertEquals(0, Agreement.lendBytes(null, 1 << 20));
        for (String bad : new String[] {"-4096", "4097", "1e6", " 4096", "99999999999999"}) {
            Metadata m = new Metadata();
            m.put(Agreement.LEND, bad);
            assertEquals(0, Agreement.lendBytes(m, 1L << 40), bad);
        }
        Metadata m = new Metadata();
        m.put(Agreement.LEND, "8192");
        assertEquals(8192, Agreement.lendBytes(m, 8192));
        assertEquals(0, Agreement.lendBytes(m, 4096), "more than this end lends: nothing");
    }

    /** A TCP relay on loopback: what a sidecar proxy is to the two ends. */
    static final class Relay implements AutoCloseable {
        private final ServerSocket listener;
        private final Set<Socket> open = ConcurrentHashMap.newKeySet();

        Relay(int to) throws IOException {
            listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
            Thread.ofPlatform().daemon().name("relay-accept").start(() -> {
                try {
                    while (true) {
                        Socket in = listener.accept();
                        Socket out = new Socket(InetAddress.getLoopbackAddress(), to);
                        open.add(in);
                        open.add(out);
                        pump(in, out);
                        pump(out, in);
                    }
                } catch (IOException closed) {
                    // the relay is closed
                }
            });
        }

        private void pump(Socket from, Socket to) {
            Thread.ofPlatform().daemon().name("relay-pump").start(() -> {
                byte[] buf = new byte[65536];
                try (InputStream in = from.getInputStream(); OutputStream out = to.getOutputStream()) {
                    for (int n; (n = in.read(buf)) >= 0; ) {
                        out.write(buf, 0, n);
                    }
                } catch (IOException ended) {
                    // either side closed
                } finally {
                    close(from);
                    close(to);
                }
            });
        }

        private void close(Socket s) {
            try {
                s.close();
            } catch (IOException ignored) {
                // closing
            }
            open.remove(s);
        }

        int port() {
            return listener.getLocalPort();
        }

        @Override
        public void close() {
            try {
                listener.close();
            } catch (IOException ignored) {
                // closing
            }
            open.forEach(this::close);
        }
    }
}
