package io.github.sockmap4j.cli;

import io.github.sockmap4j.agent.kubernetes.PodRules;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.fabric8.kubernetes.api.model.ConfigMap;
import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.fabric8.kubernetes.api.model.PodSpec;
import io.fabric8.kubernetes.api.model.ServiceAccount;
import io.fabric8.kubernetes.api.model.VolumeMount;
import io.fabric8.kubernetes.api.model.apps.DaemonSet;
import io.fabric8.kubernetes.api.model.rbac.ClusterRole;
import io.fabric8.kubernetes.api.model.rbac.ClusterRoleBinding;
import io.fabric8.kubernetes.client.utils.KubernetesSerialization;
import io.github.sockmap4j.agent.control.AgentPolicy;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/**
 * deploy/: every manifest parsed with the fabric8 model, checked for what the API server would
 * refuse and for what the agent needs; the agent's arguments parsed by its own command line; the
 * image definition against the distribution the build makes. Needs no cluster and no root.
 */
class DeployManifestsTest {
    static final Path DEPLOY = Path.of("..", "deploy");

    static List<HasMetadata> manifests() throws Exception {
        List<HasMetadata> all = new ArrayList<>();
        KubernetesSerialization yaml = new KubernetesSerialization();
        try (Stream<Path> files = Files.list(DEPLOY.resolve("kubernetes"))) {
            for (Path f : files.filter(p -> p.toString().endsWith(".yaml")).sorted().toList()) {
                try (InputStream in = Files.newInputStream(f)) {
                    Object o = yaml.unmarshal(in);
                    if (o instanceof List<?> l) {
                        l.forEach(x -> all.add((HasMetadata) x));
                    } else {
                        all.add((HasMetadata) o);
                    }
                }
            }
        }
        return all;
    }

    static <T> T one(List<HasMetadata> all, Class<T> kind) {
        List<T> of = all.stream().filter(kind::isInstance).map(kind::cast).toList();
        assertEquals(1, of.size(), "one " + kind.getSimpleName());
        return of.get(0);
    }

    @Test
    void theDaemonSetIsOneTheApiServerAcceptsAndRunsTheAgentAsItExpects() throws Exception {
        List<HasMetadata> all = manifests();
        DaemonSet ds = one(all, DaemonSet.class);
        PodSpec spec = ds.getSpec().getTemplate().getSpec();
        assertEquals(ds.getSpec().getSelector().getMatchLabels(), ds.getSpec().getTemplate().getMetadata().getLabels(),
                "the selector selects the template");
        for (Container c : spec.getContainers()) {
            boolean privileged = c.getSecurityContext() != null
                    && Boolean.TRUE.equals(c.getSecurityContext().getPrivileged());
            for (VolumeMount m : c.getVolumeMounts()) {
                if ("Bidirectional".equals(m.getMountPropagation())) {
                    assertTrue(privileged, "the API server refuses Bidirectional propagation in an unprivileged "
                            + "container: " + m.getName());
                }
                assertTrue(spec.getVolumes().stream().anyMatch(v -> v.getName().equals(m.getName())),
                        "a volume for every mount: " + m.getName());
            }
            assertNotNull(c.getResources().getRequests(), "resources");
            assertTrue(c.getLifecycle() == null || c.getLifecycle().getPreStop() == null,
                    "no preStop: stopping the agent must leave pins and rules for the next one");

            // The arguments are the agent's own: its command line parses them.
            CommandLine cl = new CommandLine(new SockmapCli());
            CommandLine.ParseResult parsed = cl.parseArgs(c.getArgs().toArray(String[]::new));
            assertTrue(parsed.hasSubcommand() && parsed.subcommand().commandSpec().name().equals("agent"), c.getArgs()
                    .toString());
            // The probes: the agent's Unix socket for the pin directory it is given, not a TCP port any
            // user of the node could take while the agent restarts.
            Path pinDir = parsed.<Path>matchedOptionValue("--pin-dir", Path.of("/sys/fs/bpf/sockmap4j"));
            String socket = io.github.sockmap4j.agent.AgentHttp.probeSocket(pinDir).toString();
            assertTrue(c.getVolumeMounts().stream().anyMatch(m -> socket.startsWith(m.getMountPath() + "/")),
                    "the probe socket's directory is mounted: " + socket);
            for (var probe : List.of(c.getLivenessProbe(), c.getReadinessProbe())) {
                assertNotNull(probe, "probes");
                assertTrue(probe.getHttpGet() == null && probe.getTcpSocket() == null, "no probe on a TCP port");
                List<String> cmd = probe.getExec().getCommand();
                assertEquals("curl", cmd.get(0), cmd.toString());
                assertEquals(socket, cmd.get(cmd.indexOf("--unix-socket") + 1), "the agent's probe socket");
                assertTrue(cmd.contains("-sf"), "fails on an error status: " + cmd);
            }
            assertTrue(c.getLivenessProbe().getExec().getCommand().getLast().endsWith("/healthz"));
            assertTrue(c.getReadinessProbe().getExec().getCommand().getLast().endsWith("/readyz"));
            assertTrue(c.getEnv().stream().anyMatch(e -> e.getName().equals("NODE_NAME")
                    && e.getValueFrom().getFieldRef().getFieldPath().equals("spec.nodeName")), "--kubernetes needs it");
        }
        assertTrue(spec.getHostPID(), "the agent enters pods' namespaces through /proc/PID/ns/net of host PIDs");
        assertTrue(spec.getHostNetwork(), "metrics on the host's loopback");
        assertEquals("system-node-critical", spec.getPriorityClassName());
        assertTrue(spec.getTolerations().stream().anyMatch(t -> "Exists".equals(t.getOperator())),
                "on every node");
        ServiceAccount sa = one(all, ServiceAccount.class);
        assertEquals(sa.getMetadata().getName(), spec.getServiceAccountName());
        ClusterRole role = one(all, ClusterRole.class);
        assertTrue(role.getRules().stream().anyMatch(r -> r.getResources().contains("pods")
                && r.getVerbs().containsAll(List.of("get", "list", "watch"))), "it may watch pods");
        assertTrue(role.getRules().stream().anyMatch(r -> r.getApiGroups().contains("") && r.getResources()
                .contains("services") && r.getVerbs().containsAll(List.of("get", "list", "watch"))), "and Services");
        assertTrue(role.getRules().stream().anyMatch(r -> r.getApiGroups().contains("discovery.k8s.io")
                && r.getResources().contains("endpointslices")
                && r.getVerbs().containsAll(List.of("get", "list", "watch"))), "and EndpointSlices");
        assertTrue(role.getRules().stream().allMatch(r -> Set.of("get", "list", "watch").containsAll(r.getVerbs())),
                "and writes nothing");
        ClusterRoleBinding binding = one(all, ClusterRoleBinding.class);
        assertEquals(role.getMetadata().getName(), binding.getRoleRef().getName());
        assertTrue(binding.getSubjects().stream().anyMatch(s -> s.getName().equals(sa.getMetadata().getName())
                && s.getNamespace().equals(sa.getMetadata().getNamespace())));
        ConfigMap policy = one(all, ConfigMap.class);
        assertEquals(0, AgentPolicy.load(writeTemp(policy.getData().get("policy"))).grants(),
                "the shipped policy grants nothing (a valid file)");
        assertTrue(spec.getVolumes().stream().anyMatch(v -> v.getConfigMap() != null
                && v.getConfigMap().getName().equals(policy.getMetadata().getName())));
    }

