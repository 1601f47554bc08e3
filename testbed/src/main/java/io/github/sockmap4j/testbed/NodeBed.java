package io.github.sockmap4j.testbed;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;

/**
 * A Kubernetes-shaped node for tests, built from scratch: a "node" network namespace with IP
 * forwarding on, and "pods" each in a namespace of its own, routed through the node as a CNI
 * routes them (a /24 per veth, the node's end the pod's default gateway), not joined to each
 * other directly. {@link #service} adds kube-proxy-style NAT (iptables mode: a KUBE-SERVICES
 * chain in PREROUTING and OUTPUT, one chain per Service that picks an endpoint with
 * {@code statistic --mode random}, DNAT to it), {@link #serviceNft} the same in kube-proxy's
 * nftables mode, with conntrack as the node's netfilter keeps it.
 * {@link #close()} deletes every namespace it made, and with them their links and rules (a
 * shutdown hook does, if the JVM ends first); the host's own netfilter and sysctls are never
 * touched.
 *
 * <p>Pod {@code i} (from 0) has the address {@code 10.244.(i+1).2} and {@code fd00:244:(i+1)::2},
 * its node end {@code .1} and {@code ::1}.
 */
public final class NodeBed implements AutoCloseable {
    public final String node;
    private final List<String> pods = new ArrayList<>();
    private final String prefix;
    private int services;
    /** The tools (iptables, ip6tables) whose KUBE-SERVICES chain exists. */
    private final java.util.Set<String> tables = new java.util.HashSet<>();

    /** Deletes the namespaces if the JVM ends before {@link #close()} (a benchmark stopped by a signal). */
    private final Thread hook = new Thread(this::deleteAtExit, "node-bed-cleanup");

    private NodeBed(String prefix) {
        this.prefix = prefix;
        this.node = prefix + "n";
        Runtime.getRuntime().addShutdownHook(hook);
    }

