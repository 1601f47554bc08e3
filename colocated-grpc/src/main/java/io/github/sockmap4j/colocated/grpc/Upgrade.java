package io.github.sockmap4j.colocated.grpc;

import io.github.sockmap4j.colocated.BrokerDirectory;
import io.github.sockmap4j.colocated.Handover;
import io.github.sockmap4j.colocated.SharedRegion;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.Context;
import io.grpc.Grpc;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import java.io.IOException;
import java.lang.ref.WeakReference;
import java.net.SocketAddress;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.WeakHashMap;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;

/**
 * A channel's side of the agreement: its first call starts one on the channel's TCP connection
 * (that call and those until it ends go over HTTP/2); once the region is handed over, every new
 * call goes over the co-located connection, until it ends, when calls go over HTTP/2 again and a
 * new agreement is tried later. An agreement that falls back is counted with its reason and tried
 * again after a pause that grows (a minute to half an hour for reasons a retry does not change, a
 * second to a minute for the others).
 *
 * <p>The channel's calls all move to the one server that agreed; so a channel that spreads its
 * calls over several servers keeps them on HTTP/2, where its balancer puts them
 * ({@link Fallback#BALANCED}): one whose builder names a load-balancing policy other than
 * {@code pick_first} (where its lifelines cannot see its connections), and, where they can
 * ({@link ChannelConnections}), one connected to more than one server at once, when it agrees or
 * later, whichever policy it has.
 */
final class Upgrade implements ClientInterceptor {
    static final Duration AGREE_TIMEOUT = Duration.ofSeconds(5);
    private static final Executor AGREEING = Executors.newCachedThreadPool(r ->
            Thread.ofPlatform().daemon().name("sockmap4j-colocated-agree").unstarted(r));

    /**
     * Whether a channel's co-located connection is read on the event loop of the TCP connection it
     * was agreed over, where the transport says which ({@link ReadLoop.Finder}) and that loop can
     * ({@code -Dsockmap4j.colocated.readOnLoops}, default true); false: a thread of its own.
     */
    static final boolean READ_ON_LOOPS = Boolean.parseBoolean(System.getProperty("sockmap4j.colocated.readOnLoops", "true"));

    private final long maxCapacity;
    private final Function<SocketAddress, ? extends CompletionStage<?>> lifelines;
    private final ManagedChannelBuilder<?> builder;
    private ChannelSettings settings; // read once the channel is built, at its first hand-over
    private String unreadable;
    /**
     * Each channel built from the builder, by what its interceptors are given (one object a channel,
     * held weakly: a channel dropped takes its state with it), and the one of the last call.
     */
    private final Map<Channel, Link> links = new WeakHashMap<>();
    private volatile Link last;

    /**
     * @param builder the channel's builder, whose executor and limits its co-located connections
     *                take ({@link ChannelSettings}); null for gRPC's defaults
     */
    Upgrade(long maxCapacity, Function<SocketAddress, ? extends CompletionStage<?>> lifelines,
            ManagedChannelBuilder<?> builder) {
        this.maxCapacity = maxCapacity;
        this.lifelines = lifelines;
        this.builder = builder;
        if (lifelines instanceof ChannelConnections c) {
            c.onConnected(this::connected);
        }
    }

    @Override
    public <Q, R> ClientCall<Q, R> interceptCall(MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
        if (method.getFullMethodName().equals(Agreement.METHOD.getFullMethodName())) {
            return next.newCall(method, options);
        }
        return linkOf(next).interceptCall(method, options, next);
    }

    /** {@code next}'s channel's own agreement state: each channel built from the builder agrees on its own. */
    private Link linkOf(Channel next) {
        Link l = last;
        if (l != null && l.next.get() == next) {
            return l;
        }
        synchronized (links) {
            l = links.computeIfAbsent(next, Link::new);
        }
        last = l;
        return l;
    }

    /** One of the builder's channels connected to {@code server}: each channel of it looks whether it balances. */
    private void connected(SocketAddress server) {
        List<Link> all;
        synchronized (links) {
            all = new ArrayList<>(links.values());
        }
        for (Link l : all) {
            l.connected(server);
        }
    }

    /**
     * Where this channel is connected to servers other than {@code remote} now (its lifelines know
     * its connections), the words that say so; else null.
     */
    private String otherServers(SocketAddress remote) {
        if (!(lifelines instanceof ChannelConnections c)) {
            return null;
        }
        java.util.Set<SocketAddress> servers = c.remotes();
        if (remote == null || servers.stream().allMatch(remote::equals)) {
            return null;
        }
        return "this channel is connected to " + servers.size() + " servers at once (" + servers + "): its load "
                + "balancer spreads its calls over them, and a co-located connection to " + remote + " would not";
    }

