package io.github.sockmap4j.examples.rag;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.netty.grpc.LoopLocalChannel;
import io.github.sockmap4j.netty.grpc.SockmapGrpc;
import io.grpc.CallOptions;
import io.grpc.ConnectivityState;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ServerCalls;
import io.grpc.stub.StreamObserver;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.util.concurrent.DefaultThreadFactory;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.VectorSchemaRoot;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/**
 * One stage of the RAG pipeline as a gRPC service: {@code embedding} (text to vector),
 * {@code search} (vector to the nearest chunks, with their vectors), {@code context} (threshold,
 * rerank, top-k, prompt) and {@code gateway} (a question in, the assembled context out, calling
 * the other three). Internal hops run over the sockmap4j transport when {@code fast}, over
 * stock grpc-netty on the same epoll event loops otherwise; the gateway's own port is ingress
 * from outside the node in a real deployment, so it is always plain TCP.
 *
 * <p>As a process ({@code main}) it prints {@code READY <port> <info>} once serving, answers a
 * {@code TIMES} line on its standard input with its {@link StageClock.Times#line()}, and stops
 * when its standard input closes.
 */
public final class RagService implements AutoCloseable {
    public enum Role { EMBEDDING, SEARCH, CONTEXT, GATEWAY }

    /** What every stage agrees on. */
    public record Settings(int dim, int docs, long seed, int candidates, int topK, float threshold) {
        public Settings {
            if (dim < 1 || docs < 1 || candidates < 1 || topK < 1) {
                throw new IllegalArgumentException("dim, docs, candidates and top-k must be positive");
            }
        }

        List<String> args() {
            return List.of("--dim=" + dim, "--docs=" + docs, "--seed=" + seed, "--candidates=" + candidates,
                    "--top-k=" + topK, "--threshold=" + threshold);
        }
    }

    private static final Object GROUP_LOCK = new Object();
    private static EventLoopGroup group;

    /**
     * How the fast path's calls wait ({@code -Drag.profile=polling}, from the demo's
     * {@code --profile}): STANDARD runs both paths on the same kind of event loops, so that only
     * the redirect differs; POLLING gives the fast path's loops and handlers sockmap4j's polling
     * profile (its loops and its executor).
     */
    static final SockmapGrpc.Profile PROFILE =
            SockmapGrpc.Profile.valueOf(System.getProperty("rag.profile", "standard").toUpperCase(Locale.ROOT));

    /**
     * Where a stage runs its handlers and its channels' callbacks ({@code -Drag.handlers}, from the
     * demo's {@code --handlers}): {@code loops} (the default) on the event loop that read the call,
     * as a service whose handlers never block would ({@link SockmapGrpc#runOnEventLoops}); {@code
     * pool} on gRPC's executor (or the polling profile's), as gRPC does by default.
     */
    static boolean handlersOnLoops() {
        String h = System.getProperty("rag.handlers", "loops");
        return switch (h) {
            case "loops" -> true;
            case "pool" -> false;
            default -> throw new IllegalArgumentException("rag.handlers is loops or pool, not '" + h + "'");
        };
    }

    /** One epoll event loop group per process for the plain path and the standard profile. */
    static EventLoopGroup group() {
        synchronized (GROUP_LOCK) {
            if (group == null) {
                group = new MultiThreadIoEventLoopGroup(Runtime.getRuntime().availableProcessors(),
                        new DefaultThreadFactory("rag-io", true), EpollIoHandler.newFactory());
            }
            return group;
        }
    }

    /** The loops of a path: {@link #group()}, or the polling group where the fast path polls. */
    static EventLoopGroup group(boolean fast) {
        return fast && PROFILE != SockmapGrpc.Profile.STANDARD ? SockmapGrpc.group(PROFILE) : group();
    }

    private final Role role;
    private final Server server;
    private final List<ManagedChannel> channels;
    private final BufferAllocator allocator;
    private final String info;
    private final StageClock clock;

    private RagService(Role role, Server server, List<ManagedChannel> channels, BufferAllocator allocator, String info,
            StageClock clock) {
        this.role = role;
        this.server = server;
        this.channels = channels;
        this.allocator = allocator;
        this.info = info;
        this.clock = clock;
    }

    /** Where this stage's calls have spent their time so far. */
    StageClock.Times times() {
        return clock.now();
    }

    public Role role() {
        return role;
    }

    public int port() {
        return server.getPort();
    }