    /**
     * A node with {@code podCount} pods.
     *
     * @param tag a few letters telling this test's namespaces and links apart
     */
    public static NodeBed create(String tag, int podCount) throws IOException, InterruptedException {
        String id = Long.toString(ProcessHandle.current().pid() % 100000);
        NodeBed bed = new NodeBed("sm4j-" + id + "-" + tag);
        try {
            Netns.add(bed.node);
            Sh.run("ip", "netns", "exec", bed.node, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1");
            Sh.run("ip", "netns", "exec", bed.node, "sysctl", "-q", "-w", "net.ipv6.conf.all.forwarding=1");
            for (int i = 0; i < podCount; i++) {
                bed.addPod(id, tag, i);
            }
            return bed;
        } catch (IOException | InterruptedException | RuntimeException e) {
            bed.close();
            throw e;
        }
    }

    private void addPod(String id, String tag, int i) throws IOException, InterruptedException {
        String pod = prefix + "p" + i;
        String inPod = "sm4j" + id + tag + "p" + i;  // at most 15 characters
        String onNode = "sm4j" + id + tag + "n" + i;
        Netns.add(pod);
        synchronized (this) {
            pods.add(pod);
        }
        Sh.run("ip", "link", "add", inPod, "type", "veth", "peer", "name", onNode);
        Sh.run("ip", "link", "set", inPod, "netns", pod);
        Sh.run("ip", "link", "set", onNode, "netns", node);
        int net = i + 1;
        Sh.run("ip", "-n", pod, "addr", "add", "10.244." + net + ".2/24", "dev", inPod);
        Sh.run("ip", "-n", pod, "-6", "addr", "add", "fd00:244:" + net + "::2/64", "dev", inPod, "nodad");
        Sh.run("ip", "-n", node, "addr", "add", "10.244." + net + ".1/24", "dev", onNode);
        Sh.run("ip", "-n", node, "-6", "addr", "add", "fd00:244:" + net + "::1/64", "dev", onNode, "nodad");
        Sh.run("ip", "-n", pod, "link", "set", inPod, "up");
        Sh.run("ip", "-n", node, "link", "set", onNode, "up");
        Sh.run("ip", "-n", pod, "route", "add", "default", "via", "10.244." + net + ".1");
        Sh.run("ip", "-n", pod, "-6", "route", "add", "default", "via", "fd00:244:" + net + "::1");
    }

    /** The namespace of pod {@code i}. */
    public String pod(int i) {
        return pods.get(i);
    }

    /** The IPv4 address of pod {@code i}. */
    public static String podAddress(int i) {
        return "10.244." + (i + 1) + ".2";
    }

    /** The IPv6 address of pod {@code i}. */
    public static String podAddress6(int i) {
        return "fd00:244:" + (i + 1) + "::2";
    }

    /**
     * A Service as kube-proxy's iptables mode writes it in the node: connections to
     * {@code vip:port} (TCP) go to one of {@code endpoints} ("ADDRESS:PORT", IPv4 or
     * "[ADDRESS]:PORT" for IPv6, the family of {@code vip}), picked at random with equal odds.
     */
    public void service(String vip, int port, String... endpoints) throws IOException, InterruptedException {
        boolean v6 = vip.contains(":");
        String tool = v6 ? "ip6tables" : "iptables";
        String svc = "KUBE-SVC-" + (++services);
        if (tables.add(tool)) {
            nat(tool, "-N", "KUBE-SERVICES");
            nat(tool, "-A", "PREROUTING", "-j", "KUBE-SERVICES");
            nat(tool, "-A", "OUTPUT", "-j", "KUBE-SERVICES");
        }
        nat(tool, "-N", svc);
        nat(tool, "-A", "KUBE-SERVICES", "-d", vip, "-p", "tcp", "--dport", Integer.toString(port), "-j", svc);
        for (int k = 0; k < endpoints.length; k++) {
            List<String> rule = new ArrayList<>(List.of("-A", svc, "-p", "tcp"));
            int left = endpoints.length - k;
            if (left > 1) {
                // kube-proxy's odds: endpoint k of n is taken with 1/(n-k) of what is left.
                rule.addAll(List.of("-m", "statistic", "--mode", "random", "--probability",
                        String.format(java.util.Locale.ROOT, "%.10f", 1.0 / left)));
            }
            rule.addAll(List.of("-j", "DNAT", "--to-destination", endpoints[k]));
            nat(tool, rule.toArray(String[]::new));
        }
    }

    /**
     * A Service as kube-proxy's nftables mode writes it in the node: a table {@code kube-proxy}
     * of the VIP's family whose nat chains on prerouting and output look {@code vip . tcp . port}
     * up in a verdict map, a chain per Service that picks an endpoint with {@code numgen random},
     * and a chain per endpoint ({@code ep-SERVICE-K}, with a counter) that DNATs to it. Returns
     * the Service's number, for {@link #nftPackets}.
     */
    public int serviceNft(String vip, int port, String... endpoints) throws IOException, InterruptedException {
        boolean v6 = vip.contains(":");
        String family = v6 ? "ip6" : "ip";
        int n = ++services;
        StringBuilder nft = new StringBuilder();
        if (tables.add(family + " kube-proxy")) {
            nft.append("table ").append(family).append(" kube-proxy {\n")
                    .append("  map service-ips { type ").append(v6 ? "ipv6_addr" : "ipv4_addr")
                    .append(" . inet_proto . inet_service : verdict; }\n")
                    .append("  chain services { ").append(family).append(" daddr . meta l4proto . th dport vmap @service-ips; }\n")
                    .append("  chain nat-prerouting { type nat hook prerouting priority dstnat; policy accept; jump services; }\n")
                    .append("  chain nat-output { type nat hook output priority -100; policy accept; jump services; }\n")
                    .append("}\n");
        }
        StringBuilder pick = new StringBuilder();
        for (int k = 0; k < endpoints.length; k++) {
            nft.append("add chain ").append(family).append(" kube-proxy ep-").append(n).append('-').append(k).append('\n');
            nft.append("add rule ").append(family).append(" kube-proxy ep-").append(n).append('-').append(k)
                    .append(" meta l4proto tcp counter dnat to ").append(endpoints[k]).append('\n');
            pick.append(k == 0 ? "" : ", ").append(k).append(" : goto ep-").append(n).append('-').append(k);
        }
        nft.append("add chain ").append(family).append(" kube-proxy svc-").append(n).append('\n');
        nft.append("add rule ").append(family).append(" kube-proxy svc-").append(n).append(" numgen random mod ")
                .append(endpoints.length).append(" vmap { ").append(pick).append(" }\n");
        nft.append("add element ").append(family).append(" kube-proxy service-ips { ").append(vip)
                .append(" . tcp . ").append(port).append(" : goto svc-").append(n).append(" }\n");
        try {
            Sh.runWithInput(nft.toString(), List.of("ip", "netns", "exec", node, "nft", "-f", "-"));
        } catch (IOException e) {
            throw new IOException(e.getMessage() + "\n" + nft, e);
        }
        return n;
    }

    /** Packets the DNAT of endpoint {@code k} of nftables Service {@code n} has matched (its counter). */
    public long nftPackets(boolean v6, int n, int k) throws IOException, InterruptedException {
        String out = Sh.run("ip", "netns", "exec", node, "nft", "list", "chain", v6 ? "ip6" : "ip", "kube-proxy",
                "ep-" + n + "-" + k);
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("counter packets (\\d+)").matcher(out);
        if (!m.find()) {
            throw new IOException("no counter in " + out);
        }
        return Long.parseLong(m.group(1));
    }

    /**
     * Makes pod {@code i} a meshed pod's network as Istio's init container (istio-iptables) writes
     * it, IPv4 and IPv6: inbound TCP (but the proxy's own ports 15008, 15090, 15021, 15020) goes
     * to the proxy's {@code inPort}; outbound TCP of every uid and gid but {@code proxyUid} goes to
     * its {@code outPort}, but to loopback; the proxy's own connects go out, but those to the
     * pod's own address, which go to its inbound port (and its connects from 127.0.0.6 / ::6, the
     * way it hands a connection to its application).
     */
    public void istioSidecarNat(int i, int proxyUid, int outPort, int inPort) throws IOException, InterruptedException {
        for (boolean v6 : new boolean[] {false, true}) {
            String lo = v6 ? "::1/128" : "127.0.0.1/32";
            String passthrough = v6 ? "::6/128" : "127.0.0.6/32";
            String uid = Integer.toString(proxyUid);
            String rules = String.join("\n",
                    "*nat",
                    ":ISTIO_INBOUND - [0:0]",
                    ":ISTIO_IN_REDIRECT - [0:0]",
                    ":ISTIO_OUTPUT - [0:0]",
                    ":ISTIO_REDIRECT - [0:0]",
                    "-A PREROUTING -p tcp -j ISTIO_INBOUND",
                    "-A OUTPUT -p tcp -j ISTIO_OUTPUT",
                    "-A ISTIO_INBOUND -p tcp --dport 15008 -j RETURN",
                    "-A ISTIO_INBOUND -p tcp --dport 15090 -j RETURN",
                    "-A ISTIO_INBOUND -p tcp --dport 15021 -j RETURN",
                    "-A ISTIO_INBOUND -p tcp --dport 15020 -j RETURN",
                    "-A ISTIO_INBOUND -p tcp -j ISTIO_IN_REDIRECT",
                    "-A ISTIO_IN_REDIRECT -p tcp -j REDIRECT --to-ports " + inPort,
                    "-A ISTIO_OUTPUT -s " + passthrough + " -o lo -j RETURN",
                    "-A ISTIO_OUTPUT ! -d " + lo + " -o lo -m owner --uid-owner " + uid + " -j ISTIO_IN_REDIRECT",
                    "-A ISTIO_OUTPUT -o lo -m owner ! --uid-owner " + uid + " -j RETURN",
                    "-A ISTIO_OUTPUT -m owner --uid-owner " + uid + " -j RETURN",
                    "-A ISTIO_OUTPUT ! -d " + lo + " -o lo -m owner --gid-owner " + uid + " -j ISTIO_IN_REDIRECT",
                    "-A ISTIO_OUTPUT -o lo -m owner ! --gid-owner " + uid + " -j RETURN",
                    "-A ISTIO_OUTPUT -m owner --gid-owner " + uid + " -j RETURN",
                    "-A ISTIO_OUTPUT -d " + lo + " -j RETURN",
                    "-A ISTIO_OUTPUT -j ISTIO_REDIRECT",
                    "-A ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports " + outPort,
                    "COMMIT", "");
            Sh.runWithInput(rules, List.of("ip", "netns", "exec", pod(i), v6 ? "ip6tables-restore" : "iptables-restore",
                    "-w", "--noflush"));
        }
        if (!Sh.run("ip", "-n", pod(i), "addr", "show", "lo").contains("::6")) {
            // Istio's proxy hands inbound IPv6 connections over from ::6; a pod's loopback has only ::1.
            Sh.run("ip", "-n", pod(i), "-6", "addr", "add", "::6/128", "dev", "lo", "nodad");
        }
    }

    /**
     * Replaces pod {@code i}'s NAT by the one Linkerd's init container (linkerd2-proxy-init)
     * writes, IPv4 and IPv6: inbound TCP (but to the {@code inboundIgnore} ports) goes to the
     * proxy's {@code inPort}; outbound TCP of every uid but {@code proxyUid} goes to its
     * {@code outPort}, but what leaves by loopback and to the {@code outboundIgnore} ports. The
     * ports as linkerd-init takes them: ports, or ranges {@code A:B}.
     */
    public void linkerdSidecarNat(int i, int proxyUid, int outPort, int inPort, List<String> inboundIgnore,
            List<String> outboundIgnore) throws IOException, InterruptedException {
        for (boolean v6 : new boolean[] {false, true}) {
            List<String> rules = new ArrayList<>(List.of("*nat", ":PROXY_INIT_REDIRECT - [0:0]",
                    ":PROXY_INIT_OUTPUT - [0:0]"));
            if (!inboundIgnore.isEmpty()) {
                rules.add("-A PROXY_INIT_REDIRECT -p tcp -m multiport --dports " + String.join(",", inboundIgnore)
                        + " -j RETURN");
            }
            rules.add("-A PROXY_INIT_REDIRECT -p tcp -j REDIRECT --to-ports " + inPort);
            rules.add("-A PREROUTING -j PROXY_INIT_REDIRECT");
            rules.add("-A PROXY_INIT_OUTPUT -m owner --uid-owner " + proxyUid + " -j RETURN");
            rules.add("-A PROXY_INIT_OUTPUT -o lo -j RETURN");
            if (!outboundIgnore.isEmpty()) {
                rules.add("-A PROXY_INIT_OUTPUT -p tcp -m multiport --dports " + String.join(",", outboundIgnore)
                        + " -j RETURN");
            }
            rules.add("-A PROXY_INIT_OUTPUT -p tcp -j REDIRECT --to-ports " + outPort);
            rules.add("-A OUTPUT -j PROXY_INIT_OUTPUT");
            rules.addAll(List.of("COMMIT", ""));
            // Without --noflush: the pod's whole NAT table is replaced.
            Sh.runWithInput(String.join("\n", rules), List.of("ip", "netns", "exec", pod(i),
                    v6 ? "ip6tables-restore" : "iptables-restore", "-w"));
        }
    }

    /** Empties pod {@code i}'s NAT table, IPv4 and IPv6 (before another sidecar's NAT is written). */
    public void clearPodNat(int i) throws IOException, InterruptedException {
        for (String tool : List.of("iptables-restore", "ip6tables-restore")) {
            Sh.runWithInput("*nat\nCOMMIT\n", List.of("ip", "netns", "exec", pod(i), tool, "-w"));
        }
    }

    /**
     * Adds to pod {@code i}'s {@link #istioSidecarNat} what istio-init writes for the pod's
     * exclude-ports annotations, IPv4 and IPv6: connects to {@code outbound} ports left out of the
     * outbound redirect, connections to its {@code inbound} ports left out of the inbound one.
     */
    public void istioExcludePorts(int i, List<Integer> outbound, List<Integer> inbound)
            throws IOException, InterruptedException {
        for (String tool : List.of("iptables", "ip6tables")) {
            for (int port : outbound) {
                Sh.run("ip", "netns", "exec", pod(i), tool, "-w", "-t", "nat", "-I", "ISTIO_OUTPUT", "1", "-p", "tcp",
                        "--dport", Integer.toString(port), "-j", "RETURN");
            }
            for (int port : inbound) {
                Sh.run("ip", "netns", "exec", pod(i), tool, "-w", "-t", "nat", "-I", "ISTIO_INBOUND", "1", "-p", "tcp",
                        "--dport", Integer.toString(port), "-j", "RETURN");
            }
        }
    }

    private void nat(String tool, String... args) throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>(List.of("ip", "netns", "exec", node, tool, "-w", "-t", "nat"));
        cmd.addAll(List.of(args));
        Sh.run(cmd.toArray(String[]::new));
    }

