package io.github.sockmap4j.bench;

import io.github.sockmap4j.SockmapStats;
import io.github.sockmap4j.admin.Rule;
import io.github.sockmap4j.admin.SockmapAdmin;
import io.github.sockmap4j.agent.NodeAgent;
import io.github.sockmap4j.agent.Owner;
import io.github.sockmap4j.testbed.Cgroup2;
import io.github.sockmap4j.testbed.NodeBed;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;

/**
 * Services that do not change, under the node agent: the example of examples/unchanged-spring-boot3
 * (Spring Boot 3.5 on Java 17, no sockmap4j in it) as a server pod and a client pod of the
 * node-shaped bed, in the agent's cgroup, their ports opted in by the agent alone. Per kind of
 * traffic, what the kernel's counters say went redirected and by TCP; the clients check every byte.
 *
 * <pre>UnchangedServices JAR JAVA [CALLS] [STREAM_BYTES] [STREAM_ROUNDS]</pre>
 * With {@code -Dhelidon.jar=JAR -Dhelidon.java=JAVA} also examples/unchanged-helidon4's server (Helidon 4
 * SE on its own web server), with {@code -Dquarkus.jar=JAR} examples/unchanged-quarkus3's (Quarkus REST
 * and gRPC, Java 17), each called by the same WebClient and gRPC client.
 * Exits 1 when a client failed, request/response traffic had less than 99% of its bytes redirected,
 * or a paced stream (its reader keeping up) less than 90%.
 */
public final class UnchangedServices {
    static final int WEBFLUX = 47411;
    static final int MVC = 47412;
    static final int GRPC = 47413;
    static final int HELIDON = 47414;
    static final int QUARKUS = 47415;
    static final int QUARKUS_GRPC = 47416;

    private UnchangedServices() {
    }

    /** A process of the run: its output lines kept (and drained, so that it never blocks on them). */
    static final class Child implements AutoCloseable {
        final String name;
        final Process process;
        final List<String> lines = new ArrayList<>();

        Child(String name, List<String> cmd) throws IOException {
            this.name = name;
            this.process = new ProcessBuilder(cmd).redirectErrorStream(true).start();
            Thread t = new Thread(() -> {
                try (BufferedReader r = new BufferedReader(new InputStreamReader(process.getInputStream(),
                        StandardCharsets.UTF_8))) {
                    for (String line; (line = r.readLine()) != null; ) {
                        synchronized (lines) {
                            lines.add(line);
                            lines.notifyAll();
                        }
                    }
                } catch (IOException e) {
                    // the process ended
                }
            }, "output-" + name);
            t.setDaemon(true);
            t.start();
        }

        /** The value of the first line {@code prefix=VALUE}, waiting up to {@code seconds}. */
        String await(String prefix, long seconds) throws InterruptedException {
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
            synchronized (lines) {
                while (true) {
                    for (String l : lines) {
                        if (l.startsWith(prefix + "=")) {
                            return l.substring(prefix.length() + 1);
                        }
                    }
                    if (!process.isAlive()) {
                        // Its last lines may still be on their way: two more seconds, no more.
                        end = Math.min(end, System.nanoTime() + TimeUnit.SECONDS.toNanos(2));
                    }
                    long left = end - System.nanoTime();
                    if (left <= 0) {
                        throw new IllegalStateException(name + ": no " + prefix + "= within " + seconds + " s; output:\n"
                                + String.join("\n", lines.subList(Math.max(0, lines.size() - 40), lines.size())));
                    }
                    lines.wait(Math.max(1, Math.min(200, TimeUnit.NANOSECONDS.toMillis(left))));
                }
            }
        }

        @Override
        public void close() {
            process.destroy();
            try {
                if (!process.waitFor(20, TimeUnit.SECONDS)) {
                    process.destroyForcibly();
                    process.waitFor(20, TimeUnit.SECONDS);
                }
            } catch (InterruptedException e) {
                process.destroyForcibly();
                Thread.currentThread().interrupt();
            }
        }
    }

    /** What one kind of traffic moved. */
    record Moved(String what, long redirected, long tcp, long boundHits, long resumes, String detail) {
        double share() {
            return redirected + tcp == 0 ? 0 : (double) redirected / (redirected + tcp);
        }
    }

