package io.github.sockmap4j.bench;

import io.github.sockmap4j.admin.SockmapAdmin;
import io.github.sockmap4j.testbed.NodeBed;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFactory;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.Callable;

/**
 * Where a benchmark in one process puts the two ends of its connections ({@code -Dtopology=}):
 * {@code loopback}, both on this namespace's loopback, or {@code node}, the server in pod 1 and
 * the client in pod 0 of a node-shaped bed ({@link NodeBed}), each socket made in its pod's
 * namespace ({@link NodeBed#callIn}), the client dialing a Service VIP as a Kubernetes client
 * does: through the node's kube-proxy-style DNAT, and for a fast-path case also in the Service
 * map at the pins (translated at connect). The process and its cgroup stay where they are.
 */
final class Topology implements AutoCloseable {
    private final NodeBed bed;
    private final Path pins;
    /** Server port to its Service VIP. */
    private final Map<Integer, InetSocketAddress> vips = new LinkedHashMap<>();
    private final Map<Integer, Boolean> mapped = new LinkedHashMap<>();

    private Topology(NodeBed bed, Path pins) {
        this.bed = bed;
        this.pins = pins;
    }

    /**
     * The topology {@code -Dtopology=} names (loopback when unset).
     *
     * @param pins the pins of the fast path whose Service map the node's fast-path cases use
     */
    static Topology fromProperty(Path pins) throws IOException, InterruptedException {
        String name = System.getProperty("topology", "loopback");
        return switch (name) {
            case "loopback" -> new Topology(null, pins);
            case "node" -> new Topology(NodeBed.create("bt", 2), pins);
            default -> throw new IllegalArgumentException("-Dtopology= takes loopback or node, not " + name);
        };
    }

    static Topology loopback() {
        return new Topology(null, null);
    }

    boolean isNode() {
        return bed != null;
    }

    String name() {
        return isNode() ? "node" : "loopback";
    }

    /** One line saying what the node topology is, or nothing on loopback. */
    String describe() {
        return isNode() ? "node: server in pod 1, client in pod 0 dialing a Service VIP (plain: the node's DNAT; "
                + "sockmap4j: the VIP also in its Service map, translated at connect)" : "";
    }

    /**
     * Puts a Service VIP in front of {@code port} of pod 1 on the node (a no-op on loopback):
     * the node's DNAT, and with {@code fastPath} also the Service map.
     */
    void service(int port, boolean fastPath) throws IOException, InterruptedException {
        if (!isNode() || vips.containsKey(port)) {
            return;
        }
        InetSocketAddress vip = new InetSocketAddress(InetAddress.ofLiteral("10.96.1." + (vips.size() + 1)), port);
        InetSocketAddress at = serverAddress(port);
        bed.service(vip.getHostString(), port, at.getHostString() + ":" + port);
        vips.put(port, vip);
        mapped.put(port, fastPath);
        if (fastPath) {
            SockmapAdmin.of(pins).putService(new SockmapAdmin.Service(vip, java.util.List.of(at), java.util.List.of(),
                    false));
        }
    }

    private static InetSocketAddress serverAddress(int port) {
        return new InetSocketAddress(InetAddress.ofLiteral(NodeBed.podAddress(1)), port);
    }

    /** Where a server binds: pod 1's address and {@code port} on the node, an ephemeral loopback port else. */
    InetSocketAddress bind(int port) {
        return isNode() ? serverAddress(port) : new InetSocketAddress(InetAddress.getLoopbackAddress(), 0);
    }

    /** Where a client dials the server of {@code port} bound at {@code bound}: its VIP on the node. */
    InetSocketAddress dial(int port, InetSocketAddress bound) {
        if (!isNode()) {
            return bound;
        }
        InetSocketAddress vip = vips.get(port);
        if (vip == null) {
            throw new IllegalStateException("no Service for port " + port + ": call service(port, ...) first");
        }
        return vip;
    }

    /** Runs {@code body} where the server's sockets are made (pod 1 on the node). */
    <T> T server(Callable<T> body) throws Exception {
        return isNode() ? NodeBed.callIn(bed.pod(1), body) : body.call();
    }

    /** Runs {@code body} where the client's sockets are made (pod 0 on the node). */
    <T> T client(Callable<T> body) throws Exception {
        return isNode() ? NodeBed.callIn(bed.pod(0), body) : body.call();
    }

    /** {@code inner}'s channels, made in pod {@code pod}'s namespace on the node. */
    <C extends Channel> ChannelFactory<C> in(int pod, ChannelFactory<C> inner) {
        if (!isNode()) {
            return inner;
        }
        String ns = bed.pod(pod);
        return () -> {
            try {
                return NodeBed.callIn(ns, inner::newChannel);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        };
    }

    @Override
    public void close() throws IOException {
        if (bed == null) {
            return;
        }
        try {
            for (Map.Entry<Integer, InetSocketAddress> e : vips.entrySet()) {
                if (mapped.get(e.getKey())) {
                    SockmapAdmin.of(pins).removeService(e.getValue());
                }
            }
        } finally {
            bed.close();
        }
    }
}
