package io.github.sockmap4j.metrics;

import io.github.sockmap4j.MeshStats;
import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapStats;
import io.github.sockmap4j.xdp.XdpFilter;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.binder.MeterBinder;
import java.util.List;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import java.util.function.ToDoubleFunction;

/**
 * Micrometer meters over the kernel's own counters: the fast path of a {@link Sockmap} (all
 * processes sharing its pin directory) and, optionally, XDP filters.
 *
 * <pre>{@code
 * new SockmapMetrics(Sockmap.global()).bindTo(registry);
 * }</pre>
 *
 * Counters: {@code sockmap4j.sockets.registered}, {@code sockmap4j.register.failures},
 * {@code sockmap4j.messages} and {@code sockmap4j.bytes} tagged {@code path=redirected|tcp},
 * {@code sockmap4j.bound.hits}, {@code sockmap4j.bound.resumes}; gauges
 * {@code sockmap4j.sockets.in.map} and {@code sockmap4j.active}; this process's waits for
 * credit, {@code sockmap4j.credit.waits} and {@code sockmap4j.credit.wait} (seconds); per XDP filter
 * {@code sockmap4j.xdp.packets} tagged {@code interface} and {@code outcome}. A scrape reads the
 * kernel counters once (they are cached for 500 ms). Its gauges hold their sources strongly
 * (Micrometer's default weak reference made an agent's {@code sockmap4j.active} read NaN after a
 * garbage collection); its counters hold this binder weakly, as Micrometer's function counters
 * do: keep a reference to it for as long as the registry reports.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
public final class SockmapMetrics implements MeterBinder {
    private static final long CACHE_NANOS = 500_000_000L;

    private final Supplier<SockmapStats> source;
    private final BooleanSupplier active;
    private final List<XdpFilter> filters;
    private SockmapStats cached;
    private long cachedAt;

    public SockmapMetrics(Sockmap sockmap, XdpFilter... filters) {
        // Active means this process's own connections are covered, not only that the kernel side is set up.
        this(sockmap::stats, sockmap::isActive, filters);
    }

    private SockmapMetrics(Supplier<SockmapStats> source, BooleanSupplier active, XdpFilter... filters) {
        this.source = source;
        this.active = active;
        this.filters = List.of(filters);
    }

    /**
     * A pin directory's counters read by {@code source} (the node agent's, which owns no
     * {@link Sockmap}); {@code sockmap4j.active} is {@code active}. The agent's own meters are the
     * agent module's.
     */
    public static SockmapMetrics of(Supplier<SockmapStats> source, BooleanSupplier active) {
        return new SockmapMetrics(source, active);
    }

    private synchronized SockmapStats stats() {
        long now = System.nanoTime();
        if (cached == null || now - cachedAt > CACHE_NANOS) {
            cached = source.get();
            cachedAt = now;
        }
        return cached;
    }

    private void counter(MeterRegistry r, String name, String description, ToDoubleFunction<SockmapStats> f,
                         String... tags) {
        FunctionCounter.builder(name, this, m -> f.applyAsDouble(m.stats())).description(description).tags(tags)
                .register(r);
    }

    @Override
    public void bindTo(MeterRegistry r) {
        counter(r, "sockmap4j.sockets.registered", "sockets the sockops program registered",
                SockmapStats::socketsRegistered);
        counter(r, "sockmap4j.register.failures", "sockets that found the SOCKHASH full",
                SockmapStats::registerFailures);
        counter(r, "sockmap4j.messages", "sends of registered sockets", SockmapStats::messagesRedirected,
                "path", "redirected");
        counter(r, "sockmap4j.messages", "sends of registered sockets", SockmapStats::messagesPassed, "path", "tcp");
        counter(r, "sockmap4j.bytes", "bytes sent by registered sockets", SockmapStats::bytesRedirected,
                "path", "redirected");
        counter(r, "sockmap4j.bytes", "bytes sent by registered sockets", SockmapStats::bytesPassed, "path", "tcp");
        counter(r, "sockmap4j.bound.hits", "sends that found the in-flight bound reached", SockmapStats::boundHits);
        counter(r, "sockmap4j.bound.resumes", "senders back on the redirect after their peer read all",
                SockmapStats::resumes);
        counter(r, "sockmap4j.clients.unregistered", "accepted sockets left off the map: their client did not register",
                SockmapStats::clientsUnregistered);
        counter(r, "sockmap4j.peers.not.local", "clients left off the map: their server is not on this node",
                SockmapStats::peersNotLocal);
        counter(r, "sockmap4j.keys.taken", "sockets left off the map: another connection's socket holds their key",
                SockmapStats::keysTaken);
        counter(r, "sockmap4j.sockets.busy", "sockets left off the map: another program's sockmap holds them",
                SockmapStats::socketsBusy);
        counter(r, "sockmap4j.services.translated", "connects to a Service sent straight to an endpoint",
                SockmapStats::servicesTranslated);
        counter(r, "sockmap4j.services.no.local", "connects to a Service in the map with no local endpoint",
                SockmapStats::servicesNoLocal);
        counter(r, "sockmap4j.services.original.destinations",
                "SO_ORIGINAL_DST calls answered with the Service a translated client dialed",
                SockmapStats::originalDestinations);
        counter(r, "sockmap4j.mesh.captured", "meshed pods' application connects sent straight to their proxy",
                s -> s.mesh().captured());
        counter(r, "sockmap4j.mesh.inbound", "meshed pods' proxy connects sent to another meshed pod's inbound port",
                s -> s.mesh().inbound());
        counter(r, "sockmap4j.mesh.original.destinations",
                "SO_ORIGINAL_DST calls of a meshed pod's proxy answered from the connect", s -> s.mesh().originalDestinations());
        counter(r, "sockmap4j.mesh.renumbered",
                "of those, connections whose client port a NAT rule of the server's pod changed (their leg by TCP)",
                s -> s.mesh().renumbered());
        meshLeg(r, "app-proxy", s -> s.mesh().appToProxy());
        meshLeg(r, "proxy-proxy", s -> s.mesh().proxyToProxy());
        meshLeg(r, "proxy-app", s -> s.mesh().proxyToApp());
        Gauge.builder("sockmap4j.sockets.in.map", this, m -> m.stats().socketsInMap())
                .description("sockets in the SOCKHASH now").strongReference(true).register(r);
        FunctionCounter.builder("sockmap4j.credit.waits", this, m -> Sockmap.flowStats().creditWaits())
                .description("writes of this process that waited for their receiver's credit").register(r);
        FunctionCounter.builder("sockmap4j.credit.wait", this, m -> Sockmap.flowStats().creditWaitNanos() / 1e9)
                .description("time this process's writers waited for credit").baseUnit("seconds").register(r);
        Gauge.builder("sockmap4j.active", active, a -> a.getAsBoolean() ? 1 : 0)
                .description("1 when the fast path is active").strongReference(true).register(r);
        for (XdpFilter f : filters) {
            xdp(r, f, "passed", c -> c.passed());
            xdp(r, f, "dropped", c -> c.dropped());
            xdp(r, f, "malformed", c -> c.malformed());
            xdp(r, f, "defaulted", c -> c.defaulted());
        }
    }

    /** One leg of meshed requests: its sockets, and its bytes by path (redirected, or TCP counted at each FIN). */
    private void meshLeg(MeterRegistry r, String leg, java.util.function.Function<SockmapStats, MeshStats.Leg> of) {
        counter(r, "sockmap4j.mesh.leg.sockets", "sockets registered as a leg of meshed requests",
                s -> of.apply(s).sockets(), "leg", leg);
        counter(r, "sockmap4j.mesh.leg.bytes", "bytes a leg of meshed requests sent", s -> of.apply(s).bytesRedirected(),
                "leg", leg, "path", "redirected");
        counter(r, "sockmap4j.mesh.leg.bytes", "bytes a leg of meshed requests sent", s -> of.apply(s).bytesByTcp(),
                "leg", leg, "path", "tcp");
    }

    private static void xdp(MeterRegistry r, XdpFilter f, String outcome, ToDoubleFunction<XdpFilter.Counters> v) {
        FunctionCounter.builder("sockmap4j.xdp.packets", f, x -> v.applyAsDouble(x.counters()))
                .description("packets the XDP filter decided").tags("interface", f.interfaceName(), "outcome", outcome)
                .register(r);
    }
}
