package io.github.sockmap4j.netty.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.colocated.grpc.ColocatedGrpc;
import io.github.sockmap4j.colocated.grpc.Fallback;
import io.grpc.CallOptions;
import io.grpc.EquivalentAddressGroup;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.NameResolver;
import io.grpc.NameResolverProvider;
import io.grpc.NameResolverRegistry;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.netty.channel.epoll.EpollSocketChannel;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A channel that spreads its calls over several servers keeps them there (no root): where its name
 * resolver, not its builder, chooses round robin, the channel's connections to two servers say it
 * balances, and its calls stay on HTTP/2, reaching both servers, with the reason counted; the same
 * two addresses under gRPC's default {@code pick_first} (one server at a time) still move their
 * calls to a co-located connection.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ColocatedBalancingTest {
    private final List<AutoCloseable> cleanup = new ArrayList<>();
    private final AtomicInteger colocated = new AtomicInteger();

    @AfterEach
    void tearDown() throws Exception {
        for (int i = cleanup.size() - 1; i >= 0; i--) {
            cleanup.get(i).close();
        }
    }

    /** An echo server that agrees to co-located connections, counting the calls it serves in {@code calls}. */
    private Server server(AtomicInteger calls) throws Exception {
        ServerInterceptor counting = new ServerInterceptor() {
            @Override
            public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
                                                              ServerCallHandler<Q, R> next) {
                if (call.getMethodDescriptor().getFullMethodName().equals(ColocatedPeer.ECHO.getFullMethodName())) {
                    calls.incrementAndGet();
                    if (Boolean.TRUE.equals(call.getAttributes().get(ColocatedGrpc.TRANSPORT_ATTR_COLOCATED))) {
                        colocated.incrementAndGet();
                    }
                }
                return next.startCall(call, headers);
            }
        };
        Server s = ColocatedGrpc.configure(NettyServerBuilder.forAddress(
                        new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)))
                .addService(ColocatedPeer.service(x -> { })).intercept(counting).build().start();
        cleanup.add(() -> {
            s.shutdownNow();
            assertTrue(s.awaitTermination(10, TimeUnit.SECONDS), "the server terminates");
        });
        return s;
    }

    /**
     * A channel to both servers by a name resolver of this test's own, which gives their two
     * addresses and, where {@code serviceConfig} is not null, that service config: as a resolver of
     * a service mesh's control plane or of a cluster's endpoints does.
     */
    private ManagedChannel channel(Server a, Server b, Map<String, ?> serviceConfig) {
        return channel(List.of(a, b), serviceConfig, new java.util.concurrent.atomic.AtomicReference<>());
    }

    /**
     * As {@link #channel(Server, Server, Map)}, to {@code servers}; {@code resolve} is set to what
     * gives the channel other servers later, as a resolver does when a service scales.
     */
    private ManagedChannel channel(List<Server> servers, Map<String, ?> serviceConfig,
                                   java.util.concurrent.atomic.AtomicReference<java.util.function.Consumer<List<Server>>> resolve) {
        String scheme = "sm4j-balance-" + System.nanoTime();
        NameResolverProvider provider = new NameResolverProvider() {
            @Override
            protected boolean isAvailable() {
                return true;
            }

            @Override
            protected int priority() {
                return 5;
            }

            @Override
            public String getDefaultScheme() {
                return scheme;
            }

            @Override
            public NameResolver newNameResolver(URI target, NameResolver.Args args) {
                if (!scheme.equals(target.getScheme())) {
                    return null;
                }
                return new NameResolver() {
                    @Override
                    public String getServiceAuthority() {
                        return "balanced";
                    }

                    @Override
                    public void start(Listener2 listener) {
                        java.util.function.Consumer<List<Server>> update = now -> args.getSynchronizationContext().execute(() -> {
                            List<EquivalentAddressGroup> addresses = now.stream().map(x ->
                                    new EquivalentAddressGroup(new InetSocketAddress("127.0.0.1", x.getPort()))).toList();
                            ResolutionResult.Builder r = ResolutionResult.newBuilder()
                                    .setAddressesOrError(io.grpc.StatusOr.fromValue(addresses));
                            if (serviceConfig != null) {
                                r.setServiceConfig(args.getServiceConfigParser().parseServiceConfig(serviceConfig));
                            }
                            listener.onResult2(r.build());
                        });
                        resolve.set(update);
                        update.accept(servers);
                    }

                    @Override
                    public void shutdown() {
                    }
                };
            }
        };
        NameResolverRegistry.getDefaultRegistry().register(provider);
        cleanup.add(() -> NameResolverRegistry.getDefaultRegistry().deregister(provider));
        TcpLifelines lifelines = new TcpLifelines(EpollSocketChannel::new);
        NettyChannelBuilder builder = NettyChannelBuilder.forTarget(scheme + ":///balanced")
                .channelFactory(lifelines).eventLoopGroup(SockmapGrpc.sharedGroup()).usePlaintext();
        ManagedChannel ch = ColocatedGrpc.configure(builder, lifelines).build();
        cleanup.add(() -> {
            ch.shutdownNow();
            assertTrue(ch.awaitTermination(10, TimeUnit.SECONDS), "the channel terminates");
        });
        return ch;
    }

    private static void call(ManagedChannel ch, int i) {
        byte[] m = {(byte) i};
        assertEquals(m[0], ClientCalls.blockingUnaryCall(ch, ColocatedPeer.ECHO,
                CallOptions.DEFAULT.withDeadlineAfter(10, TimeUnit.SECONDS), m)[0]);
    }

    /** Calls until one goes co-located (each a real call, 20 s of them at most). */
    private void callUntilColocated(ManagedChannel ch) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        for (int i = 0; colocated.get() == 0; i++) {
            assertTrue(System.nanoTime() < deadline, "no call went co-located: " + ColocatedGrpc.fallbacks());
            call(ch, i);
        }
    }

    /**
     * Calls until the channel says it balances (counted past {@code balanced}); then, once the calls
     * given a co-located connection before have ended, 40 calls: none co-located, both servers reached.
     */
    private void callsStayWhereTheBalancerPutsThem(ManagedChannel ch, long balanced, AtomicInteger toA,
                                                   AtomicInteger toB) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        for (int i = 0; ColocatedGrpc.fallbacks().get(Fallback.BALANCED) == balanced; i++) {
            assertTrue(System.nanoTime() < deadline, "the channel never said it balances: " + ColocatedGrpc.fallbacks());
            call(ch, i);
        }
        for (int i = 0; i < 5; i++) {
            call(ch, i); // calls that took the co-located connection before it was left, if one was made
        }
        int colocatedBefore = colocated.get();
        int aBefore = toA.get();
        int bBefore = toB.get();
        for (int i = 0; i < 40; i++) {
            call(ch, i);
        }
        assertEquals(colocatedBefore, colocated.get(), "no call went co-located once the channel said it balances");
        assertTrue(toA.get() - aBefore >= 10 && toB.get() - bBefore >= 10,
                "round robin reached both servers: " + (toA.get() - aBefore) + " and " + (toB.get() - bBefore));
    }

    @Test
    void aResolversRoundRobinOverTwoServersKeepsTheCallsWhereItPutsThem() throws Exception {
        AtomicInteger toA = new AtomicInteger();
        AtomicInteger toB = new AtomicInteger();
        Server a = server(toA);
        Server b = server(toB);
        long balanced = ColocatedGrpc.fallbacks().get(Fallback.BALANCED);
        ManagedChannel ch = channel(a, b, Map.of("loadBalancingConfig", List.of(Map.of("round_robin", Map.of()))));
        callsStayWhereTheBalancerPutsThem(ch, balanced, toA, toB);
        assertTrue(ColocatedGrpc.lastFallback(Fallback.BALANCED).contains("balancer"),
                ColocatedGrpc.lastFallback(Fallback.BALANCED));
    }

    /**
     * Round robin over one server moves its calls; when the resolver then gives a second server
     * (a service scaled up) and the channel connects to it, its new calls go back to HTTP/2 and
     * reach both.
     */
    @Test
    void aSecondServerConnectedLaterTakesTheCallsBackToTheBalancer() throws Exception {
        AtomicInteger toA = new AtomicInteger();
        AtomicInteger toB = new AtomicInteger();
        Server a = server(toA);
        Server b = server(toB);
        long balanced = ColocatedGrpc.fallbacks().get(Fallback.BALANCED);
        java.util.concurrent.atomic.AtomicReference<java.util.function.Consumer<List<Server>>> resolve =
                new java.util.concurrent.atomic.AtomicReference<>();
        ManagedChannel ch = channel(List.of(a), Map.of("loadBalancingConfig", List.of(Map.of("round_robin", Map.of()))),
                resolve);
        callUntilColocated(ch);
        assertEquals(balanced, ColocatedGrpc.fallbacks().get(Fallback.BALANCED), "one server: nothing to balance");
        resolve.get().accept(List.of(a, b));
        callsStayWhereTheBalancerPutsThem(ch, balanced, toA, toB);
    }

    /** A builder's round robin with one server to go to (as Spring gRPC's channels have by default) moves its calls. */
    @Test
    void roundRobinOverOneServerMovesItsCalls() throws Exception {
        Server a = server(new AtomicInteger());
        long balanced = ColocatedGrpc.fallbacks().get(Fallback.BALANCED);
        TcpLifelines lifelines = new TcpLifelines(EpollSocketChannel::new);
        ManagedChannel ch = ColocatedGrpc.configure(NettyChannelBuilder.forAddress("127.0.0.1", a.getPort())
                .defaultLoadBalancingPolicy("round_robin").channelFactory(lifelines)
                .eventLoopGroup(SockmapGrpc.sharedGroup()).usePlaintext(), lifelines).build();
        cleanup.add(() -> {
            ch.shutdownNow();
            assertTrue(ch.awaitTermination(10, TimeUnit.SECONDS), "the channel terminates");
        });
        callUntilColocated(ch);
        assertEquals(balanced, ColocatedGrpc.fallbacks().get(Fallback.BALANCED), "one server: nothing to balance");
    }

    @Test
    void pickFirstOverTheSameTwoAddressesStillMovesItsCalls() throws Exception {
        Server a = server(new AtomicInteger());
        Server b = server(new AtomicInteger());
        long balanced = ColocatedGrpc.fallbacks().get(Fallback.BALANCED);
        ManagedChannel ch = channel(a, b, null);
        callUntilColocated(ch);
        assertEquals(balanced, ColocatedGrpc.fallbacks().get(Fallback.BALANCED), "pick_first is not balancing");
    }
}