    public static void main(String[] args) throws Exception {
        Path jar = Path.of(args[0]);
        String java = args[1];
        int calls = args.length > 2 ? Integer.parseInt(args[2]) : 500;
        long streamBytes = args.length > 3 ? Long.parseLong(args[3]) : 64L << 20;
        int streamRounds = args.length > 4 ? Integer.parseInt(args[4]) : 3;
        Path cgroup = Cgroup2.create("unchanged");
        Path pins = Path.of("/sys/fs/bpf").resolve(Cgroup2.uniqueName("unchanged"));
        List<Moved> moved = new ArrayList<>();
        boolean failed = false;
        try (NodeBed bed = NodeBed.create("us", 2);
             NodeAgent agent = NodeAgent.start(new NodeAgent.Options(pins, List.of(cgroup), null, 65535, false))) {
            agent.hold(Owner.named("unchanged-services"), List.of(new Rule(WEBFLUX, null, 0, 0),
                    new Rule(MVC, null, 0, 0), new Rule(GRPC, null, 0, 0), new Rule(HELIDON, null, 0, 0),
                    new Rule(QUARKUS, null, 0, 0), new Rule(QUARKUS_GRPC, null, 0, 0)));
            String server = NodeBed.podAddress(1);
            String helidonJar = System.getProperty("helidon.jar");
            String quarkusJar = System.getProperty("quarkus.jar");
            try (Child webflux = new Child("webflux", pod(bed, 1, cgroup, java, jar, "webflux", server,
                    Integer.toString(WEBFLUX), Integer.toString(GRPC)));
                 Child mvc = new Child("mvc", pod(bed, 1, cgroup, java, jar, "mvc", server, Integer.toString(MVC)));
                 Child helidon = helidonJar == null ? null : new Child("helidon", pod(bed, 1, cgroup,
                         System.getProperty("helidon.java", java), Path.of(helidonJar), "helidon", server,
                         Integer.toString(HELIDON)));
                 Child quarkus = quarkusJar == null ? null : new Child("quarkus", pod(bed, 1, cgroup, java,
                         Path.of(quarkusJar), "quarkus", server, Integer.toString(QUARKUS),
                         Integer.toString(QUARKUS_GRPC)))) {
                webflux.await("ready", 120);
                mvc.await("ready", 120);
                for (Child other : new Child[] {helidon, quarkus}) {
                    if (other != null) {
                        other.await("ready", 120);
                    }
                }
                moved.add(client(bed, cgroup, pins, java, jar, "WebClient to WebFlux (Reactor Netty, Netty 4.1), "
                        + calls + " calls of 4 KiB", "client-http", server, WEBFLUX, calls, 4096));
                moved.add(client(bed, cgroup, pins, java, jar, "WebClient to Spring MVC on Tomcat, " + calls
                        + " calls of 4 KiB", "client-http", server, MVC, calls, 4096));
                moved.add(client(bed, cgroup, pins, java, jar, "gRPC on grpc-netty-shaded, " + calls
                        + " unary calls of 4 KiB", "client-grpc", server, GRPC, calls, 4096));
                if (helidon != null) {
                    moved.add(client(bed, cgroup, pins, java, jar, "WebClient to Helidon 4 SE (its own web server, "
                            + "Java 25), " + calls + " calls of 4 KiB", "client-http", server, HELIDON, calls, 4096));
                }
                if (quarkus != null) {
                    moved.add(client(bed, cgroup, pins, java, jar, "WebClient to Quarkus 3.33 REST (Vert.x 4, Netty "
                            + "4.1, Java 17), " + calls + " calls of 4 KiB", "client-http", server, QUARKUS, calls,
                            4096));
                    moved.add(client(bed, cgroup, pins, java, jar, "gRPC to Quarkus gRPC (Java 17), " + calls
                            + " unary calls of 4 KiB", "client-grpc-proto", server, QUARKUS_GRPC, calls, 4096));
                }
                // Each round: as fast as the server writes (the reader, checking every sequence number,
                // sets the pace), then paced at half the rate that reached: a reader that keeps up.
                for (int r = 0; r < streamRounds; r++) {
                    Moved unpaced = client(bed, cgroup, pins, java, jar, "a " + (streamBytes >> 20)
                            + " MiB WebFlux response to WebClient, unpaced, round " + (r + 1), "client-stream", server,
                            WEBFLUX, streamBytes);
                    moved.add(unpaced);
                    long pace = Math.max(1, Long.parseLong(unpaced.detail().split(" ")[0]) / 2);
                    moved.add(client(bed, cgroup, pins, java, jar, "the same paced at " + pace + " MB/s, round "
                            + (r + 1), "client-stream", server, WEBFLUX, streamBytes, pace));
                }
            }
        } catch (RuntimeException e) {
            System.out.println("failed: " + e.getMessage());
            failed = true;
        } finally {
            try {
                SockmapAdmin.of(pins).removePins();
            } finally {
                for (int i = 0; i < 200 && !Files.readString(cgroup.resolve("cgroup.procs")).isBlank(); i++) {
                    Thread.sleep(50); // the last processes exiting
                }
                Cgroup2.delete(cgroup);
            }
        }
        System.out.printf(Locale.ROOT, "%n| traffic (no sockmap4j in the services) | redirected | by TCP | "
                + "redirected share | bound hits | resumes | the client |%n|---|---:|---:|---:|---:|---:|---|%n");
        for (Moved m : moved) {
            System.out.printf(Locale.ROOT, "| %s | %,d B | %,d B | %.2f%% | %d | %d | %s |%n", m.what(), m.redirected(),
                    m.tcp(), 100 * m.share(), m.boundHits(), m.resumes(), m.detail());
            if (!m.what().contains("MiB") && !m.what().contains("paced") && m.share() < 0.99) {
                System.out.println("not met: at least 99% of request/response bytes redirected: " + m.what());
                failed = true;
            }
            if (m.what().startsWith("the same paced") && m.share() < 0.90) {
                System.out.println("not met: at least 90% of a stream whose reader keeps up redirected: " + m.what());
                failed = true;
            }
        }
        System.exit(failed ? 1 : 0);
    }

