package io.github.sockmap4j.spring;

import io.github.sockmap4j.SockmapConfig;
import java.nio.file.Path;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.util.unit.DataSize;

/**
 * The {@code sockmap4j.*} settings of a Spring Boot service, in {@code application.yaml} or
 * anywhere else Spring reads properties (the {@code -Dsockmap4j.*} system properties too).
 */
@ConfigurationProperties("sockmap4j")
public class SockmapProperties {
    /** Whether sockmap4j sets anything up; false leaves every framework on its stock transport. */
    private boolean enabled = true;

    /**
     * Whether the service must run on the fast path: when it is off here, the start fails with
     * the reason instead of serving over plain TCP.
     */
    private boolean require;

    /** bpffs directory of the shared maps and programs; processes naming the same one share them. */
    private Path pinDir = SockmapConfig.DEFAULT_PIN_DIRECTORY;

    /** cgroup v2 directory the sockops program attaches to; unset for this process's own cgroup. */
    private Path cgroup;

    /** Capacity of the socket map; a connection that finds it full stays on plain TCP. */
    private int maxSockets = SockmapConfig.DEFAULT_MAX_SOCKETS;

    /** Whether the kernel's behaviour is checked once at start (what it cannot do is turned off). */
    private boolean probe = true;

    /** Whether writers hold back for their receiver's in-flight bound (false only for measuring). */
    private boolean credit = true;

    /**
     * How much a peer may send to a connection this service's servers accepted before it has
     * been read; 0 for each receiver's default (its receive buffer).
     */
    private DataSize inFlightBound = DataSize.ofBytes(0);

    /** Event loops of the Reactor Netty and gRPC transports; 0 for Reactor Netty's default count. */
    private int eventLoops;

    /**
     * How the gRPC server's and channels' calls wait for each other: standard (event loops sleep
     * until an event comes, gRPC's own executor), polling (loops and handler threads poll up to
     * 50 µs before they sleep) or direct (handlers run on loops that poll up to 200 µs: only for
     * handlers that never block).
     */
    private io.github.sockmap4j.netty.grpc.SockmapGrpc.Profile grpcProfile =
            io.github.sockmap4j.netty.grpc.SockmapGrpc.Profile.STANDARD;

    /**
     * gRPC services (full names, as package.Service) whose handlers never block: their calls run
     * on the event loop that read them, with no hand-off to an executor thread; every other
     * service's run on a pool as before. A handler listed here that blocks holds every connection
     * of its loop while it waits (a call that holds its loop over 200 ms is logged). Not with
     * grpc-profile direct, which runs every service on the loops.
     */
    private java.util.List<String> grpcNonBlockingServices = java.util.List.of();

    /**
     * Whether the callbacks of gRPC channels' calls (async stubs' observers, a call's listener) run
     * on the event loop that read the reply: for clients whose callbacks never block. Blocking
     * stubs are unaffected.
     */
    private boolean grpcCallbacksOnLoops;

    /** The core library's settings these make. */
    public SockmapConfig toConfig() {
        return SockmapConfig.builder().pinDirectory(pinDir).cgroup(cgroup).maxSockets(maxSockets).required(require)
                .probe(probe).credit(credit).build();
    }

    /** The in-flight bound in bytes, checked. */
    int inFlightBoundBytes() {
        long b = inFlightBound.toBytes();
        if (b < 0 || b > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("sockmap4j.in-flight-bound must be 0 to 2 GiB: " + inFlightBound);
        }
        return (int) b;
    }

    public boolean isEnabled() {
        return enabled;
    }

    public void setEnabled(boolean enabled) {
        this.enabled = enabled;
    }

    public boolean isRequire() {
        return require;
    }

    public void setRequire(boolean require) {
        this.require = require;
    }

    public Path getPinDir() {
        return pinDir;
    }

    public void setPinDir(Path pinDir) {
        this.pinDir = pinDir;
    }

    public Path getCgroup() {
        return cgroup;
    }

    public void setCgroup(Path cgroup) {
        this.cgroup = cgroup;
    }

    public int getMaxSockets() {
        return maxSockets;
    }

    public void setMaxSockets(int maxSockets) {
        this.maxSockets = maxSockets;
    }

    public boolean isProbe() {
        return probe;
    }

    public void setProbe(boolean probe) {
        this.probe = probe;
    }

    public boolean isCredit() {
        return credit;
    }

    public void setCredit(boolean credit) {
        this.credit = credit;
    }

    public DataSize getInFlightBound() {
        return inFlightBound;
    }

    public void setInFlightBound(DataSize inFlightBound) {
        this.inFlightBound = inFlightBound;
    }

    public int getEventLoops() {
        return eventLoops;
    }

    public void setEventLoops(int eventLoops) {
        this.eventLoops = eventLoops;
    }

    public io.github.sockmap4j.netty.grpc.SockmapGrpc.Profile getGrpcProfile() {
        return grpcProfile;
    }

    public void setGrpcProfile(io.github.sockmap4j.netty.grpc.SockmapGrpc.Profile grpcProfile) {
        this.grpcProfile = java.util.Objects.requireNonNull(grpcProfile, "sockmap4j.grpc-profile");
    }

    public java.util.List<String> getGrpcNonBlockingServices() {
        return grpcNonBlockingServices;
    }

    public void setGrpcNonBlockingServices(java.util.List<String> grpcNonBlockingServices) {
        this.grpcNonBlockingServices = java.util.List.copyOf(grpcNonBlockingServices);
    }

    public boolean isGrpcCallbacksOnLoops() {
        return grpcCallbacksOnLoops;
    }

    public void setGrpcCallbacksOnLoops(boolean grpcCallbacksOnLoops) {
        this.grpcCallbacksOnLoops = grpcCallbacksOnLoops;
    }
}
