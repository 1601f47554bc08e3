package io.github.sockmap4j;

import io.github.sockmap4j.internal.bpf.PolicyMap;
import io.github.sockmap4j.internal.bpf.PolicyRule;
import io.github.sockmap4j.internal.ffi.Libbpf;
import java.io.IOException;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.GroupPrincipal;
import java.nio.file.attribute.PosixFileAttributeView;
import java.nio.file.attribute.PosixFilePermissions;

/**
 * Opting in without privileges. A process without CAP_BPF cannot load programs, but it can
 * update a pinned map whose pin file it may write (verified on this kernel, with
 * unprivileged_bpf_disabled=2: docs/kernel.md, "Privileges and pin files"). So an agent that owns the pins grants a
 * group the right to write the policy map ({@link #grant}); an application in that group opts
 * its ports in through this client, and its sockets take the fast path when the agent attached
 * the sockops program to its cgroup.
 *
 * <p>Pins stay root-only (0600) unless granted; a grant gives the group read and write on the
 * policy map only (0660), and lets it reach it (0750 on the pin directory), never the world.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
public final class PolicyClient implements AutoCloseable {
    private final PolicyMap policy;

    private PolicyClient(PolicyMap policy) {
        this.policy = policy;
    }

    /**
     * Opens the policy map of a pin directory that an agent (or any privileged process) made.
     *
     * @throws IOException naming what to do when the pins are missing or not granted to us
     */
    public static PolicyClient open(Path pinDirectory) throws IOException {
        Libbpf bpf;
        try {
            bpf = Libbpf.load();
        } catch (UnsatisfiedLinkError e) {
            throw new IOException(e.getMessage(), e);
        }
        return new PolicyClient(PolicyMap.open(bpf, pinDirectory));
    }

    /**
     * Lets members of {@code group} opt in through the pins of {@code pinDirectory}: the policy
     * map pin becomes group-writable (0660) and the directory group-searchable (0750). Run by
     * the privileged owner of the pins.
     */
    public static void grant(Path pinDirectory, String group) throws IOException {
        GroupPrincipal g = pinDirectory.getFileSystem().getUserPrincipalLookupService()
                .lookupPrincipalByGroupName(group);
        Path policy = pinDirectory.resolve("policy");
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
        Rules.checkPort(port);
        PolicyRule rule = policy.add(port, network, Rules.keyBits(network, prefixBits));
        return new OptIn() {
            private boolean closed;

            @Override
            public int port() {
                return port;
            }

            @Override
            public boolean active() {
                return !closed;
            }

            @Override
            public void setBound(int bytes) throws IOException {
                Rules.checkBound(bytes);
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

    /**
     * Opts a server port in for good (until {@link #deny}): for an agent or an operator, where
     * {@link #optIn} ties the entry to the returned handle.
     *
     * @param network null for any address
     */
    public void allow(int port, InetAddress network, int prefixBits, int boundBytes) throws IOException {
        Rules.checkPort(port);
        Rules.checkBound(boundBytes);
        PolicyRule rule = policy.add(port, network, Rules.keyBits(network, prefixBits));
        if (boundBytes != 0) {
            policy.setBound(rule, boundBytes);
        }
    }

    /** Removes a rule {@link #allow} made; new connections to it go by TCP. */
    public void deny(int port, InetAddress network, int prefixBits) throws IOException {
        Rules.checkPort(port);
        policy.remove(policy.rule(port, network, Rules.keyBits(network, prefixBits)));
    }

    @Override
    public void close() {
        policy.close();
    }
}
