package io.github.sockmap4j.examples;

import com.sun.net.httpserver.HttpServer;
import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.metrics.SockmapMetrics;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;

/**
 * A Prometheus scrape endpoint for the fast path's kernel counters:
 * {@code PrometheusExample [PORT] [SECONDS]} serves {@code http://127.0.0.1:PORT/metrics}
 * (default 9464) for SECONDS (default: until stopped).
 */
public final class PrometheusExample {
    private PrometheusExample() {
    }

    public static void main(String[] args) throws Exception {
        int port = args.length > 0 ? Integer.parseInt(args[0]) : 9464;
        long seconds = args.length > 1 ? Long.parseLong(args[1]) : Long.MAX_VALUE / 1000;
        PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        new SockmapMetrics(Sockmap.global()).bindTo(registry);
        HttpServer http = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 0);
        http.createContext("/metrics", exchange -> {
            byte[] body = registry.scrape().getBytes(StandardCharsets.UTF_8);
            exchange.getResponseHeaders().set("Content-Type", "text/plain; version=0.0.4");
            exchange.sendResponseHeaders(200, body.length);
            try (OutputStream out = exchange.getResponseBody()) {
                out.write(body);
            }
        });
        http.start();
        System.out.println("serving http://127.0.0.1:" + http.getAddress().getPort() + "/metrics");
        Thread.sleep(seconds * 1000);
        http.stop(0);
    }
}
