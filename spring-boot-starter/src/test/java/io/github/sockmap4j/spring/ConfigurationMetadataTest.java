package io.github.sockmap4j.spring;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The jar's configuration metadata (what an IDE completes in {@code application.yaml}) names
 * every property of {@link SockmapProperties}, each with a description.
 */
class ConfigurationMetadataTest {
    @Test
    void everySettingIsDescribed() throws Exception {
        String json;
        try (InputStream in = getClass().getResourceAsStream("/META-INF/spring-configuration-metadata.json")) {
            assertNotNull(in, "the metadata is in the jar");
            json = new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
        Set<String> names = new TreeSet<>();
        Matcher m = Pattern.compile("\"name\"\\s*:\\s*\"(sockmap4j\\.[a-z-]+)\"[^}]*?\"description\"").matcher(json);
        while (m.find()) {
            names.add(m.group(1));
        }
        assertEquals(new TreeSet<>(Set.of("sockmap4j.enabled", "sockmap4j.require", "sockmap4j.pin-dir",
                "sockmap4j.cgroup", "sockmap4j.max-sockets", "sockmap4j.probe", "sockmap4j.credit",
                "sockmap4j.in-flight-bound", "sockmap4j.event-loops", "sockmap4j.grpc-profile",
                "sockmap4j.grpc-non-blocking-services", "sockmap4j.grpc-callbacks-on-loops")), names, json);
    }
}
