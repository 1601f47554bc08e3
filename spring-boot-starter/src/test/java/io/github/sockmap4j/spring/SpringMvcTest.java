package io.github.sockmap4j.spring;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.spring.mvc.MvcApplication;
import io.github.sockmap4j.testsupport.RedirectedShare;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.web.server.context.WebServerApplicationContext;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * Spring MVC on Tomcat with the starter, called by the JDK's HTTP client: blocking sockets on
 * both sides, no Netty. The starter opts Tomcat's port in once it listens; the kernel redirects
 * the connection; nothing holds the writers for credit, so these bodies stay under the
 * receiver's in-flight bound (docs/frameworks.md says what a larger one does).
 */
@Tag("kernel")
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class SpringMvcTest {
    @Test
    void tomcatsPortIsOptedInAndItsConnectionsRedirected() throws Exception {
        try (ConfigurableApplicationContext context = new SpringApplicationBuilder(MvcApplication.class)
                .run("--spring.main.web-application-type=servlet", "--server.port=0", "--server.address=127.0.0.1",
                        "--spring.main.banner-mode=off")) {
            int port = ((WebServerApplicationContext) context).getWebServer().getPort();
            HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
            RedirectedShare share = RedirectedShare.start(context.getBean(Sockmap.class));
            long sent = 0;
            for (int size : new int[] {64, 16 << 10, 64, 16 << 10}) {
                byte[] body = new byte[size];
                new Random(size).nextBytes(body);
                HttpResponse<byte[]> r = client.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/echo"))
                        .header("Content-Type", "application/octet-stream").timeout(Duration.ofSeconds(30))
                        .POST(HttpRequest.BodyPublishers.ofByteArray(body)).build(), HttpResponse.BodyHandlers.ofByteArray());
                assertEquals(200, r.statusCode());
                assertArrayEquals(body, r.body());
                sent += 2L * size;
            }
            share.assertRedirected(0.99, sent, "Spring MVC on Tomcat");
        }
    }
}