    /** The channel's settings, read once; null where its builder could not be read ({@link #unreadable} says why). */
    private synchronized ChannelSettings settings() {
        if (settings == null && unreadable == null) {
            try {
                settings = builder == null ? ChannelSettings.DEFAULTS : ChannelSettings.of(builder);
            } catch (ReflectiveOperationException | RuntimeException e) {
                unreadable = "this channel's builder (" + builder.getClass().getName() + ") keeps its executor and "
                        + "limits where this version does not read them (" + e.getMessage() + "; read as gRPC 1.84 "
                        + "keeps them): its calls stay on HTTP/2, where they run as it was built";
            }
        }
        return settings;
    }

    /**
     * Tells the server that accepted an agreement that no region will come for {@code nonce}, so
     * that it stops waiting for one now (it waits 10 s, and holds one of a few places meanwhile);
     * over the channel's HTTP/2, answered or not.
     */
    private static void withdraw(Channel next, byte[] nonce) {
        try {
            ClientCall<byte[], byte[]> call = next.newCall(Agreement.METHOD,
                    CallOptions.DEFAULT.withDeadlineAfter(AGREE_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS));
            call.start(new ClientCall.Listener<>() {
            }, new Metadata());
            call.request(1);
            call.sendMessage(Agreement.withdrawal(nonce));
            call.halfClose();
        } catch (RuntimeException e) {
            // the channel is shut down: the server's wait ends on its own
        }
    }

    private static boolean lasting(Fallback f) {
        return switch (f) {
            case BUSY, FAILED, NO_MEMORY -> false;
            default -> true;
        };
    }

    /** One channel's agreements and co-located connection. */
    private final class Link {
        private final WeakReference<Channel> next;
        private final Object lock = new Object();
        private ManagedChannel colocated;
        private SocketAddress colocatedWith; // the server, as the agreement's TCP connection saw it
        private ColocatedClientTransport[] colocatedTransport; // its transport, once made
        private boolean agreeing;
        private boolean never; // its builder balances: no agreement, ever
        /** Whether the channel was shut down now: its co-located calls end at once too, not after their answers. */
        private volatile java.util.function.BooleanSupplier shutdownNow = () -> false;
        private long notBefore = System.nanoTime();
        private long pauseNanos;

        Link(Channel next) {
            this.next = new WeakReference<>(next);
        }

        <Q, R> ClientCall<Q, R> interceptCall(MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
            ManagedChannel c;
            boolean start = false;
            synchronized (lock) {
                c = colocated;
                if (c == null && !agreeing && !never && System.nanoTime() - notBefore >= 0) {
                    agreeing = true;
                    start = true;
                }
            }
            if (start) {
                // the channel's agreement, not the caller's: a call made from a handler carries its request's
                // context, which ends (cancelled) with that request, mid-agreement
                Context.ROOT.run(() -> agree(next));
            }
            return c != null ? c.newCall(method, options) : next.newCall(method, options);
        }

        private void agree(Channel next) {
            shutdownNow = ChannelSettings.shutdownNowOf(next);
            ChannelSettings s = settings();
            // where the lifelines see the channel's connections, they tell whether it balances over several
            // servers (round robin over one address, as Spring gRPC's channels have by default, does not)
            if (s != null && s.balancer() != null && !(lifelines instanceof ChannelConnections)) {
                synchronized (lock) {
                    never = true;
                    agreeing = false;
                }
                ColocatedGrpc.count(Fallback.BALANCED, "channel to " + next.authority() + ": its builder names the "
                        + "load-balancing policy '" + s.balancer() + "', which spreads its calls over its servers; a "
                        + "co-located connection to one would not, so they stay where the balancer puts them (where its "
                        + "lifelines see its connections, as SockmapGrpc's do, a balancer with one server moves)");
                return;
            }
            long offeredLend = ColocatedGrpc.lendBytes();
            Metadata offer = new Metadata();
            if (offeredLend > 0) {
                offer.put(Agreement.LEND, Long.toString(offeredLend));
            }
            ClientCall<byte[], byte[]> call = next.newCall(Agreement.METHOD,
                    CallOptions.DEFAULT.withDeadlineAfter(AGREE_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS));
            call.start(new ClientCall.Listener<>() {
                private byte[] answer;
                private SocketAddress local;
                private SocketAddress remote;
                private long lend;

                @Override
                public void onHeaders(Metadata headers) {
                    local = call.getAttributes().get(Grpc.TRANSPORT_ATTR_LOCAL_ADDR);
                    remote = call.getAttributes().get(Grpc.TRANSPORT_ATTR_REMOTE_ADDR);
                    lend = offeredLend == 0 ? 0 : Agreement.lendBytes(headers, offeredLend);
                }

                @Override
                public void onMessage(byte[] message) {
                    answer = message;
                }

                @Override
                public void onClose(Status status, Metadata trailers) {
                    SocketAddress l = local != null ? local : call.getAttributes().get(Grpc.TRANSPORT_ATTR_LOCAL_ADDR);
                    SocketAddress r = remote != null ? remote : call.getAttributes().get(Grpc.TRANSPORT_ATTR_REMOTE_ADDR);
                    long agreedLend = lend;
                    AGREEING.execute(() -> settle(status, answer, l, r, next, agreedLend));
                }
            }, offer);
            call.request(1);
            call.sendMessage(Agreement.offer());
            call.halfClose();
        }

