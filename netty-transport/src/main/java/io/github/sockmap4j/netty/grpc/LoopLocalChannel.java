package io.github.sockmap4j.netty.grpc;

import io.grpc.CallOptions;
import io.grpc.ClientCall;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.netty.channel.EventLoop;
import io.netty.channel.EventLoopGroup;
import io.netty.util.concurrent.EventExecutor;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;

/**
 * A gRPC channel with a channel (and so a connection) of its own on each event loop of a group: a
 * call made on one of those loops goes out on that loop's channel, so its request is written by the
 * thread that made it, with no hand-off to another loop (which would write that loop's eventfd to
 * wake it), and its reply is read, and with {@link SockmapGrpc#runOnEventLoops(io.grpc.netty.NettyChannelBuilder)}
 * its callbacks run, on that same thread. Calls made on any other thread take the loops' channels in
 * turn. For a service whose handlers, running on the loops, call other services: a gateway that
 * chains calls from its callbacks keeps a request on one thread from its first byte to its reply.
 *
 * <p>What it costs: one connection per loop to the same target instead of one, and each loop's
 * calls share its connection's HTTP/2 flow control.
 *
 * <p><b>Note:</b> threadsafe.
 */
public final class LoopLocalChannel extends ManagedChannel {
    private final EventLoop[] loops;
    private final ManagedChannel[] channels;
    private final AtomicInteger next = new AtomicInteger();

    private LoopLocalChannel(EventLoop[] loops, ManagedChannel[] channels) {
        this.loops = loops;
        this.channels = channels;
    }

    /**
     * A channel per loop of {@code group}, each made by {@code build} from its loop (an
     * {@link EventLoop} is a group of one): give it to the builder's {@code eventLoopGroup}, or to
     * {@link SockmapGrpc#configure(io.grpc.netty.NettyChannelBuilder, EventLoopGroup)}.
     *
     * <pre>{@code
     * ManagedChannel search = LoopLocalChannel.of(loops, loop -> SockmapGrpc.runOnEventLoops(
     *         SockmapGrpc.configure(NettyChannelBuilder.forAddress(host, port), loop)).usePlaintext().build());
     * }</pre>
     *
     * @param group the loops, the same the calls are made on
     * @param build makes the channel of one loop
     * @return the channel
     * @throws IllegalArgumentException if the group's executors are not event loops
     */
    public static LoopLocalChannel of(EventLoopGroup group, Function<EventLoop, ManagedChannel> build) {
        Objects.requireNonNull(build, "build");
        List<EventLoop> loops = new ArrayList<>();
        for (EventExecutor e : group) {
            if (!(e instanceof EventLoop loop)) {
                throw new IllegalArgumentException("the group's executors are not event loops: " + e);
            }
            loops.add(loop);
        }
        ManagedChannel[] channels = new ManagedChannel[loops.size()];
        try {
            for (int i = 0; i < channels.length; i++) {
                channels[i] = Objects.requireNonNull(build.apply(loops.get(i)), "build returned null");
            }
        } catch (RuntimeException | Error e) {
            for (ManagedChannel c : channels) {
                if (c != null) {
                    c.shutdownNow();
                }
            }
            throw e;
        }
        return new LoopLocalChannel(loops.toArray(EventLoop[]::new), channels);
    }

    /** The channel of the loop this thread is, else the next in turn. */
    ManagedChannel current() {
        for (int i = 0; i < loops.length; i++) {
            if (loops[i].inEventLoop()) {
                return channels[i];
            }
        }
        return channels[Math.floorMod(next.getAndIncrement(), channels.length)];
    }

    @Override
    public <Q, A> ClientCall<Q, A> newCall(MethodDescriptor<Q, A> method, CallOptions options) {
        return current().newCall(method, options);
    }

    @Override
    public String authority() {
        return channels[0].authority();
    }

    @Override
    public LoopLocalChannel shutdown() {
        for (ManagedChannel c : channels) {
            c.shutdown();
        }
        return this;
    }

    @Override
    public LoopLocalChannel shutdownNow() {
        for (ManagedChannel c : channels) {
            c.shutdownNow();
        }
        return this;
    }

    @Override
    public boolean isShutdown() {
        for (ManagedChannel c : channels) {
            if (!c.isShutdown()) {
                return false;
            }
        }
        return true;
    }

    @Override
    public boolean isTerminated() {
        for (ManagedChannel c : channels) {
            if (!c.isTerminated()) {
                return false;
            }
        }
        return true;
    }

    @Override
    public boolean awaitTermination(long timeout, TimeUnit unit) throws InterruptedException {
        long end = System.nanoTime() + unit.toNanos(timeout);
        for (ManagedChannel c : channels) {
            if (!c.awaitTermination(Math.max(0, end - System.nanoTime()), TimeUnit.NANOSECONDS)) {
                return false;
            }
        }
        return true;
    }

    @Override
    public String toString() {
        return "LoopLocalChannel(" + channels.length + " loops, " + authority() + ")";
    }
}
