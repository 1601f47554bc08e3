package io.github.sockmap4j.testbed;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;

/**
 * A meshed pod's sidecar proxy for the node bed ({@link NodeBed#istioSidecarNat}): Debian's
 * HAProxy in TCP mode, an outbound and an inbound frontend each relaying to the connection's
 * original destination ({@code server 0.0.0.0:0}: the address {@code SO_ORIGINAL_DST} gives, the
 * same port), the inbound one handing connections to the application from 127.0.0.6, which the
 * pod's NAT leaves alone, as Istio's proxy does. HAProxy 2.6 asks for the original destination of
 * IPv4 connections only.
 */
public final class Sidecar {
    private Sidecar() {
    }

    /**
     * Writes the proxy's configuration to {@code file} (readable by every user: the proxy runs as
     * its own uid) and returns the command that runs it in the foreground, to be run as the
     * proxy's uid in the pod.
     *
     * @param threads HAProxy's threads, 0 for its default (one per CPU)
     */
    public static List<String> haproxy(Path file, int outPort, int inPort, int threads) throws IOException {
        String haproxy = Sh.tool("haproxy");
        if (!Files.isExecutable(Path.of(haproxy))) {
            throw new IOException("haproxy is not installed: scripts/install.sh base installs it (Debian's package)");
        }
        Files.writeString(file, String.join("\n",
                "global", "  maxconn 1024", threads > 0 ? "  nbthread " + threads : "  # nbthread: one per CPU",
                Boolean.getBoolean("sockmap4j.sidecar.log") ? "  log stderr format raw local0" : "",
                "defaults", Boolean.getBoolean("sockmap4j.sidecar.log") ? "  log global\n  option tcplog" : "",
                "  mode tcp", "  timeout connect 5s", "  timeout client 300s", "  timeout server 300s",
                "frontend outbound", "  bind 0.0.0.0:" + outPort, "  default_backend outbound",
                "backend outbound", "  server original 0.0.0.0:0",
                "frontend inbound", "  bind 0.0.0.0:" + inPort, "  default_backend inbound",
                "backend inbound", "  source 127.0.0.6", "  server original 0.0.0.0:0", ""));
        Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rw-r--r--"));
        // From the root directory: HAProxy goes back to its starting directory after reading its
        // configuration, and the proxy's uid may not enter the caller's (a 0700 home or temporary one).
        return List.of("env", "--chdir=/", haproxy, "-db", "-f", file.toString());
    }

    /** Whether something listens on TCP {@code port} in network namespace {@code ns}. */
    public static boolean listens(String ns, int port) throws IOException, InterruptedException {
        return !Sh.run(Sh.in(ns, List.of("ss", "-Hltn", "sport = :" + port)).toArray(String[]::new)).isBlank();
    }
}