        private void settle(Status status, byte[] answer, SocketAddress local, SocketAddress remote, Channel next,
                            long lend) {
            String authority = next.authority();
            Fallback reason;
            String words;
            if (!status.isOk()) {
                reason = status.getCode() == Status.Code.UNIMPLEMENTED ? Fallback.NOT_OURS : Fallback.FAILED;
                words = "the agreement call ended " + status.getCode()
                        + (status.getDescription() == null ? "" : ": " + status.getDescription());
            } else {
                Agreement.Answer a;
                try {
                    a = Agreement.parse(answer == null ? new byte[0] : answer);
                } catch (IllegalArgumentException e) {
                    a = new Agreement.Decline(Fallback.FAILED, "a malformed answer: " + e.getMessage());
                }
                if (a instanceof Agreement.Decline d) {
                    reason = d.reason();
                    words = "the server declined: " + d.words();
                } else {
                    Agreement.Accept accept = (Agreement.Accept) a;
                    Fallback[] why = new Fallback[1];
                    words = handOver(accept, local, remote, authority, why, lend);
                    if (words == null) {
                        return;
                    }
                    reason = why[0];
                    withdraw(next, accept.nonce());
                }
            }
            ColocatedGrpc.count(reason, "channel to " + authority + ": " + words);
            synchronized (lock) {
                agreeing = false;
                long first = lasting(reason) ? TimeUnit.MINUTES.toNanos(1) : TimeUnit.SECONDS.toNanos(1);
                long most = lasting(reason) ? TimeUnit.MINUTES.toNanos(30) : TimeUnit.MINUTES.toNanos(1);
                pauseNanos = pauseNanos == 0 ? first : Math.min(most, pauseNanos * 2);
                notBefore = System.nanoTime() + pauseNanos;
            }
        }

