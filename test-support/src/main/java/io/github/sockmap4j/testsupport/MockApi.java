package io.github.sockmap4j.testsupport;

import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.server.mock.KubernetesCrudDispatcher;
import io.fabric8.kubernetes.client.server.mock.KubernetesMockServer;
import io.fabric8.mockwebserver.Context;
import io.fabric8.mockwebserver.MockWebServer;
import java.net.InetAddress;
import java.util.HashMap;

/**
 * The Kubernetes API of these tests: fabric8's {@code kubernetes-server-mock} in CRUD mode (it
 * keeps what it is given and answers lists and watches from it) on loopback, plain HTTP, and a
 * client of it. Field selectors are not applied by it: an agent against it runs with
 * {@code --node-filter client}. Its module's dependency on {@code kubernetes-server-mock} is
 * optional: a module whose tests use this class declares that dependency itself.
 */
public final class MockApi implements AutoCloseable {
    /** The server, on loopback. */
    public final KubernetesMockServer server;
    /** A client of it. */
    public final KubernetesClient client;

    private MockApi(KubernetesMockServer server) {
        this.server = server;
        this.client = server.createClient();
    }

    /** Starts the server on a free loopback port, in CRUD mode. */
    public static MockApi start() {
        KubernetesMockServer server = new KubernetesMockServer(new Context(), new MockWebServer(), new HashMap<>(),
                new KubernetesCrudDispatcher(), false);
        server.init(InetAddress.getLoopbackAddress(), 0);
        return new MockApi(server);
    }

    /** The JVM options that point a child's fabric8 client here, and at nothing of the host's. */
    public java.util.List<String> clientOptions() {
        return java.util.List.of("-Dkubernetes.master=http://127.0.0.1:" + server.getPort(),
                "-Dkubernetes.auth.tryKubeConfig=false", "-Dkubernetes.auth.tryServiceAccount=false");
    }

    /**
     * Closes the client, then the server. The server's own shutdown waits at most 10 s for its
     * Vert.x HTTP server to close and then throws "Unable to close MockWebServer"; that happened
     * once in CI (2026-12-04, after every assertion of ServiceRulesTest had passed) and not in
     * six runs of the same test since. The server runs in this JVM and holds nothing of the
     * kernel's, so a slow close is reported, with its cause, and does not fail the test it ends.
     */
    @Override
    public void close() {
        try {
            client.close();
        } finally {
            try {
                server.destroy();
            } catch (IllegalStateException e) {
                System.err.println("MockApi: the mock API server did not close in time (in-process, nothing of the"
                        + " kernel's): " + e + (e.getCause() == null ? "" : "; cause: " + e.getCause()));
            }
        }
    }
}
