package io.github.sockmap4j.examples.rag;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.admin.SockmapAdmin;
import io.grpc.ManagedChannel;
import io.grpc.netty.NettyChannelBuilder;
import io.netty.channel.epoll.EpollSocketChannel;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * One path's running pipeline: its stages, the Services translated at connect for it (the fast
 * path's, in the node topology), the load generator's channel to its gateway, and the meter of
 * its measured phase. Closing it stops the gateway first (it holds channels to the others), then
 * the rest, and takes its Services out of the Service map, also after a failed start.
 */
final class Pipeline implements AutoCloseable {
    final boolean fast;
    final String label;
    final Map<RagService.Role, Stage> stages = new EnumMap<>(RagService.Role.class);
    /** The meter of the measured phase now under way: a fresh one for each load of the curve. */
    PathMeter meter;
    private final Sockmap sockmap;
    private final List<Long> proxies;
    private final Path pins;
    private final List<InetSocketAddress> translated = new ArrayList<>();
    private ManagedChannel gateway;
    private LoadGenerator load;

    /**
     * @param proxies the process ids of the pods' sidecar proxies on a meshed node (their CPU is
     *                counted with the stages'), else empty
     */
    Pipeline(boolean fast, String label, Sockmap sockmap, List<Long> proxies) {
        this.fast = fast;
        this.label = label;
        this.pins = sockmap != null && sockmap.isActive() ? sockmap.config().pinDirectory() : null;
        this.sockmap = sockmap;
        this.proxies = List.copyOf(proxies);
        this.meter = new PathMeter(fast, stages, sockmap, this.proxies);
    }

    /** Starts a new measured phase: a meter that has counted nothing yet. */
    PathMeter freshMeter() {
        meter = new PathMeter(fast, stages, sockmap, proxies);
        return meter;
    }

    /** Puts a Service whose connects go straight to {@code pod}, until close. */
    void translate(InetSocketAddress vip, InetSocketAddress pod) throws IOException {
        SockmapAdmin.of(pins).putService(new SockmapAdmin.Service(vip, List.of(pod), List.of(), false));
        translated.add(vip);
    }

    /** Dials the gateway at {@code at}: the load generator's channel. */
    LoadGenerator dial(InetSocketAddress at, long seed) {
        gateway = NettyChannelBuilder.forAddress(at)
                .usePlaintext().channelType(EpollSocketChannel.class).eventLoopGroup(RagService.group())
                .maxInboundMessageSize(16 << 20).build();
        load = new LoadGenerator(gateway, seed);
        return load;
    }

    LoadGenerator load() {
        return load;
    }

    @Override
    public void close() throws IOException {
        try {
            if (gateway != null) {
                gateway.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt(); // the stages still stop below
        } finally {
            Stage gw = stages.remove(RagService.Role.GATEWAY);
            if (gw != null) {
                gw.close();
            }
            stages.values().parallelStream().forEach(Stage::close);
            for (InetSocketAddress at : translated) {
                SockmapAdmin.of(pins).removeService(at);
            }
        }
    }
}
