package io.github.sockmap4j.colocated.grpc;

import io.github.sockmap4j.colocated.BrokerDirectory;
import io.github.sockmap4j.colocated.Handover;
import io.github.sockmap4j.colocated.SharedRegion;
import io.grpc.Attributes;
import io.grpc.Grpc;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerServiceDefinition;
import io.grpc.ServerTransportFilter;
import io.grpc.ServiceDescriptor;
import io.grpc.Status;
import io.grpc.internal.ObjectPool;
import io.grpc.internal.SharedResourcePool;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.HexFormat;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A server's side of the agreement: the {@code Agree} method, the hand-over that takes the
 * client's region, and the TCP connections that are each co-located connection's lifeline.
 *
 * <p>Who may use it: any client of the server may call {@code Agree} (it learns a nonce and where
 * the hand-over listens, nothing a call could not reach already); only a process of this process's
 * uid that reaches the hand-over's socket (an abstract name: this network namespace; or its file in
 * the broker directory, {@link ColocatedGrpc#BROKER_DIR}, which only pods that mount it reach) and
 * proves the nonce gets a co-located connection, one per TCP connection. What it moves: that TCP connection's
 * calls, into this same server through the door its TCP connections use ({@link ServerDoor}), with
 * that connection's attributes (addresses, TLS session) and {@link ColocatedGrpc#TRANSPORT_ATTR_COLOCATED}.
 * When the TCP connection ends, so does its co-located connection.
 */
final class Acceptor {
    private static final Logger LOG = LoggerFactory.getLogger(Acceptor.class);
    private static final SecureRandom RANDOM = new SecureRandom();
    /** How long an accepted agreement waits for its region. */
    static final Duration OFFER_WAIT = Duration.ofSeconds(10);
    static final int MAX_PENDING = 64;

    private final long capacity;
    private final int maxConnections;
    private final ServerServiceDefinition definition;
    private final Map<Lifeline, ColocatedConnection> connections = new ConcurrentHashMap<>();
    private final Set<Lifeline> live = ConcurrentHashMap.newKeySet();
    private final AtomicInteger pending = new AtomicInteger();
    /** The agreements waiting for their regions, by nonce (hex), each with its TCP connection. */
    private final Map<String, Waiting> waiting = new ConcurrentHashMap<>();
    /** The agreements all servers of this process wait on. */
    private static final AtomicInteger WAITING = new AtomicInteger();
    private final ObjectPool<ScheduledExecutorService> schedulers = SharedResourcePool.forResource(DeadlineTimer.RESOURCE);
    private volatile ServerDoor door;
    /** Where the server's TCP connections are read, by the client's address; null: none known. */
    private final ReadLoop.Finder loops;

    private record Waiting(Lifeline lifeline, CompletableFuture<?> region) {
    }

    /** A TCP connection, by its two ends as this server sees them. */
    private record Lifeline(SocketAddress remote, SocketAddress local) {
        static Lifeline of(Attributes a) {
            return a == null ? null : new Lifeline(a.get(Grpc.TRANSPORT_ATTR_REMOTE_ADDR), a.get(Grpc.TRANSPORT_ATTR_LOCAL_ADDR));
        }
    }

    Acceptor(long capacity, int maxConnections, ReadLoop.Finder loops) {
        this.capacity = capacity;
        this.maxConnections = maxConnections;
        this.loops = loops;
        ServerCallHandler<byte[], byte[]> agree = (call, headers) -> {
            call.request(1);
            return new ServerCall.Listener<>() {
                private byte[] offer;

                @Override
                public void onMessage(byte[] message) {
                    offer = message;
                }

                @Override
                public void onHalfClose() {
                    long own = ColocatedGrpc.lendBytes();
                    long lend = own == 0 ? 0 : Agreement.lendBytes(headers, own);
                    byte[] answer = answer(offer, call.getAttributes(), lend);
                    Metadata h = new Metadata();
                    if (lend > 0) {
                        h.put(Agreement.LEND, Long.toString(lend));
                    }
                    call.sendHeaders(h);
                    call.sendMessage(answer);
                    call.close(Status.OK, new Metadata());
                }
            };
        };
        this.definition = ServerServiceDefinition.builder(new ServiceDescriptor(Agreement.SERVICE, Agreement.METHOD))
                .addMethod(Agreement.METHOD, agree)
                .build();
    }

    ServerServiceDefinition definition() {
        return definition;
    }

    /** Follows the server's TCP connections: a co-located connection lives no longer than its own. */
    ServerTransportFilter lifelines() {
        return new ServerTransportFilter() {
            @Override
            public Attributes transportReady(Attributes a) {
                if (!Boolean.TRUE.equals(a.get(ColocatedGrpc.TRANSPORT_ATTR_COLOCATED))) {
                    Lifeline l = Lifeline.of(a);
                    if (l.remote() != null) {
                        live.add(l);
                    }
                }
                return a;
            }

            @Override
            public void transportTerminated(Attributes a) {
                if (a == null || Boolean.TRUE.equals(a.get(ColocatedGrpc.TRANSPORT_ATTR_COLOCATED))) {
                    return;
                }
                Lifeline l = Lifeline.of(a);
                live.remove(l);
                ColocatedConnection c = connections.remove(l);
                if (c != null) {
                    Status ended = Status.UNAVAILABLE.withDescription("its TCP connection " + l.remote() + " ended");
                    if (c.handler() instanceof FrameDispatch f) {
                        f.drain(ended); // its calls run to their end while the client lives
                    } else {
                        c.close(ended);
                    }
                }
            }
        };
    }

    /** The answer to one client's offer, over the TCP connection that {@code attributes} describe. */
    private byte[] answer(byte[] offer, Attributes attributes, long lend) {
        byte[] withdrawn = offer == null ? null : Agreement.withdrawn(offer);
        if (withdrawn != null) {
            return withdraw(withdrawn, attributes);
        }
        Agreement.Answer a = decide(offer, attributes, lend);
        if (a instanceof Agreement.Decline d) {
            ColocatedGrpc.count(d.reason(), "declined " + Lifeline.of(attributes).remote() + ": " + d.words());
            return d.encode();
        }
        return ((Agreement.Accept) a).encode();
    }

    /** The agreements the servers of this process wait on for their regions now. */
    static int waitingNow() {
        return WAITING.get();
    }

    /**
     * A client withdrew its agreement (it will hand no region over: it cannot reach the hand-over,
     * a proxy is between, its channel balances): the wait for it ends now, not in {@link #OFFER_WAIT},
     * so that it holds none of the {@link #MAX_PENDING} places. Only over the TCP connection that
     * was given the nonce.
     */
    private byte[] withdraw(byte[] nonce, Attributes attributes) {
        String key = java.util.HexFormat.of().formatHex(nonce);
        Waiting w = waiting.get(key);
        if (w == null || !w.lifeline().equals(Lifeline.of(attributes)) || !waiting.remove(key, w)) {
            return "UNKNOWN".getBytes(java.nio.charset.StandardCharsets.US_ASCII);
        }
        w.region().cancel(false);
        return "WITHDRAWN".getBytes(java.nio.charset.StandardCharsets.US_ASCII);
    }

    private Agreement.Answer decide(byte[] offer, Attributes attributes, long lend) {
        int version;
        try {
            version = offer == null ? -1 : Agreement.offeredVersion(offer);
        } catch (IllegalArgumentException e) {
            version = -1;
        }
        if (version != Agreement.VERSION) {
            return new Agreement.Decline(Fallback.OTHER_VERSION, "this server speaks version " + Agreement.VERSION);
        }
        if (Boolean.TRUE.equals(attributes.get(ColocatedGrpc.TRANSPORT_ATTR_COLOCATED))) {
            return new Agreement.Decline(Fallback.FAILED, "this call came over a co-located connection already");
        }
        Lifeline lifeline = Lifeline.of(attributes);
        if (!(lifeline.remote() instanceof InetSocketAddress client) || !(lifeline.local() instanceof InetSocketAddress)) {
            return new Agreement.Decline(Fallback.NO_BROKER, "not a TCP connection");
        }
        if (connections.containsKey(lifeline)) {
            return new Agreement.Decline(Fallback.BUSY, "this TCP connection has a co-located connection already");
        }
        if (connections.size() >= maxConnections) {
            return new Agreement.Decline(Fallback.BUSY, "this server has " + maxConnections + " co-located connections");
        }
        ServerDoor d = door();
        if (d == null) {
            return new Agreement.Decline(Fallback.SERVER_UNREACHABLE, "see this server's log");
        }
        Broker broker;
        try {
            broker = Broker.get();
        } catch (IOException e) {
            LOG.warn("No co-located connections: the hand-over could not listen ({}).", e.getMessage());
            return new Agreement.Decline(Fallback.NO_BROKER, "the server's hand-over could not listen");
        }
        String dir = System.getProperty(ColocatedGrpc.BROKER_DIR);
        if (dir != null && !dir.isBlank()) {
            broker.alsoIn(dir); // where it cannot, said once; the abstract socket still serves this namespace
        }
        if (pending.incrementAndGet() > MAX_PENDING) {
            pending.decrementAndGet();
            return new Agreement.Decline(Fallback.BUSY, MAX_PENDING + " agreements wait for their regions");
        }
        byte[] nonce = new byte[32];
        RANDOM.nextBytes(nonce);
        int uid = Handover.ownUid();
        String key = java.util.HexFormat.of().formatHex(nonce);
        CompletableFuture<Handover.Received> region = broker.listener.expect(nonce, capacity, 2 * lend, peer -> peer == uid)
                .orTimeout(OFFER_WAIT.toMillis(), TimeUnit.MILLISECONDS);
        waiting.put(key, new Waiting(lifeline, region));
        WAITING.incrementAndGet();
        region.whenComplete((received, failure) -> {
                    waiting.remove(key);
                    WAITING.decrementAndGet();
                    pending.decrementAndGet();
                    if (failure == null) {
                        attach(received.region(), lifeline, attributes, d);
                        return;
                    }
                    broker.listener.forget(nonce);
                    Throwable why = failure instanceof CompletionException ? failure.getCause() : failure;
                    if (why instanceof Handover.NotAllowedException) {
                        ColocatedGrpc.count(Fallback.NOT_ALLOWED, why.getMessage());
                    } else if (why instanceof CancellationException) {
                        LOG.debug("{} withdrew its agreement.", client);
                    } else if (why instanceof TimeoutException) {
                        ColocatedGrpc.count(Fallback.FAILED, "no region came for " + client + " within " + OFFER_WAIT);
                    } else {
                        ColocatedGrpc.count(Fallback.FAILED, "the hand-over for " + client + ": " + why.getMessage());
                    }
                });
        return new Agreement.Accept(client, broker.name, nonce, capacity);
    }

    private void attach(SharedRegion region, Lifeline lifeline, Attributes attributes, ServerDoor d) {
        String name = "agreed-" + lifeline.remote();
        ReadLoop loop = Upgrade.READ_ON_LOOPS && loops != null ? loops.readLoopFor(lifeline.remote()) : null;
        ColocatedConnection c = new ColocatedConnection(region, name, loop);
        if (d.server().isShutdown() || connections.putIfAbsent(lifeline, c) != null) {
            c.close(Status.UNAVAILABLE.withDescription("the server is shutting down"));
            return;
        }
        c.whenClosed(() -> connections.remove(lifeline, c));
        ColocatedServerTransport t = new ColocatedServerTransport(c, new ColocatedAddress(name), d.tracers(), schedulers,
                d.maxMessage(), d.maxMetadata(),
                attributes.toBuilder().set(ColocatedGrpc.TRANSPORT_ATTR_COLOCATED, Boolean.TRUE).build());
        t.start(d.listener().transportCreated(t));
        if (!live.contains(lifeline)) {
            // its TCP connection ended between the agreement and now
            connections.remove(lifeline, c);
            c.close(Status.UNAVAILABLE.withDescription("its TCP connection " + lifeline.remote() + " ended"));
            return;
        }
        ColocatedGrpc.countUpgrade("server: a co-located connection from " + lifeline.remote());
        LOG.debug("Co-located connection from {} attached.", lifeline.remote());
    }

    private ServerDoor door() {
        ServerDoor d = door;
        if (d == null) {
            Server s = ServerDoor.serverHolding(definition);
            if (s == null) {
                LOG.warn("No co-located connections: the server that serves this agreement is not in gRPC's channelz "
                        + "registry (built with a channelz of its own?).");
                return null;
            }
            try {
                d = ServerDoor.of(s);
            } catch (ReflectiveOperationException | RuntimeException e) {
                LOG.warn("No co-located connections: this gRPC version keeps its server's transports where sockmap4j "
                        + "cannot reach them ({}). Calls stay on HTTP/2.", e.toString());
                return null;
            }
            door = d;
        }
        return d;
    }

    /**
     * The process's hand-over listener: an abstract Unix socket (seen only in this network
     * namespace, gone with the process), with one daemon thread that takes offers; and, for each
     * broker directory named ({@link ColocatedGrpc#BROKER_DIR}), the same listener's socket as a
     * file there, with a thread of its own, removed as the process exits (one killed leaves it to
     * the next listener's sweep).
     */
    static final class Broker {
        private static Broker instance;
        final Handover.Listener listener;
        final String name;
        /** By directory: its socket there, or null where the directory refused it (said once). Under the broker's lock. */
        private final Map<String, BrokerDirectory.Placed> directories = new java.util.HashMap<>();
        /** Directories whose socket someone replaced, said once each. */
        private final Set<String> replacedSaid = new java.util.HashSet<>();

        private Broker(Handover.Listener listener, String name) {
            this.listener = listener;
            this.name = name;
        }

        static synchronized Broker get() throws IOException {
            if (instance == null) {
                byte[] r = new byte[8];
                RANDOM.nextBytes(r);
                String name = "@" + BrokerDirectory.PREFIX + ProcessHandle.current().pid() + "-" + HexFormat.of().formatHex(r);
                Broker b = new Broker(Handover.Listener.listen(Path.of(name)), name);
                Thread.ofPlatform().daemon().name("sockmap4j-colocated-handover").start(() -> run(b.listener));
                Runtime.getRuntime().addShutdownHook(Thread.ofPlatform().unstarted(b::closeDirectories));
                instance = b;
            }
            return instance;
        }

        /** Listens in {@code dir} too, from now on; false where the directory cannot take the socket (logged once). */
        synchronized boolean alsoIn(String dir) {
            if (directories.containsKey(dir)) {
                BrokerDirectory.Placed placed = directories.get(dir);
                if (placed == null) {
                    return false;
                }
                switch (placed.found()) {
                    case OURS -> {
                        return true;
                    }
                    case REPLACED -> {
                        if (replacedSaid.add(dir)) {
                            LOG.warn("Someone put a file of their own at this server's co-located hand-over socket {}: "
                                    + "channels in other network namespaces (pods) cannot reach it until it is removed "
                                    + "(check who may write into {}).", placed.socket(), dir);
                        }
                        return false;
                    }
                    case GONE -> {
                        LOG.warn("This server's co-located hand-over socket {} was removed; it listens there again.",
                                placed.socket());
                        placed.close();
                        directories.remove(dir);
                    }
                    default -> throw new IllegalStateException();
                }
            }
            try {
                BrokerDirectory d = BrokerDirectory.prepare(Path.of(dir));
                int swept = d.sweep();
                if (swept > 0) {
                    LOG.info("Removed {} co-located hand-over socket(s) that processes which ended left in {}.", swept,
                            d.path());
                }
                BrokerDirectory.Placed p = d.place(listener, name.substring(1));
                directories.put(dir, p);
                Thread.ofPlatform().daemon().name("sockmap4j-colocated-handover-dir").start(() -> run(p.listener()));
                return true;
            } catch (IOException | RuntimeException e) {
                LOG.warn("Co-located connections from other network namespaces (pods) cannot reach this server: "
                        + "-D{}={}: {}", ColocatedGrpc.BROKER_DIR, dir, e.getMessage());
                directories.put(dir, null);
                return false;
            }
        }

        /** Stops listening in {@code dir} and removes the socket there (for tests: a process leaves its directories as it exits). */
        static synchronized void leave(String dir) {
            if (instance != null) {
                synchronized (instance) {
                    BrokerDirectory.Placed p = instance.directories.remove(dir);
                    if (p != null) {
                        p.close();
                    }
                }
            }
        }

        private synchronized void closeDirectories() {
            directories.values().forEach(p -> {
                if (p != null) {
                    p.close();
                }
            });
        }

        private static void run(Handover.Listener at) {
            while (!at.isClosed()) {
                try {
                    // the listener lives as long as the process: no periodic wake while idle
                    at.acceptOne(Duration.ofSeconds(2), Duration.ofHours(1));
                } catch (IOException | RuntimeException e) {
                    LOG.debug("A co-located hand-over failed: {}", e.toString());
                    java.util.concurrent.locks.LockSupport.parkNanos(50_000_000L); // not a hot loop on a failing socket
                }
            }
        }
    }
}