    /** {@code java -jar JAR ARGS} in pod {@code i}'s network namespace and in the agent's cgroup. */
    static List<String> pod(NodeBed bed, int i, Path cgroup, String java, Path jar, String... args) {
        List<String> cmd = new ArrayList<>(List.of(java, "-XX:+UseSerialGC", "-Xmx512m"));
        if (args[0].equals("quarkus")) {
            cmd.addAll(List.of("-Dquarkus.http.host=" + args[1], "-Dquarkus.http.port=" + args[2],
                    "-Dquarkus.grpc.server.host=" + args[1], "-Dquarkus.grpc.server.port=" + args[3], "-jar",
                    jar.toString()));
            return NodeRttBench.inCgroup(cgroup, NodeBed.in(bed.pod(i), cmd));
        }
        if (args[0].equals("helidon")) {
            cmd.addAll(List.of("-jar", jar.toString()));
            cmd.addAll(List.of(args).subList(1, args.length));
            return NodeRttBench.inCgroup(cgroup, NodeBed.in(bed.pod(i), cmd));
        }
        if (args[0].startsWith("client")) {
            cmd.addAll(List.of("-Dloader.main=com.example.unchanged.Service", "-cp", jar.toString(),
                    "org.springframework.boot.loader.launch.PropertiesLauncher"));
        } else {
            cmd.addAll(List.of("-jar", jar.toString()));
        }
        cmd.addAll(List.of(args));
        return NodeRttBench.inCgroup(cgroup, NodeBed.in(bed.pod(i), cmd));
    }

    static Moved client(NodeBed bed, Path cgroup, Path pins, String java, Path jar, String what, String mode,
                        String server, int port, Object... more) throws Exception {
        List<String> args = new ArrayList<>(List.of(mode, server, Integer.toString(port)));
        for (Object m : more) {
            args.add(m.toString());
        }
        SockmapStats before = SockmapAdmin.of(pins).stats();
        String detail;
        try (Child c = new Child(mode, pod(bed, 0, cgroup, java, jar, args.toArray(String[]::new)))) {
            if (!"1".equals(c.await("ok", 300))) {
                throw new IllegalStateException(what + ": the client failed");
            }
            detail = mode.equals("client-stream") ? c.await("mbps", 1) + " MB/s, every byte checked"
                    : c.await("calls", 1) + " calls, every byte checked";
            c.process.waitFor(30, TimeUnit.SECONDS);
        }
        SockmapStats after = SockmapAdmin.of(pins).stats();
        Moved m = new Moved(what, after.bytesRedirected() - before.bytesRedirected(),
                after.bytesPassed() - before.bytesPassed(), after.boundHits() - before.boundHits(),
                after.resumes() - before.resumes(), detail);
        System.out.printf(Locale.ROOT, "%s: %d B redirected, %d B by TCP (%.2f%%), %d bound hits, %d resumes; %s%n",
                what, m.redirected(), m.tcp(), 100 * m.share(), m.boundHits(), m.resumes(), detail);
        return m;
    }
}