        /** Hands a region over as accepted; null when the calls moved, else why not (its reason in {@code why[0]}). */
        private String handOver(Agreement.Accept accept, SocketAddress local, SocketAddress remote, String authority,
                                Fallback[] why, long lend) {
            if (!Agreement.sameEnd(accept.clientAsSeen(), local)) {
                why[0] = Fallback.PROXIED;
                return "the server saw this connection come from " + accept.clientAsSeen() + ", its end here is " + local;
            }
            String others = otherServers(remote);
            if (others != null) {
                why[0] = Fallback.BALANCED;
                return others;
            }
            ChannelSettings s = settings();
            if (s == null) {
                why[0] = Fallback.CHANNEL_UNREADABLE;
                return unreadable;
            }
            long capacity = accept.capacity();
            if (capacity > maxCapacity) {
                why[0] = Fallback.NO_MEMORY;
                return "the server asked for rings of " + capacity + " bytes; this process takes at most " + maxCapacity;
            }
            SharedRegion region;
            // read on the event loop of the TCP connection it came over, where that loop can (the switch aside)
            ReadLoop loop = READ_ON_LOOPS && lifelines instanceof ReadLoop.Finder f ? f.readLoopFor(local) : null;
            try {
                region = SharedRegion.create("sm4j-grpc", capacity, 2 * lend, loop != null);
            } catch (IOException | RuntimeException e) {
                why[0] = Fallback.NO_MEMORY;
                return "rings of " + capacity + " bytes: " + e.getMessage();
            }
            try {
                BrokerDirectory.offer(accept.socket(), accept.nonce(), region, AGREE_TIMEOUT);
            } catch (Handover.NoListenerException e) {
                region.close();
                why[0] = Fallback.NO_BROKER;
                return e.getMessage();
            } catch (Handover.RefusedException e) {
                region.close();
                why[0] = e.reason().startsWith("not allowed") ? Fallback.NOT_ALLOWED : Fallback.FAILED;
                return e.getMessage();
            } catch (IOException | RuntimeException e) {
                region.close();
                why[0] = Fallback.FAILED;
                return "the hand-over: " + e.getMessage();
            }
            ManagedChannel[] made = new ManagedChannel[1];
            ColocatedClientTransport[] transport = new ColocatedClientTransport[1];
            ManagedChannel ch = s.applyTo(ColocatedChannelBuilder.forRegion(region, authority).readOn(loop))
                    .whenEnded(() -> {
                        retire(made[0]); // at once: a call made until the pool ran ended() would fail
                        AGREEING.execute(() -> ended(made[0]));
                    })
                    .onTransport(t -> {
                        transport[0] = t;
                        // the server's GOAWAY (its TCP connection went away, or it shuts down)
                        t.onGoAway(() -> leave(made[0], t, Status.UNAVAILABLE.withDescription(
                                "the co-located server said the connection goes away")));
                    })
                    .build();
            made[0] = ch;
            ch.getState(true); // its connection starts reading now, so an end is seen before a call
            synchronized (lock) {
                colocated = ch;
                colocatedWith = remote;
                colocatedTransport = transport;
                agreeing = false;
                pauseNanos = 0;
            }
            CompletionStage<?> tcpEnded = lifelines.apply(local);
            if (tcpEnded != null) {
                tcpEnded.whenComplete((x, e) -> {
                    ColocatedClientTransport t = transport[0];
                    if (t != null) {
                        leave(ch, t, Status.UNAVAILABLE.withDescription("the TCP connection " + local + " ended"));
                    } else {
                        retire(ch);
                        AGREEING.execute(() -> ended(ch));
                    }
                });
            }
            ColocatedGrpc.countUpgrade("channel to " + authority + ": calls go co-located from " + local);
            return null;
        }

        /**
         * One of the channel's TCP connections connected, to {@code server}: where it is another server
         * than the co-located connection's, the channel balances, and its new calls go back to HTTP/2
         * (the co-located connection ends once its calls have; an agreement is tried again later).
         */
        void connected(SocketAddress server) {
            ManagedChannel ch;
            SocketAddress with;
            ColocatedClientTransport t;
            synchronized (lock) {
                ch = colocated;
                with = colocatedWith;
                if (ch == null || with == null || with.equals(server)) {
                    return;
                }
                t = colocatedTransport[0];
                pauseNanos = 0;
            }
            Status reason = Status.UNAVAILABLE.withDescription("the channel connected to another server");
            if (t != null) {
                leave(ch, t, reason); // the calls on it finish there
            } else {
                retire(ch);
                AGREEING.execute(ch::shutdown);
            }
            ColocatedGrpc.count(Fallback.BALANCED, "channel to " + with + ": it connected to " + server + " too, so its "
                    + "load balancer spreads its calls; they go back to HTTP/2 where it puts them");
        }

        /**
         * The co-located connection goes away (its TCP connection ended, or the server said so): new
         * calls go over HTTP/2 at once; a moment later, when the calls that took the connection just
         * before have opened their streams, it drains ({@link FrameDispatch#drain}): the calls on it run
         * to their end while the server lives, then it closes, and {@code whenEnded} shuts its channel down.
         */
        private void leave(ManagedChannel ch, ColocatedClientTransport t, Status reason) {
            retire(ch);
            java.util.function.BooleanSupplier forced = shutdownNow;
            if (forced.getAsBoolean()) {
                t.shutdownNow(Status.UNAVAILABLE.withDescription("the channel was shut down now (" + reason.getDescription() + ")"));
                return;
            }
            try {
                t.timer().schedule(() -> t.drain(reason, forced), FrameDispatch.DRAIN_PING_NANOS, TimeUnit.NANOSECONDS);
            } catch (java.util.concurrent.RejectedExecutionException e) {
                t.drain(reason, forced);
            }
        }

        /** The co-located connection ended: new calls go over HTTP/2, and another agreement is tried in a second. */
        private void retire(ManagedChannel ch) {
            synchronized (lock) {
                if (ch != null && colocated == ch) {
                    colocated = null;
                    colocatedWith = null;
                    colocatedTransport = null;
                    notBefore = System.nanoTime() + TimeUnit.SECONDS.toNanos(1);
                }
            }
        }

        /** As {@link #retire}, and the co-located channel shut down (on the agreement's pool, never a reader). */
        private void ended(ManagedChannel ch) {
            retire(ch);
            if (ch != null) {
                ch.shutdownNow();
            }
        }
    }
}