    /** What the stage wants to say once it serves (the search stage: which scorer it measured faster). */
    public String info() {
        return info;
    }

    /**
     * Starts a stage on {@code port} (0: any). The gateway needs the other three stages' ports in
     * {@code downstream} (embedding, search, context).
     */
    public static RagService start(Role role, Settings s, boolean fast, int port, int... downstream) throws IOException {
        List<java.net.InetSocketAddress> d = new ArrayList<>();
        for (int p : downstream) {
            d.add(new java.net.InetSocketAddress(java.net.InetAddress.ofLiteral("127.0.0.1"), p));
        }
        return start(role, s, fast, new java.net.InetSocketAddress(java.net.InetAddress.ofLiteral("127.0.0.1"), port), d);
    }

    /**
     * Starts a stage listening on {@code bind}; the gateway dials the other three stages at
     * {@code downstream} (embedding, search, context): their pods' or their Services' addresses.
     */
    public static RagService start(Role role, Settings s, boolean fast, java.net.InetSocketAddress bind,
                                   List<java.net.InetSocketAddress> downstream) throws IOException {
        BufferAllocator alloc = new RootAllocator();
        StageClock clock = new StageClock();
        List<ManagedChannel> channels = new ArrayList<>();
        String info = "";
        ServerServiceDefinition service;
        try {
            switch (role) {
                case EMBEDDING -> {
                    Embedder embedder = new Embedder(s.dim());
                    Function<byte[], VectorSchemaRoot> embed = req -> {
                        String q = new String(req, StandardCharsets.UTF_8);
                        return ArrowMessages.queryRoot(alloc, new ArrowMessages.Query(q, embedder.embed(q)));
                    };
                    warmUp(embed, n -> Corpus.question(s.seed() + 1, n).getBytes(StandardCharsets.UTF_8));
                    service = service("rag.Embedding", RagMethods.EMBED, embed, clock);
                }
                case SEARCH -> {
                    VectorIndex index = VectorIndex.build(new Embedder(s.dim()), s.seed(), s.docs());
                    info = "scoring: " + index.scoring();
                    Function<VectorSchemaRoot, VectorSchemaRoot> search = req -> {
                        ArrowMessages.Query q = ArrowMessages.query(req);
                        VectorIndex.Hits hits = index.search(q.vector(), s.candidates());
                        int n = hits.ids().length;
                        float[][] vectors = new float[n][];
                        String[] chunks = new String[n];
                        for (int i = 0; i < n; i++) {
                            vectors[i] = index.vector(hits.ids()[i]);
                            chunks[i] = Corpus.chunk(s.seed(), hits.ids()[i]);
                        }
                        return ArrowMessages.candidatesRoot(alloc,
                                new ArrowMessages.Candidates(q.question(), hits.ids(), hits.scores(), vectors, chunks), s.dim());
                    };
                    Embedder warmEmbedder = new Embedder(s.dim());
                    warmUp(search, n -> {
                        String q = Corpus.question(s.seed() + 1, n);
                        return ArrowMessages.queryRoot(alloc, new ArrowMessages.Query(q, warmEmbedder.embed(q)));
                    });
                    service = service("rag.Search", RagMethods.SEARCH, search, clock);
                }
                case CONTEXT -> {
                    ContextAssembler assembler = new ContextAssembler(s.threshold(), s.topK(), 0.7f);
                    Function<VectorSchemaRoot, byte[]> assemble = req -> assembler
                            .assemble(ArrowMessages.candidates(req)).getBytes(StandardCharsets.UTF_8);
                    ArrowMessages.Candidates sample = sampleCandidates(s);
                    warmUp(assemble, n -> ArrowMessages.candidatesRoot(alloc, sample, s.dim()));
                    service = service("rag.Context", RagMethods.ASSEMBLE, assemble, clock);
                }
                case GATEWAY -> {
                    if (downstream.size() != 3) {
                        throw new IllegalArgumentException("the gateway needs the embedding, search and context addresses");
                    }
                    List<ManagedChannel> connections = new ArrayList<>();
                    for (java.net.InetSocketAddress a : downstream) {
                        // On the loops, a channel per loop: each downstream call goes out, and its
                        // reply comes back, on the loop that read the request.
                        channels.add(handlersOnLoops() ? LoopLocalChannel.of(group(fast), loop -> {
                            ManagedChannel c = channel(a, fast, loop);
                            connections.add(c);
                            return c;
                        }) : channel(a, fast));
                        if (!handlersOnLoops()) {
                            connections.add(channels.get(channels.size() - 1));
                        }
                    }
                    // Every connection made before the gateway says it is ready, none on a first call later:
                    // where a connection goes is decided at its connect (a meshed node's, for one).
                    connectAll(connections, Duration.ofSeconds(30));
                    ManagedChannel embed = channels.get(0);
                    ManagedChannel search = channels.get(1);
                    ManagedChannel contexts = channels.get(2);
                    // The gateway forwards each stage's reply to the next as it came, without blocking:
                    // each reply's callback makes the next call, on whichever thread read the reply.
                    service = asyncService("rag.Gateway", RagMethods.ASK, req -> {
                        long[] t = new long[4];
                        t[0] = System.nanoTime();
                        // each batch forwarded as it came, and closed once sent (its memory, or what was lent, goes back)
                        return call(embed, RagMethods.EMBED, req).thenCompose(query -> {
                            t[1] = System.nanoTime();
                            try {
                                return call(search, RagMethods.SEARCH, query);
                            } finally {
                                query.close();
                            }
                        }).thenCompose(candidates -> {
                            t[2] = System.nanoTime();
                            try {
                                return call(contexts, RagMethods.ASSEMBLE, candidates);
                            } finally {
                                candidates.close();
                            }
                        }).thenApply(context -> {
                            t[3] = System.nanoTime();
                            clock.hop(0, t[1] - t[0]);
                            clock.hop(1, t[2] - t[1]);
                            clock.hop(2, t[3] - t[2]);
                            return context;
                        });
                    }, clock);
                }
                default -> throw new AssertionError(role);
            }
            NettyServerBuilder b = NettyServerBuilder.forAddress(bind)
                    .addService(service).maxInboundMessageSize(64 << 20);
            if (fast && role != Role.GATEWAY) {
                SockmapGrpc.configure(b, group(true), group(true));
            } else {
                b.channelType(EpollServerSocketChannel.class).bossEventLoopGroup(group(fast))
                        .workerEventLoopGroup(group(fast));
            }
            if (handlersOnLoops()) {
                // Every stage's handlers compute and never block (the gateway's calls are asynchronous).
                SockmapGrpc.runOnEventLoops(b, List.of(service.getServiceDescriptor().getName()));
            } else if (fast && PROFILE == SockmapGrpc.Profile.POLLING) {
                b.executor(SockmapGrpc.pollingExecutor());
            }
            Server server = b.build().start();
            return new RagService(role, server, channels, alloc, info, clock);
        } catch (IOException | RuntimeException e) {
            channels.forEach(ManagedChannel::shutdownNow);
            alloc.close();
            throw e;
        }
    }

