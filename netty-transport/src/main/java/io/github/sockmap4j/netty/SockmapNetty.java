package io.github.sockmap4j.netty;

import io.github.sockmap4j.OptIn;
import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.spi.RawSockets;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFactory;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.ServerSocketChannel;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.util.AttributeKey;
import io.netty.util.concurrent.Future;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What a Netty 4.2 application changes to take the fast path: the server channel factory,
 * whose channels opt their port in while bound, the client channel class and the
 * {@link IoHandlerFactory}: epoll where Linux epoll is available, NIO (plain TCP) where it is
 * not, with the reason logged once. The kernel accelerates the connections; the transport puts
 * two handlers first in each socket channel's pipeline: one publishes the channel's reads, one
 * holds its writes while its receiver has no credit (docs/in-flight-bound.md), which Netty sees
 * as ordinary back-pressure (the channel turns unwritable).
 *
 * <pre>{@code
 * EventLoopGroup group = new MultiThreadIoEventLoopGroup(SockmapNetty.ioHandlerFactory());
 * new ServerBootstrap().group(group).channelFactory(SockmapNetty.serverChannelFactory())...
 * new Bootstrap().group(group).channelFactory(SockmapNetty.socketChannelFactory())...
 * }</pre>
 *
 * <p>The static factories use {@link Sockmap#global()}, looked up as each channel is made; a
 * service that opens its own {@link Sockmap} passes it with {@link #of(Sockmap)} and uses that
 * instance's forms, which take the same arguments and check them alike (Java gives a static and an
 * instance method of one signature no common name):
 * <table>
 * <caption>static form over the global fast path, and its instance form</caption>
 * <tr><td>{@link #serverChannelFactory()}, {@link #serverChannelFactory(int)}</td>
 *     <td>{@link #serverChannels(int)}</td></tr>
 * <tr><td>{@link #socketChannelFactory()}</td><td>{@link #socketChannels()}</td></tr>
 * <tr><td>{@link #isAccelerated(Channel)}</td><td>{@link #accelerates(Channel)}</td></tr>
 * </table>
 */
public final class SockmapNetty {
    private static final Logger LOG = LoggerFactory.getLogger(SockmapNetty.class);
    private static final boolean EPOLL = Epoll.isAvailable();
    /** The opt-in of a server channel made by {@link #serverChannelFactory()}, once bound. */
    public static final AttributeKey<OptIn> OPT_IN = AttributeKey.valueOf(SockmapNetty.class, "optIn");

    static {
        String skew = versionSkew(io.netty.util.Version.identify(SockmapNetty.class.getClassLoader()));
        if (skew != null) {
            LOG.warn("Netty artifacts of different versions are on the class path ({}): Netty's epoll may not "
                    + "load and the transport then runs on NIO. Align them: import io.github.sockmap4j:sockmap4j-bom "
                    + "(it imports io.netty:netty-bom) or io.netty:netty-bom in <dependencyManagement>", skew);
        }
        if (!EPOLL) {
            Throwable why = Epoll.unavailabilityCause();
            boolean linux = System.getProperty("os.name", "").toLowerCase(java.util.Locale.ROOT).startsWith("linux");
            if (linux) {
                LOG.warn("Netty epoll is unavailable; sockmap4j's Netty transport uses NIO (redirected, but without "
                        + "read publication or credit): {}", String.valueOf(why));
            } else {
                LOG.info("Netty epoll is unavailable; sockmap4j's Netty transport uses NIO: {}", String.valueOf(why));
            }
        }
    }

    /**
     * The Netty artifacts whose versions differ from the others', as "artifact version" pairs, or
     * null when all agree. Netty's own jars say their versions (io.netty.util.Version).
     */
    static String versionSkew(java.util.Map<String, io.netty.util.Version> versions) {
        java.util.Map<String, java.util.List<String>> byVersion = new java.util.TreeMap<>();
        for (io.netty.util.Version v : versions.values()) {
            byVersion.computeIfAbsent(v.artifactVersion(), k -> new java.util.ArrayList<>()).add(v.artifactId());
        }
        if (byVersion.size() <= 1) {
            return null;
        }
        StringBuilder b = new StringBuilder();
        byVersion.forEach((version, ids) -> {
            java.util.Collections.sort(ids);
            b.append(b.isEmpty() ? "" : "; ").append(version).append(": ").append(String.join(", ", ids));
        });
        return b.toString();
    }

    private static final SockmapNetty GLOBAL = new SockmapNetty(Sockmap::global, "global");

    /** The fast path this instance's channels use, looked up as each channel is made. */
    private final Supplier<Sockmap> sockmap;
    private final String name;

    private SockmapNetty(Supplier<Sockmap> sockmap, String name) {
        this.sockmap = sockmap;
        this.name = name;
    }

    /**
     * The transport over {@link Sockmap#global()}, looked up as each channel is made: what the
     * static factories use.
     *
     * @return the global transport
     */
    public static SockmapNetty global() {
        return GLOBAL;
    }

    /**
     * The transport over {@code sockmap} instead of {@link Sockmap#global()}.
     *
     * @param sockmap the fast path its channels opt in to and are accelerated by
     * @return factories and queries for channels of that fast path
     */
    public static SockmapNetty of(Sockmap sockmap) {
        Objects.requireNonNull(sockmap, "sockmap");
        return new SockmapNetty(() -> sockmap, sockmap.toString());
    }

    /** Whether Netty's epoll transport is usable in this JVM. */
    public static boolean isEpollAvailable() {
        return EPOLL;
    }

    public static IoHandlerFactory ioHandlerFactory() {
        return EPOLL ? EpollIoHandler.newFactory() : NioIoHandler.newFactory();
    }

    /**
     * As {@link #ioHandlerFactory()}, with loops that poll for ready events for up to
     * {@code maxPoll} before they sleep, for as long as their sleeps have been shorter than that
     * (docs/lab-notes.md, "Polling before sleeping"): a reply that comes within the window then
     * wakes no thread. A loop whose events come seldom, or later than {@code maxPoll}, stops
     * polling by itself; on one CPU no loop polls. Zero is {@link #ioHandlerFactory()}.
     *
     * @param maxPoll the longest a loop polls before it sleeps, at most 1 ms
     * @return the factory
     */
    public static IoHandlerFactory ioHandlerFactory(Duration maxPoll) {
        Objects.requireNonNull(maxPoll, "maxPoll");
        if (maxPoll.isNegative() || maxPoll.compareTo(MAX_POLL) > 0) {
            throw new IllegalArgumentException("maxPoll must be between 0 and " + MAX_POLL + ": " + maxPoll);
        }
        return PollBeforeBlock.factory(ioHandlerFactory(), maxPoll.toNanos());
    }

    /**
     * What the polling loops of this JVM ({@link #ioHandlerFactory(Duration)}) have done so far:
     * how often a poll found work (a wake-up saved) and how often a loop slept all the same.
     *
     * @param pollsThatFoundWork polls that returned with events or tasks to run
     * @param sleeps             times a loop blocked after its window, or with no window
     * @param skippedForBusyCpus times a loop blocked without the poll its window asked for,
     *                           because tasks were waiting for the CPUs
     */
    public record PollCounts(long pollsThatFoundWork, long sleeps, long skippedForBusyCpus) {
    }

    /** The counts of every polling loop in this JVM since it started. */
    public static PollCounts pollCounts() {
        return new PollCounts(PollBeforeBlock.POLL_HITS.sum(), PollBeforeBlock.BLOCKS.sum(),
                PollBeforeBlock.BUSY_SKIPS.sum());
    }

    /** The longest poll {@link #ioHandlerFactory(Duration)} takes: a loop's sleep is cheaper beyond. */
    static final Duration MAX_POLL = Duration.ofMillis(1);

    /**
     * The quiet period {@link #shutdown} gives each event loop. Any non-zero period closes every
     * channel; 100 ms also rides out a loop thread preempted between two of its own steps.
     */
    static final Duration SHUTDOWN_QUIET_PERIOD = Duration.ofMillis(100);

    /**
     * Shuts the groups down together and waits until they have ended, every channel on them
     * closed: what a test or a service's stop wants from {@code shutdownGracefully(0, ...)}, which
     * does not always do it. With a quiet period of 0, a Netty 4.2 event loop whose shutdown lands
     * while it runs tasks ends without closing its channels (it checks for shutdown before its
     * tasks, and with no quiet period ends right after them): their sockets stay open, and
     * registered in the SOCKHASH, until the process exits. Measured and tested in
     * docs/use-it.md ("Shutting down event loops"). This uses a quiet period of 100 ms.
     *
     * @param timeout how long to wait in all (the loops close their channels at once, then end
     *                once no task has come for the quiet period, or at the latest at the timeout)
     * @param groups  the groups, each shut down at once, then waited for
     * @return whether all of them ended within {@code timeout}
     */
    public static boolean shutdown(Duration timeout, EventLoopGroup... groups) {
        long quiet = SHUTDOWN_QUIET_PERIOD.toMillis();
        long deadline = System.nanoTime() + timeout.toNanos();
        List<Future<?>> ends = new ArrayList<>(groups.length);
        for (EventLoopGroup g : groups) {
            ends.add(g.shutdownGracefully(quiet, Math.max(quiet, timeout.toMillis()), TimeUnit.MILLISECONDS));
        }
        boolean all = true;
        for (Future<?> end : ends) {
            all &= end.awaitUninterruptibly(Math.max(0, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime())));
        }
        return all;
    }

    /** Server channels (epoll, else NIO) whose bound port is opted in to {@link Sockmap#global()} until they close. */
    public static ChannelFactory<ServerSocketChannel> serverChannelFactory() {
        return GLOBAL.serverChannels(0);
    }

    /**
     * As {@link #serverChannelFactory()}, with the in-flight bound of the port's connections
     * fixed at {@code inFlightBoundBytes} (docs/in-flight-bound.md): how much a peer may
     * redirect to a connection that it has not read yet.
     *
     * @param inFlightBoundBytes the bound, 0 for each receiver's own (what {@link #serverChannelFactory()} uses)
     * @return the factory
     * @throws IllegalArgumentException for a negative bound
     */
    public static ChannelFactory<ServerSocketChannel> serverChannelFactory(int inFlightBoundBytes) {
        return GLOBAL.serverChannels(inFlightBoundBytes);
    }

    /**
     * Server channels whose bound port is opted in to this instance's fast path until they close:
     * the instance form of {@link #serverChannelFactory(int)}.
     *
     * @param inFlightBoundBytes the in-flight bound of the port's connections, 0 for each receiver's own
     * @return the factory
     * @throws IllegalArgumentException for a negative bound
     */
    public ChannelFactory<ServerSocketChannel> serverChannels(int inFlightBoundBytes) {
        if (inFlightBoundBytes < 0) {
            throw new IllegalArgumentException("bound must be 0 (each receiver's own) or more: inFlightBoundBytes="
                    + inFlightBoundBytes);
        }
        OptInOnBind optIn = new OptInOnBind(this, inFlightBoundBytes);
        return new ChannelFactory<>() {
            @Override
            public ServerSocketChannel newChannel() {
                ServerSocketChannel ch = EPOLL ? new EpollServerSocketChannel() : new NioServerSocketChannel();
                ch.pipeline().addLast(optIn);
                return ch;
            }

            @Override
            public String toString() {
                return "SockmapNetty.serverChannelFactory(" + (EPOLL ? "epoll" : "nio") + ")";
            }
        };
    }

    /** The client channel class; {@link #socketChannelFactory()} also publishes its reads. */
    public static Class<? extends SocketChannel> socketChannelClass() {
        return EPOLL ? EpollSocketChannel.class : NioSocketChannel.class;
    }

    /**
     * Client channels (epoll, else NIO) that publish their reads, so that a server's replies
     * stay on the redirect under this client's in-flight bound; over {@link Sockmap#global()}.
     */
    public static ChannelFactory<SocketChannel> socketChannelFactory() {
        return GLOBAL.socketChannels();
    }

    /**
     * Client channels of this instance's fast path: the instance form of {@link #socketChannelFactory()}.
     *
     * @return the factory
     */
    public ChannelFactory<SocketChannel> socketChannels() {
        return new ChannelFactory<>() {
            @Override
            public SocketChannel newChannel() {
                // With sockmap4j.require=true and the fast path off this throws, and the bootstrap
                // fails the connect with it: no connection of this process goes by plain TCP then.
                Sockmap s = sockmap();
                if (!EPOLL) {
                    return new NioSocketChannel();
                }
                EpollSocketChannel ch = new EpollSocketChannel();
                addHandlers(ch, s, false);
                return ch;
            }

            @Override
            public String toString() {
                return "SockmapNetty.socketChannelFactory(" + (EPOLL ? "epoll" : "nio") + ")";
            }
        };
    }

    /** The fast path of this instance now: {@link Sockmap#global()} throws when required and off. */
    Sockmap sockmap() {
        return sockmap.get();
    }

    /**
     * The transport's two handlers, first in the pipeline: {@link PublishReads} sees every read
     * before the application does; {@link HoldForCredit} is the last stop before the socket.
     */
    static void addHandlers(EpollSocketChannel ch, Sockmap sockmap, boolean serverSide) {
        RawSockets sockets = RawSockets.of(sockmap);
        ch.pipeline().addFirst(PublishReads.NAME, new PublishReads(sockets, serverSide));
        ch.pipeline().addFirst(HoldForCredit.NAME, new HoldForCredit(sockets, serverSide));
    }

    /**
     * Whether an epoll channel of this transport holds writes for its receiver's credit now
     * (docs/in-flight-bound.md); false for other channels.
     */
    public static boolean isHoldingForCredit(Channel ch) {
        HoldForCredit h = ch.pipeline().get(HoldForCredit.class);
        return h != null && h.holding();
    }

    /**
     * Whether {@code ch} was made by this transport's factories: a socket channel with the
     * transport's handlers in its pipeline, or a server channel that opts its port in. Stock
     * channels of the same class (what a framework makes when it picks a class by itself) are not.
     *
     * @param ch any channel
     * @return whether it is one of the transport's
     */
    public static boolean isTransportChannel(Channel ch) {
        return ch.pipeline().get(PublishReads.NAME) != null || ch.pipeline().get(OptInOnBind.class) != null;
    }

    /** Whether a server channel made by {@link #serverChannelFactory()} has its port opted in. */
    public static boolean isOptedIn(Channel serverChannel) {
        OptIn o = serverChannel.attr(OPT_IN).get();
        return o != null && o.active();
    }

    /**
     * Whether an epoll socket channel's connection sends through the redirect now (checked
     * against the kernel's map of {@link Sockmap#global()}); false for other channels and where
     * the fast path is off.
     *
     * @param ch a channel of this transport
     * @return whether its sends are redirected
     */
    public static boolean isAccelerated(Channel ch) {
        return GLOBAL.accelerates(ch);
    }

    /**
     * As {@link #isAccelerated(Channel)}, for this instance's fast path: its instance form.
     *
     * @param ch a channel of this transport
     * @return whether its sends are redirected
     */
    public boolean accelerates(Channel ch) {
        if (!(ch instanceof EpollSocketChannel epoll) || !ch.isActive()) {
            return false;
        }
        return RawSockets.of(sockmap()).isAccelerated(epoll.fd().intValue());
    }

    @Override
    public String toString() {
        return "SockmapNetty[" + name + "]";
    }
}
