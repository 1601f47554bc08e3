package io.github.sockmap4j.netty.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.colocated.grpc.ColocatedGrpc;
import io.github.sockmap4j.testbed.Await;
import io.grpc.CallOptions;
import io.grpc.ClientCall;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * kill -9 of either end of a co-located connection, mid-call and mid-stream, with the other end
 * here (configured by {@link SockmapGrpc}, {@code -Dsockmap4j.colocated=true}): its calls end with
 * UNAVAILABLE long before their deadlines, as the TCP connection's end is seen, and this process
 * keeps no mapping of the region, no descriptor of it and no reader thread.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@Tag("kernel")
class ColocatedKillTest {
    private final List<Runnable> cleanup = new ArrayList<>();
    private Process peer;

    @AfterEach
    void tearDown() {
        if (peer != null) {
            peer.destroyForcibly();
        }
        for (int i = cleanup.size() - 1; i >= 0; i--) {
            cleanup.get(i).run();
        }
    }

    private BlockingQueue<String> start(String... args) throws IOException {
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                "-cp", System.getProperty("java.class.path"), ColocatedPeer.class.getName()));
        cmd.addAll(List.of(args));
        peer = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        BlockingQueue<String> lines = new LinkedBlockingQueue<>();
        Thread.ofPlatform().daemon().name("peer-output").start(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(peer.getInputStream(), StandardCharsets.UTF_8))) {
                for (String l; (l = r.readLine()) != null; ) {
                    lines.add(l);
                }
            } catch (IOException ended) {
                // the peer is gone
            }
        });
        return lines;
    }

    private static String next(BlockingQueue<String> lines, String prefix) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(Await.scaled(30));
        StringBuilder other = new StringBuilder();
        while (System.nanoTime() < deadline) {
            String l = lines.poll(100, TimeUnit.MILLISECONDS);
            if (l != null && l.startsWith(prefix)) {
                return l;
            }
            if (l != null) {
                other.append(l).append('\n');
            }
        }
        throw new AssertionError("the peer never said " + prefix + "; it said:\n" + other);
    }

    /** Waits until the peer has said each of {@code lines}, in any order. */
    private static void nextAll(BlockingQueue<String> lines, Set<String> wanted) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(Await.scaled(30));
        Set<String> heard = new java.util.HashSet<>();
        StringBuilder all = new StringBuilder();
        while (!heard.containsAll(wanted)) {
            String l = lines.poll(100, TimeUnit.MILLISECONDS);
            if (l != null) {
                heard.add(l);
                all.append(l).append('\n');
            }
            if (System.nanoTime() >= deadline) {
                throw new AssertionError("the peer never said all of " + wanted + "; it said:\n" + all);
            }
        }
    }

    private static <T> T withSwitch(java.util.function.Supplier<T> build) {
        String was = System.getProperty(ColocatedGrpc.SWITCH);
        System.setProperty(ColocatedGrpc.SWITCH, "true");
        try {
            return build.get();
        } finally {
            if (was == null) {
                System.clearProperty(ColocatedGrpc.SWITCH);
            } else {
                System.setProperty(ColocatedGrpc.SWITCH, was);
            }
        }
    }

    /** Nothing of a co-located connection left in this process: no mapping, no descriptor, no reader. */
    private static void nothingLeft() throws InterruptedException {
        Await.until("no region, descriptor or reader thread of a co-located connection is left here",
                Duration.ofSeconds(Await.scaled(20)), () -> leftovers().isEmpty());
    }

    static List<String> leftovers() throws IOException {
        List<String> left = new ArrayList<>();
        for (String line : Files.readAllLines(Path.of("/proc/self/maps"))) {
            if (line.contains("memfd:sm4j-grpc")) {
                left.add("mapping " + line);
            }
        }
        try (Stream<Path> fds = Files.list(Path.of("/proc/self/fd"))) {
            for (Path fd : fds.toList()) {
                try {
                    String target = Files.readSymbolicLink(fd).toString();
                    if (target.contains("memfd:sm4j-grpc")) {
                        left.add("descriptor " + fd + " -> " + target);
                    }
                } catch (IOException gone) {
                    // closed while listed
                }
            }
        }
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (t.getName().startsWith("sockmap4j-colocated-") && !t.getName().equals("sockmap4j-colocated-handover")
                    && !t.getName().equals("sockmap4j-colocated-agree")) {
                left.add("thread " + t.getName());
            }
        }
        return left;
    }

    /** A call's end, as its listener heard it. */
    private static CompletableFuture<Status> start(ClientCall<byte[], byte[]> call, int messages) {
        CompletableFuture<Status> end = new CompletableFuture<>();
        call.start(new ClientCall.Listener<>() {
            @Override
            public void onClose(Status status, Metadata trailers) {
                end.complete(status);
            }
        }, new Metadata());
        call.request(messages);
        call.sendMessage(new byte[8]);
        call.halfClose();
        return end;
    }

    @Test
    void aServerKilledMidCallAndMidStreamFailsTheCallsHereWithUnavailable() throws Exception {
        BlockingQueue<String> said = start("server");
        int port = Integer.parseInt(next(said, "PORT ").substring(5));
        ManagedChannel ch = withSwitch(() -> SockmapGrpc.configure(NettyChannelBuilder.forAddress("127.0.0.1", port))
                .usePlaintext().build());
        cleanup.add(ch::shutdownNow);
        long upgrades = ColocatedGrpc.upgrades();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(Await.scaled(20));
        while (ColocatedGrpc.upgrades() == upgrades) {
            assertTrue(System.nanoTime() < deadline, "no upgrade: " + ColocatedGrpc.fallbacks());
            ClientCalls.blockingUnaryCall(ch, ColocatedPeer.ECHO, CallOptions.DEFAULT.withDeadlineAfter(10,
                    TimeUnit.SECONDS), new byte[8]);
        }
        // both calls on the co-located connection, deadlines far beyond the test's wait
        CompletableFuture<Status> hang = start(ch.newCall(ColocatedPeer.HANG,
                CallOptions.DEFAULT.withDeadlineAfter(10, TimeUnit.MINUTES)), 1);
        CompletableFuture<Status> trickle = start(ch.newCall(ColocatedPeer.TRICKLE,
                CallOptions.DEFAULT.withDeadlineAfter(10, TimeUnit.MINUTES)), 10);
        // the two handlers run on the peer's executor in either order
        nextAll(said, Set.of("HANG", "TRICKLE"));
        peer.destroyForcibly().waitFor();
        assertEquals(Status.Code.UNAVAILABLE, hang.get(Await.scaled(30), TimeUnit.SECONDS).getCode());
        assertEquals(Status.Code.UNAVAILABLE, trickle.get(Await.scaled(30), TimeUnit.SECONDS).getCode());
        ch.shutdownNow();
        assertTrue(ch.awaitTermination(10, TimeUnit.SECONDS));
        nothingLeft();
    }

    @Test
    void aClientKilledMidCallAndMidStreamEndsItsCallsAndConnectionHere() throws Exception {
        Set<String> heard = ConcurrentHashMap.newKeySet();
        Server s = withSwitch(() -> {
            try {
                return SockmapGrpc.configure(NettyServerBuilder.forAddress(
                                new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)))
                        .addService(ColocatedPeer.service(heard::add)).build().start();
            } catch (IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        });
        cleanup.add(() -> {
            s.shutdownNow();
            try {
                s.awaitTermination(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        BlockingQueue<String> said = start("client", Integer.toString(s.getPort()));
        assertTrue(Integer.parseInt(next(said, "UPGRADED ").substring(9)) > 0, "the client upgraded");
        next(said, "CALLING");
        Await.until("both calls reached the handlers here", () -> heard.containsAll(Set.of("HANG", "TRICKLE")));
        peer.destroyForcibly().waitFor();
        Await.until("both calls were cancelled here", Duration.ofSeconds(Await.scaled(30)),
                () -> heard.containsAll(Set.of("CANCELLED HANG", "CANCELLED TRICKLE")));
        nothingLeft();
        s.shutdown();
        assertTrue(s.awaitTermination(10, TimeUnit.SECONDS), "the server terminates");
    }
}
