package io.github.sockmap4j.spring;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapAvailability;
import io.github.sockmap4j.SockmapUnavailableException;
import io.github.sockmap4j.spring.app.EchoApplication;
import io.github.sockmap4j.testsupport.RedirectedShare;
import io.netty.buffer.Unpooled;
import java.time.Duration;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.boot.web.server.context.WebServerApplicationContext;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.http.client.ReactorResourceFactory;
import org.springframework.web.reactive.function.client.WebClient;
import reactor.core.publisher.Mono;
import reactor.netty.http.client.HttpClient;

/**
 * The service started as in production ({@code SpringApplication.run}, Reactor Netty's global
 * resources on, which Spring Boot's test support turns off), turned off, and required where
 * the fast path is off.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@ExtendWith(OutputCaptureExtension.class)
class SpringBootStartupTest {
    /** A cgroup setting that names no cgroup: the fast path is off, and nothing is made anywhere. */
    static final String NO_CGROUP = "sockmap4j.cgroup=/nonexistent/sockmap4j-test-cgroup";

    /**
     * The reason a start with {@link #NO_CGROUP} must give: the missing cgroup where this host can
     * run the fast path (as root), else what the host lacks first (without privileges: them).
     */
    static String reasonWithNoCgroup() {
        return SockmapAvailability.isAvailable() ? "/nonexistent/sockmap4j-test-cgroup is not a cgroup v2 directory"
                : SockmapAvailability.unavailabilityCause();
    }

    @BeforeEach
    void forgetChannels() {
        EchoApplication.SERVER_CHANNELS.clear();
        EchoApplication.CLIENT_CHANNELS.clear();
    }

    private static ConfigurableApplicationContext run(String... properties) {
        return new SpringApplicationBuilder(EchoApplication.class)
                .properties("server.port=0", "server.address=127.0.0.1", "spring.grpc.server.port=0",
                        "spring.grpc.server.address=127.0.0.1", "management.endpoint.health.show-details=always",
                        "management.endpoints.web.exposure.include=health", "spring.main.banner-mode=off")
                // As command-line arguments: they win over the run's -Dsockmap4j.* system properties.
                .run(java.util.Arrays.stream(properties).map(p -> "--" + p).toArray(String[]::new));
    }

    private static int port(ConfigurableApplicationContext context) {
        return ((WebServerApplicationContext) context).getWebServer().getPort();
    }

    private static byte[] echo(WebClient client, byte[] body) {
        return client.post().uri("/echo").bodyValue(body).retrieve().bodyToMono(byte[].class)
                .block(Duration.ofSeconds(30));
    }

    @Test
    @Tag("kernel")
    void asInProductionTheGlobalResourcesCarryServerWebClientAndAnyHttpClient() {
        byte[] body = new byte[256 << 10];
        new Random(7).nextBytes(body);
        try (ConfigurableApplicationContext context = run()) {
            assertTrue(context.getBean(ReactorResourceFactory.class).isUseGlobalResources(),
                    "Spring Boot's default: Reactor Netty's global resources");
            String base = "http://127.0.0.1:" + port(context);
            RedirectedShare share = RedirectedShare.start(context.getBean(Sockmap.class));
            assertArrayEquals(body, echo(context.getBean(WebClient.Builder.class).baseUrl(base).build(), body));
            // Any HttpClient of the service that names no resources: Reactor Netty's global ones,
            // as Spring Cloud Gateway's client.
            byte[] back = HttpClient.create().post().uri(base + "/echo")
                    .send(Mono.just(Unpooled.wrappedBuffer(body))).responseContent().aggregate().asByteArray()
                    .block(Duration.ofSeconds(30));
            assertArrayEquals(body, back);
            assertFalse(EchoApplication.SERVER_CHANNELS.isEmpty());
            EchoApplication.SERVER_CHANNELS.forEach((ch, transports) -> assertTrue(transports, ch::toString));
            EchoApplication.CLIENT_CHANNELS.forEach((ch, transports) -> assertTrue(transports, ch::toString));
            share.assertRedirected(0.99, 4L * body.length, "global resources");
        }
    }

    @Test
    @Tag("kernel")
    void turnedOffTheFrameworksKeepTheirOwnTransports() {
        byte[] body = new byte[64 << 10];
        try (ConfigurableApplicationContext context = run("sockmap4j.enabled=false")) {
            assertTrue(context.getBeanNamesForType(Sockmap.class).length == 0, "no Sockmap bean");
            RedirectedShare share = RedirectedShare.start(Sockmap.global());
            WebClient client = context.getBean(WebClient.Builder.class).baseUrl("http://127.0.0.1:" + port(context)).build();
            assertArrayEquals(body, echo(client, body));
            EchoApplication.SERVER_CHANNELS.forEach((ch, transports) -> assertFalse(transports, ch::toString));
            share.assertNone("sockmap4j.enabled=false");
        }
    }

    @Test
    void requiredWhereTheFastPathIsOffTheStartFailsWithTheReason(CapturedOutput output) {
        Exception e = assertThrows(Exception.class, () -> run("sockmap4j.require=true", NO_CGROUP).close());
        Throwable root = e;
        while (root.getCause() != null && !(root instanceof SockmapUnavailableException)) {
            root = root.getCause();
        }
        assertTrue(root instanceof SockmapUnavailableException, () -> "the cause: " + e);
        String out = output.getAll();
        assertTrue(out.contains("APPLICATION FAILED TO START"), out);
        assertTrue(out.contains(reasonWithNoCgroup()), out);
        assertTrue(out.contains("sockmap4j.require=false"), "says what to do: " + out);
    }

    @Test
    void notRequiredItStartsOnPlainTcpAndTheHealthSaysWhy(CapturedOutput output) {
        byte[] body = new byte[1024];
        try (ConfigurableApplicationContext context = run("sockmap4j.require=false", NO_CGROUP)) {
            Sockmap sockmap = context.getBean(Sockmap.class);
            assertFalse(sockmap.isActive());
            WebClient client = context.getBean(WebClient.Builder.class).baseUrl("http://127.0.0.1:" + port(context)).build();
            assertArrayEquals(body, echo(client, body));
            String health = client.get().uri("/actuator/health/sockmap").retrieve().bodyToMono(String.class)
                    .block(Duration.ofSeconds(30));
            assertTrue(health.contains("\"status\":\"UP\"") && health.contains("\"active\":false"), health);
            assertTrue(health.contains(reasonWithNoCgroup()), health);
            assertEquals(0.0, context.getBean(io.micrometer.core.instrument.MeterRegistry.class)
                    .get("sockmap4j.active").gauge().value());
            // The lines users are told to look for do not claim the fast path where it is off.
            String out = output.getAll();
            assertFalse(out.contains("on the sockmap fast path"), out);
            String reactor = out.lines().filter(l -> l.contains("Reactor Netty (")).findFirst().orElse("");
            assertTrue(reactor.contains("uses sockmap4j's transport on plain TCP (the sockmap fast path is off: ")
                    && reactor.contains(reasonWithNoCgroup()), out);
            assertTrue(out.contains("The gRPC server uses sockmap4j's transport on plain TCP"), out);
        }
    }
}