    /** {@code command} run inside network namespace {@code ns}: see {@link Sh#in}. */
    public static List<String> in(String ns, List<String> command) {
        return Sh.in(ns, command);
    }

    /** {@code command} run in network namespace {@code ns} only: see {@link Sh#inNetwork}. */
    public static List<String> inNetwork(String ns, List<String> command) {
        return Sh.inNetwork(ns, command);
    }

    /**
     * Runs {@code body} on a thread of its own that has entered network namespace {@code ns}
     * ({@code setns}, which moves only that thread), and returns what it returns: a socket it
     * opens is the namespace's, and the connections it makes or accepts stay there after the
     * thread ends. How one process puts each end of a connection in a different pod; the cgroup
     * stays the process's.
     *
     * @throws IOException {@code ns} cannot be entered, or {@code body} threw it
     */
    public static <T> T callIn(String ns, Callable<T> body) throws IOException {
        CompletableFuture<T> result = new CompletableFuture<>();
        Thread t = new Thread(() -> {
            try {
                Setns.enter(ns);
                result.complete(body.call());
            } catch (Throwable e) {
                result.completeExceptionally(e);
            }
        }, "in-" + ns);
        t.start();
        try {
            return result.get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted in network namespace " + ns, e);
        } catch (ExecutionException e) {
            if (e.getCause() instanceof IOException io) {
                throw new IOException("in network namespace " + ns + ": " + io.getMessage(), io);
            }
            if (e.getCause() instanceof RuntimeException re) {
                throw re;
            }
            throw new IOException("in network namespace " + ns + ": " + e.getCause(), e.getCause());
        }
    }

    /** Deletes the pods' and the node's namespaces (their links, routes and NAT rules go with them). */
    @Override
    public void close() throws IOException {
        try {
            Runtime.getRuntime().removeShutdownHook(hook);
        } catch (IllegalStateException exiting) {
            // The JVM is exiting: the hook deletes them as well (deleting is idempotent).
        }
        Netns.deleteAll(namespaces());
    }

    private synchronized List<String> namespaces() {
        List<String> all = new ArrayList<>(pods);
        all.add(node);
        return all;
    }

    private void deleteAtExit() {
        try {
            Netns.deleteAll(namespaces());
        } catch (IOException e) {
            System.err.println("node bed: deleting " + namespaces() + " at exit failed: " + e.getMessage());
        }
    }
}
