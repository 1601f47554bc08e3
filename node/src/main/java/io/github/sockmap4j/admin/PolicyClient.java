package io.github.sockmap4j.admin;

import io.github.sockmap4j.OptIn;
import io.github.sockmap4j.linux.bpf.PolicyMap;
import io.github.sockmap4j.linux.bpf.PolicyRule;
import io.github.sockmap4j.linux.bpf.ServiceMap;
import io.github.sockmap4j.control.AgentClient;
import io.github.sockmap4j.control.AgentRequest;
import io.github.sockmap4j.control.AgentRule;
import io.github.sockmap4j.linux.ffi.Errno;
import io.github.sockmap4j.linux.ffi.Libbpf;
import java.io.IOException;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.GroupPrincipal;
import java.nio.file.attribute.PosixFileAttributeView;
import java.nio.file.attribute.PosixFilePermissions;

/**
 * Opting in without privileges. Where a node agent runs ({@code sockmap4j agent}), this client
 * asks it over its control socket: the agent knows who asks (the kernel's SO_PEERCRED), applies
 * its policy file (which users may opt which ports and networks in, with which largest bound;
 * an unbounded rule only for root) and is the only writer of the policy map, whose pin stays
 * root-only. A rule made by {@link #optIn} lasts as long as this client (its connection to the
 * agent); {@link #allow} until {@link #deny}, which removes only rules this user made.
 *
 * <p>Without an agent it writes the pinned policy map itself, which needs a pin file it may
 * write: a process without CAP_BPF can update a pinned map whose pin file it may write
 * (verified on this kernel, with unprivileged_bpf_disabled=2: docs/kernel.md, "Privileges and
 * pin files"), so the owner of the pins may grant a group that right ({@link #grant}: 0660 on
 * the policy pin, 0750 on the directory). Such a group can set any rule, with any bound, and
 * remove anybody's: prefer the agent.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
public final class PolicyClient implements AutoCloseable {
    /** Where this client's changes go: chosen once, at {@link #open}. */
    private final Writer writer;

    private PolicyClient(Writer writer) {
        this.writer = writer;
    }

    /**
     * Opens the policy map of a pin directory that an agent (or any privileged process) made.
     *
     * @throws IOException naming what to do when the pins are missing or not granted to us
     */
    public static PolicyClient open(Path pinDirectory) throws IOException {
        AgentClient agent = AgentClient.connectIfRunning(SockmapAdmin.of(pinDirectory).agentSocket());
        if (agent != null) {
            return new PolicyClient(new ThroughAgent(agent));
        }
        Libbpf bpf = Libbpf.loadOrThrow();
        return new PolicyClient(new IntoMaps(PolicyMap.open(bpf, pinDirectory), pinDirectory));
    }

    /**
     * Every rule: through an agent, each with who holds it ("8080 bound 0 held by uid 1000
     * (user)"); without one, what the policy map holds ("8080 bound 0 (in the policy map; ...)"),
     * a service's own opt-ins among them.
     *
     * @throws IOException when neither an agent answers nor the policy map can be read
     */
    public java.util.List<String> rules() throws IOException {
        return writer.rules();
    }

    /** Whether this client asks a node agent (rather than writing the policy map itself). */
    public boolean viaAgent() {
        return writer instanceof ThroughAgent;
    }

    /**
     * Lets members of {@code group} opt in through the pins of {@code pinDirectory}: the policy
     * map pin becomes group-writable (0660) and the directory group-searchable (0750). Run by
     * the privileged owner of the pins.
     */
    public static void grant(Path pinDirectory, String group) throws IOException {
        GroupPrincipal g;
        try {
            g = pinDirectory.getFileSystem().getUserPrincipalLookupService().lookupPrincipalByGroupName(group);
        } catch (java.nio.file.attribute.UserPrincipalNotFoundException e) {
            throw new IOException("no group named '" + group + "' on this host ('getent group' lists them)", e);
        }
        Path policy = io.github.sockmap4j.linux.bpf.Pins.policyPin(pinDirectory);
        if (!Files.exists(policy)) {
            throw new IOException("no policy map pinned in " + pinDirectory + ": open the fast path there first");
        }
        Files.getFileAttributeView(pinDirectory, PosixFileAttributeView.class).setGroup(g);
        Files.setPosixFilePermissions(pinDirectory, PosixFilePermissions.fromString("rwxr-x---"));
        Files.getFileAttributeView(policy, PosixFileAttributeView.class).setGroup(g);
        Files.setPosixFilePermissions(policy, PosixFilePermissions.fromString("rw-rw----"));
    }

    /** Opts a server port in (any address). */
    public OptIn optIn(int port) throws IOException {
        return optIn(port, null, 0);
    }

    /** Opts a server port in for addresses within {@code network/prefixBits}. */
    public OptIn optIn(int port, InetAddress network, int prefixBits) throws IOException {
        return writer.optIn(PolicyRule.of(port, network, prefixBits));
    }

    /** {@link #allow(int, InetAddress, int, int)} for {@code rule}. */
    public void allow(Rule rule) throws IOException {
        allow(rule.port(), rule.network(), rule.prefixBits(), rule.bound());
    }

    /** {@link #deny(int, InetAddress, int)} for {@code rule}'s port and network. */
    public boolean deny(Rule rule) throws IOException {
        return deny(rule.port(), rule.network(), rule.prefixBits());
    }

    /**
     * Opts a server port in for good (until {@link #deny}): for an agent or an operator, where
     * {@link #optIn} ties the entry to the returned handle.
     *
     * @param network null for any address
     */
    public void allow(int port, InetAddress network, int prefixBits, int boundBytes) throws IOException {
        PolicyRule rule = PolicyRule.of(port, network, prefixBits);
        PolicyRule.checkBound(boundBytes);
        writer.allow(rule, boundBytes);
    }

    /**
     * Removes a rule {@link #allow} made; new connections to it go by TCP. False when there was no
     * such rule; through an agent, a rule that is not there or not the caller's is refused with why.
     */
    public boolean deny(int port, InetAddress network, int prefixBits) throws IOException {
        return writer.deny(PolicyRule.of(port, network, prefixBits));
    }

    /**
     * Puts a Service in the Service map (or replaces the one of its VIP and port): through the
     * agent where one runs, which allows it when its policy file grants the caller the Service's
     * address and port and each endpoint's, and lets only whoever put it (or root) replace or
     * remove it; without an agent, written directly (root, or whoever may write the pins).
     *
     * @throws IOException with the agent's reason when it refused, or what failed
     */
    public void putService(SockmapAdmin.Service s) throws IOException {
        writer.putService(new ServiceMap.Service(s.vip(), s.local(), s.remote(), s.localOnly()));
    }

    /**
     * Removes the Service of {@code vip}; new connects to it go through kube-proxy again. False
     * when there was none; through an agent, one that is not there or not the caller's is refused
     * with why.
     */
    public boolean removeService(java.net.InetSocketAddress vip) throws IOException {
        return writer.removeService(vip);
    }

    /**
     * The Services, one line each ("10.96.0.10:6334 local=10.244.1.2:6334 remote=- put by uid
     * 1000"); who put them only through an agent.
     */
    public java.util.List<String> services() throws IOException {
        return writer.services();
    }

    @Override
    public void close() {
        writer.close();
    }

    /** Where a client's changes go, rules and bounds already checked. */
    private sealed interface Writer permits ThroughAgent, IntoMaps {
        OptIn optIn(PolicyRule rule) throws IOException;

        void allow(PolicyRule rule, int boundBytes) throws IOException;

        boolean deny(PolicyRule rule) throws IOException;

        void putService(ServiceMap.Service s) throws IOException;

        boolean removeService(java.net.InetSocketAddress vip) throws IOException;

        java.util.List<String> services() throws IOException;

        java.util.List<String> rules() throws IOException;

        void close();
    }

    /** Requests to the node agent, which checks them against its policy file and writes the maps. */
    private record ThroughAgent(AgentClient agent) implements Writer {
        @Override
        public OptIn optIn(PolicyRule rule) throws IOException {
            AgentRule held = AgentRule.request(agent, rule, 0);
            return new OptIn() {
                @Override
                public int port() {
                    return rule.port();
                }

                @Override
                public boolean active() {
                    return held.active();
                }

                @Override
                public void setBound(int bytes) throws IOException {
                    held.setBound(bytes);
                }

                @Override
                public void close() {
                    held.close();
                }
            };
        }

        @Override
        public void allow(PolicyRule rule, int boundBytes) throws IOException {
            agent.call(new AgentRequest(AgentRequest.Verb.ALLOW, rule, boundBytes));
        }

        @Override
        public boolean deny(PolicyRule rule) throws IOException {
            // The agent refuses, with why, a rule that is not there or not the caller's.
            agent.call(new AgentRequest(AgentRequest.Verb.DENY, rule, 0));
            return true;
        }

        @Override
        public void putService(ServiceMap.Service s) throws IOException {
            agent.call(AgentRequest.putService(s));
        }

        @Override
        public boolean removeService(java.net.InetSocketAddress vip) throws IOException {
            agent.call(AgentRequest.removeService(vip));
            return true;
        }

        @Override
        public java.util.List<String> services() throws IOException {
            return agent.lines(AgentRequest.services());
        }

        @Override
        public java.util.List<String> rules() throws IOException {
            return agent.list();
        }

        @Override
        public void close() {
            try {
                agent.close(); // the agent removes this client's OPTIN rules
            } catch (IOException ignored) {
                // The connection is gone either way.
            }
        }
    }

    /** The pinned maps written directly: root, or whoever the pins were granted to. */
    private record IntoMaps(PolicyMap policy, Path pinDirectory) implements Writer {
        @Override
        public OptIn optIn(PolicyRule rule) throws IOException {
            policy.add(rule);
            return new OptIn() {
                private boolean closed;

                @Override
                public int port() {
                    return rule.port();
                }

                @Override
                public boolean active() {
                    return !closed;
                }

                @Override
                public void setBound(int bytes) throws IOException {
                    PolicyRule.checkBound(bytes);
                    policy.setBound(rule, bytes);
                }

                @Override
                public synchronized void close() {
                    if (!closed) {
                        closed = true;
                        policy.remove(rule);
                    }
                }
            };
        }

        @Override
        public void allow(PolicyRule rule, int boundBytes) throws IOException {
            policy.put(rule, boundBytes);
        }

        @Override
        public boolean deny(PolicyRule rule) throws IOException {
            int rc = policy.tryRemove(rule);
            if (rc == -Errno.ENOENT) {
                return false;
            }
            if (rc != 0) {
                throw Errno.error("removing the rule for " + rule + " from the policy map", rc);
            }
            return true;
        }

        @Override
        public void putService(ServiceMap.Service s) throws IOException {
            try (ServiceMap m = ServiceMap.open(Libbpf.load(), pinDirectory)) {
                m.put(s);
            }
        }

        @Override
        public boolean removeService(java.net.InetSocketAddress vip) throws IOException {
            try (ServiceMap m = ServiceMap.open(Libbpf.load(), pinDirectory)) {
                return m.remove(vip);
            }
        }

        @Override
        public java.util.List<String> services() throws IOException {
            java.util.List<String> out = new java.util.ArrayList<>();
            try (ServiceMap m = ServiceMap.open(Libbpf.load(), pinDirectory)) {
                for (ServiceMap.Service s : m.list()) {
                    out.add(AgentRequest.describe(s));
                }
            }
            return out;
        }

        @Override
        public java.util.List<String> rules() throws IOException {
            // Without an agent the map itself is the record: its rules and bounds, not who set them.
            java.util.List<String> out = new java.util.ArrayList<>();
            for (io.github.sockmap4j.linux.bpf.PolicyRule r : policy.rules()) {
                out.add(r.target() + " bound " + policy.boundOf(r) + " (in the policy map; who holds it is an agent's "
                        + "record)");
            }
            return out;
        }

        @Override
        public void close() {
            policy.close();
        }
    }
}