    /**
     * Connects each of {@code channels} and waits until all are ready.
     *
     * @throws IOException naming the channel that was not ready within {@code timeout}
     */
    static void connectAll(List<ManagedChannel> channels, Duration timeout) throws IOException {
        long deadline = System.nanoTime() + timeout.toNanos();
        for (ManagedChannel c : channels) {
            ConnectivityState state;
            while ((state = c.getState(true)) != ConnectivityState.READY) {
                java.util.concurrent.CountDownLatch changed = new java.util.concurrent.CountDownLatch(1);
                c.notifyWhenStateChanged(state, changed::countDown);
                long left = deadline - System.nanoTime();
                try {
                    if (left <= 0 || !changed.await(left, TimeUnit.NANOSECONDS)) {
                        throw new IOException("the gateway's channel to " + c.authority() + " was not ready in "
                                + timeout.toSeconds() + " s (" + state + ")");
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new IOException("interrupted while connecting to " + c.authority(), e);
                }
            }
        }
    }

    /**
     * Runs a stage's handler on local inputs until it is compiled, about a second, before the
     * stage serves: both paths then start measured with warm code.
     */
    private static <Q, R> void warmUp(Function<Q, R> handler, java.util.function.LongFunction<Q> input) {
        long end = System.nanoTime() + WARM_UP_NANOS;
        for (long n = 0; n < 20_000 && System.nanoTime() < end; n++) {
            Q in = input.apply(n);
            try {
                RagMethods.release(handler.apply(in));
            } finally {
                RagMethods.release(in);
            }
        }
    }

    static final long WARM_UP_NANOS = Long.getLong("rag.warmUpMillis", 1500) * 1_000_000L;

    /** Candidates as the search stage would send them, for the context stage's warm-up. */
    private static ArrowMessages.Candidates sampleCandidates(Settings s) {
        float[] scores = new float[s.candidates()];
        for (int i = 0; i < scores.length; i++) {
            scores[i] = 1f - i / (float) scores.length;
        }
        return Corpus.candidates(s.seed(), new Embedder(s.dim()), scores);
    }

    private static CallOptions deadline() {
        return CallOptions.DEFAULT.withDeadlineAfter(10, TimeUnit.SECONDS);
    }

    static ManagedChannel channel(int port, boolean fast) {
        return channel(new java.net.InetSocketAddress(java.net.InetAddress.ofLiteral("127.0.0.1"), port), fast);
    }

    static ManagedChannel channel(java.net.InetSocketAddress to, boolean fast) {
        return channel(to, fast, group(fast));
    }

    /** A channel to {@code to} whose connection runs on {@code loops} (a path's group, or one loop of it). */
    static ManagedChannel channel(java.net.InetSocketAddress to, boolean fast, EventLoopGroup loops) {
        NettyChannelBuilder b = NettyChannelBuilder.forAddress(to).usePlaintext()
                .maxInboundMessageSize(64 << 20);
        if (fast) {
            SockmapGrpc.configure(b, loops);
            if (PROFILE == SockmapGrpc.Profile.POLLING && !handlersOnLoops()) {
                b.executor(SockmapGrpc.pollingExecutor());
            }
        } else {
            b.channelType(EpollSocketChannel.class).eventLoopGroup(loops);
        }
        if (handlersOnLoops()) {
            SockmapGrpc.runOnEventLoops(b);
        }
        return b.build();
    }

    /** A stage's service: each request handled and released, each reply sent and released. */
    private static <Q, R> ServerServiceDefinition service(String name, MethodDescriptor<Q, R> method,
            Function<Q, R> handler, StageClock clock) {
        return ServerServiceDefinition.builder(name).addMethod(RagMethods.served(method), ServerCalls.asyncUnaryCall(
                (RagMethods.Arrival<Q> req, StreamObserver<R> out) -> {
                    if (req.error() != null) {
                        out.onError(Status.INVALID_ARGUMENT.withDescription(name + ": " + req.error()).asRuntimeException());
                        return;
                    }
                    R reply;
                    long t0 = System.nanoTime();
                    try {
                        reply = handler.apply(req.value());
                        clock.handled(System.nanoTime() - t0);
                    } catch (io.grpc.StatusRuntimeException e) {
                        out.onError(e);
                        return;
                    } catch (RuntimeException e) {
                        out.onError(Status.INVALID_ARGUMENT.withDescription(name + ": " + e.getMessage()).asRuntimeException());
                        return;
                    } finally {
                        RagMethods.release(req.value());
                    }
                    try {
                        out.onNext(reply);
                        out.onCompleted();
                    } finally {
                        RagMethods.release(reply);
                    }
                })).build();
    }

    /**
     * A service whose handler answers later: {@code handler} returns the reply's future at once,
     * and the call ends when it completes, on whichever thread completes it.
     */
    private static ServerServiceDefinition asyncService(String name, MethodDescriptor<byte[], byte[]> method,
            Function<byte[], CompletableFuture<byte[]>> handler, StageClock clock) {
        return ServerServiceDefinition.builder(name).addMethod(method, ServerCalls.asyncUnaryCall(
                (byte[] req, StreamObserver<byte[]> out) -> {
                    long t0 = System.nanoTime();
                    CompletableFuture<byte[]> reply;
                    try {
                        reply = handler.apply(req);
                    } catch (RuntimeException e) {
                        reply = CompletableFuture.failedFuture(e);
                    }
                    reply.whenComplete((r, failure) -> {
                        if (failure == null) {
                            clock.handled(System.nanoTime() - t0);
                            out.onNext(r);
                            out.onCompleted();
                            return;
                        }
                        Throwable cause = failure instanceof CompletionException && failure.getCause() != null
                                ? failure.getCause() : failure;
                        out.onError(cause instanceof io.grpc.StatusRuntimeException ? cause
                                : Status.INTERNAL.withDescription(name + ": " + cause).asRuntimeException());
                    });
                })).build();
    }

    /** A unary call that does not block: its reply's future, completed on the channel's executor. */
    private static <Q, R> CompletableFuture<R> call(ManagedChannel ch, MethodDescriptor<Q, R> method, Q req) {
        CompletableFuture<R> reply = new CompletableFuture<>();
        ClientCalls.asyncUnaryCall(ch.newCall(method, deadline()), req, new StreamObserver<>() {
            @Override
            public void onNext(R value) {
                reply.complete(value);
            }

            @Override
            public void onError(Throwable t) {
                reply.completeExceptionally(t);
            }

            @Override
            public void onCompleted() {
                // After a reply (every call but a broken one): built only when needed, an exception
                // and its stack trace cost the gateway's loops 8% of their CPU a call (profiled).
                if (!reply.isDone()) {
                    reply.completeExceptionally(Status.INTERNAL.withDescription(method.getFullMethodName()
                            + " completed with no reply").asRuntimeException());
                }
            }
        });
        return reply;
    }

    @Override
    public void close() {
        server.shutdown();
        channels.forEach(ManagedChannel::shutdown);
        try {
            if (!server.awaitTermination(5, TimeUnit.SECONDS)) {
                server.shutdownNow();
            }
            for (ManagedChannel c : channels) {
                if (!c.awaitTermination(5, TimeUnit.SECONDS)) {
                    c.shutdownNow();
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            server.shutdownNow();
            channels.forEach(ManagedChannel::shutdownNow);
        }
        allocator.close();
    }

    @Command(name = "rag-service", mixinStandardHelpOptions = true,
            description = "Runs one stage of the RAG pipeline until its standard input closes.")
    static final class Main implements Callable<Integer> {
        @Parameters(index = "0", description = "embedding, search, context or gateway")
        String role;
        @Option(names = "--fast", description = "internal hops over the sockmap4j transport")
        boolean fast;
        @Option(names = "--port", defaultValue = "0")
        int port;
        @Option(names = "--bind", defaultValue = "127.0.0.1", description = "address to listen on (a literal)")
        String bind;
        @Option(names = "--downstream", split = ",",
                description = "gateway: embedding,search,context as PORT (on loopback) or ADDRESS:PORT")
        List<String> downstream = List.of();
        @Option(names = "--dim", defaultValue = "384")
        int dim;
        @Option(names = "--docs", defaultValue = "2000")
        int docs;
        @Option(names = "--seed", defaultValue = "42")
        long seed;
        @Option(names = "--candidates", defaultValue = "32")
        int candidates;
        @Option(names = "--top-k", defaultValue = "5")
        int topK;
        @Option(names = "--threshold", defaultValue = "0.3")
        float threshold;

        @Override
        public Integer call() throws Exception {
            Role r;
            try {
                r = Role.valueOf(role.toUpperCase(Locale.ROOT));
            } catch (IllegalArgumentException e) {
                System.err.println("unknown role '" + role + "': use embedding, search, context or gateway");
                return 2;
            }
            Sockmap sockmap = fast ? Sockmap.global() : null;
            List<java.net.InetSocketAddress> d = new ArrayList<>();
            for (String a : downstream) {
                int colon = a.lastIndexOf(':');
                d.add(colon < 0 ? new java.net.InetSocketAddress(java.net.InetAddress.ofLiteral("127.0.0.1"), Integer.parseInt(a))
                        : new java.net.InetSocketAddress(java.net.InetAddress.ofLiteral(a.substring(0, colon)),
                                Integer.parseInt(a.substring(colon + 1))));
            }
            try (RagService s = start(r, new Settings(dim, docs, seed, candidates, topK, threshold), fast,
                    new java.net.InetSocketAddress(java.net.InetAddress.ofLiteral(bind), port), d)) {
                System.out.println("READY " + s.port() + " " + s.info());
                System.out.flush();
                BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
                String line;
                while ((line = in.readLine()) != null) {
                    // runs until the driver closes our standard input; answers its questions meanwhile
                    if (line.equals("TIMES")) {
                        // alone in this process: its co-located lending is the process's
                        System.out.println(s.times().withLent(io.github.sockmap4j.colocated.grpc.ColocatedGrpc.messagesLent())
                                .line());
                        System.out.flush();
                    }
                }
            } finally {
                if (sockmap != null) {
                    sockmap.close(); // explicitly, not left to the exit hook
                }
            }
            return 0;
        }
    }

    public static void main(String[] args) {
        System.exit(new CommandLine(new Main()).execute(args));
    }
}
