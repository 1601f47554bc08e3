package io.github.sockmap4j.cli;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.github.sockmap4j.admin.NodeAgent;
import io.github.sockmap4j.metrics.SockmapMetrics;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.function.BooleanSupplier;

/**
 * The agent's HTTP endpoints: {@code /metrics} (Prometheus text), {@code /healthz} (200 while the
 * agent runs) and {@code /readyz} (200 once pins, watcher, control socket and, when it watches
 * Kubernetes, the first pod list are in place; 503 otherwise).
 */
final class AgentHttp implements AutoCloseable {
    private final HttpServer server;
    private final PrometheusMeterRegistry registry;
    /** Kept: the registry's function counters hold it weakly. */
    private final SockmapMetrics metrics;

    private AgentHttp(HttpServer server, PrometheusMeterRegistry registry, SockmapMetrics metrics) {
        this.server = server;
        this.registry = registry;
        this.metrics = metrics;
    }

    static AgentHttp start(InetSocketAddress address, NodeAgent agent, BooleanSupplier extraReadiness)
            throws IOException {
        PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        SockmapMetrics metrics = SockmapMetrics.forAgent(agent);
        metrics.bindTo(registry);
        HttpServer server;
        try {
            server = HttpServer.create(address, 16);
        } catch (java.net.BindException e) {
            throw new IOException("cannot serve the agent's metrics on " + address + " (" + e.getMessage()
                    + "): choose another --metrics-port", e);
        }
        server.createContext("/metrics", ex -> reply(ex, 200, registry.scrape(), "text/plain; version=0.0.4"));
        server.createContext("/healthz", ex -> reply(ex, 200, "ok\n", "text/plain"));
        server.createContext("/readyz", ex -> {
            boolean ready = agent.isReady() && extraReadiness.getAsBoolean();
            reply(ex, ready ? 200 : 503, ready ? "ready\n" : "not ready\n", "text/plain");
        });
        server.setExecutor(null);
        server.start();
        return new AgentHttp(server, registry, metrics);
    }

    private static void reply(HttpExchange ex, int code, String body, String type) throws IOException {
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().set("Content-Type", type);
        ex.sendResponseHeaders(code, b.length);
        try (OutputStream out = ex.getResponseBody()) {
            out.write(b);
        }
    }

    InetSocketAddress address() {
        return server.getAddress();
    }

    @Override
    public void close() {
        server.stop(0);
        registry.close();
    }
}
