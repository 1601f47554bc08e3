package io.github.sockmap4j.netty;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import io.netty.util.Version;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Netty artifacts of mixed versions are named, from what Netty's own jars say of themselves. */
class NettyVersionSkewTest {

    static String skewOf(Path dir, String... artifactVersions) throws Exception {
        StringBuilder props = new StringBuilder();
        for (int i = 0; i < artifactVersions.length; i += 2) {
            String a = artifactVersions[i];
            props.append(a).append(".version=").append(artifactVersions[i + 1]).append('\n')
                    .append(a).append(".buildDate=2026-01-01 00:00:00 +0000\n")
                    .append(a).append(".commitDate=2026-01-01 00:00:00 +0000\n")
                    .append(a).append(".shortCommitHash=0000000\n")
                    .append(a).append(".longCommitHash=0000000000000000000000000000000000000000\n")
                    .append(a).append(".repoStatus=clean\n");
        }
        Files.createDirectories(dir.resolve("META-INF"));
        Files.writeString(dir.resolve("META-INF/io.netty.versions.properties"), props);
        try (URLClassLoader cl = new URLClassLoader(new URL[] {dir.toUri().toURL()}, null)) {
            return SockmapNetty.versionSkew(Version.identify(cl));
        }
    }

    @Test
    void mixedVersionsAreNamed(@TempDir Path dir) throws Exception {
        assertEquals("4.1.130.Final: netty-codec-http2, netty-handler; 4.2.17.Final: netty-transport-classes-epoll",
                skewOf(dir, "netty-handler", "4.1.130.Final", "netty-codec-http2", "4.1.130.Final",
                        "netty-transport-classes-epoll", "4.2.17.Final"));
    }

    @Test
    void oneVersionIsNoSkew(@TempDir Path dir) throws Exception {
        assertNull(skewOf(dir, "netty-handler", "4.2.17.Final", "netty-common", "4.2.17.Final"));
    }

    @Test
    void thisBuildHasNone() {
        // Netty's socket suite, a test dependency published apart, is one release behind (pom.xml).
        java.util.Map<String, Version> runtime = new java.util.HashMap<>(Version.identify());
        runtime.remove("netty-testsuite");
        assertNull(SockmapNetty.versionSkew(runtime));
    }
}