    static Path writeTemp(String content) throws Exception {
        Path f = Files.createTempFile("policy", "");
        Files.writeString(f, content);
        f.toFile().deleteOnExit();
        return f;
    }

    @Test
    void theExampleAppsAnnotationBecomesRules() throws Exception {
        Pod app = one(manifests(), Pod.class);
        Pod scheduled = new PodBuilder(app).editSpec().withNodeName("node-1").endSpec().withNewStatus()
                .withPodIP("10.42.0.7").endStatus().build();
        var rules = PodRules.rulesOf(scheduled, "node-1", PodRules.DEFAULT_ANNOTATION);
        assertEquals(2, rules.size(), rules.toString());
        assertTrue(rules.stream().allMatch(r -> r.bound() == 4194304 && r.prefixBits() == 32
                && r.network().getHostAddress().equals("10.42.0.7")));
    }

    @Test
    void theImageCopiesAndRunsWhatTheBuildMakes() throws Exception {
        List<String> lines = Files.readAllLines(DEPLOY.resolve("image/Dockerfile"));
        String copy = lines.stream().filter(l -> l.startsWith("COPY ")).findFirst().orElseThrow();
        String from = copy.split("\\s+")[1];
        String to = copy.split("\\s+")[2];
        String entry = lines.stream().filter(l -> l.startsWith("ENTRYPOINT")).findFirst().orElseThrow();
        assertTrue(entry.contains(to + "/bin/sockmap4j"), entry);
        // The assembly makes that directory (package phase) with the launcher the entry point runs.
        assertTrue(from.startsWith("cli/target/sockmap4j-cli-") && from.endsWith("-dist/sockmap4j"), from);
        assertTrue(Files.isExecutable(Path.of("src/dist/bin/sockmap4j")));
        assertTrue(Files.readString(Path.of("src/assembly/dist.xml")).contains("<baseDirectory>sockmap4j</baseDirectory>"));
        assertTrue(from.contains(System.getProperty("project.version", "0.1.0-SNAPSHOT")), "the version the build makes");
        assertFalse(lines.stream().anyMatch(l -> l.contains("down")), "the image never removes pins by itself");
    }
}
