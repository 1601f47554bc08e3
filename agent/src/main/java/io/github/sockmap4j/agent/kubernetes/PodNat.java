package io.github.sockmap4j.agent.kubernetes;

import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.Pod;
import io.github.sockmap4j.linux.bpf.MeshMap;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * A meshed pod's NAT as the kernel's capture follows it: the proxy's uid, which the NAT leaves
 * alone; the ports it sends the pod's outbound connects and the connections to it to; and the
 * ports it leaves out of each.
 *
 * <p>{@link #ofInitContainer} reads it from the arguments of the init container that wrote the
 * NAT: Istio's {@code istio-init}, or {@code istio-validation} where Istio's CNI plugin writes the
 * rules (same arguments), or Linkerd's {@code linkerd-init}. Those are what the pod got, the mesh's
 * installation-wide settings ({@code values.global.proxy.excludeOutboundPorts}, Linkerd's
 * {@code proxyInit.ignoreInboundPorts} and the like) included, which no annotation of the pod
 * carries. An argument that makes the NAT capture otherwise than the kernel can (address ranges,
 * TPROXY, only some ports, DNS capture) or one this class does not know is refused by name: the
 * pod is then left to its NAT rather than have connects captured that its NAT leaves alone.
 *
 * @param proxyUid     the proxy's uid
 * @param proxyGid     the proxy's gid, whose tasks' connects the NAT leaves alone too (Istio's
 *                     {@code -g}, its uid when not given); -1 for none (Linkerd's)
 * @param outboundPort where the NAT sends the pod's outbound connects
 * @param inboundPort  where it sends connections to the pod
 * @param outboundSkip destination ports of outbound connects it leaves alone
 * @param inboundSkip  the pod's ports whose connections it leaves alone
 */
record PodNat(int proxyUid, int proxyGid, int outboundPort, int inboundPort, List<Integer> outboundSkip,
              List<Integer> inboundSkip) {
    /** The init containers that write (or, with Istio's CNI plugin, check) a sidecar's NAT. */
    static final Set<String> ISTIO_INIT = Set.of("istio-init", "istio-validation");
    /** The command those run, followed by its flags. */
    static final String ISTIO_IPTABLES = "istio-iptables";
    /** Linkerd's init container, which writes its sidecar's NAT (linkerd2-proxy-init). */
    static final String LINKERD_INIT = "linkerd-init";

    /** istio-iptables' long flags, by their one-letter names. */
    private static final Map<String, String> LONG = Map.ofEntries(Map.entry("envoy-port", "p"),
            Map.entry("inbound-capture-port", "z"), Map.entry("inbound-tunnel-port", "e"), Map.entry("proxy-uid", "u"),
            Map.entry("proxy-gid", "g"), Map.entry("istio-inbound-interception-mode", "m"), Map.entry("istio-service-cidr", "i"),
            Map.entry("istio-service-exclude-cidr", "x"), Map.entry("istio-inbound-ports", "b"),
            Map.entry("istio-local-exclude-ports", "d"), Map.entry("istio-local-outbound-ports-exclude", "o"),
            Map.entry("istio-include-outbound-ports", "q"), Map.entry("kube-virt-interfaces", "k"));
    /** Flags that leave the NAT as it is: the validation container's, logging. */
    private static final Set<String> HARMLESS_SWITCHES = Set.of("run-validation", "skip-rule-apply", "log_as_json",
            "iptables-trace-logging", "restore-format");
    private static final Set<String> HARMLESS_VALUES = Set.of("log_output_level", "log_stacktrace_level",
            "log_caller", "log_target");
    /** linkerd-init's flags that leave its NAT as it is: logging, which binary writes it, a sysctl of conntrack. */
    private static final Set<String> LINKERD_HARMLESS_VALUES = Set.of("log-format", "log-level", "firewall-bin-path",
            "firewall-save-bin-path", "timeout-close-wait-secs");

    PodNat {
        for (int port : List.of(outboundPort, inboundPort)) {
            if (port < 1 || port > 65535) {
                throw new IllegalArgumentException("the proxy's port " + port + " is not in 1-65535");
            }
        }
        if (outboundPort == inboundPort) {
            throw new IllegalArgumentException("the proxy's outbound and inbound ports are both " + inboundPort);
        }
        outboundSkip = MeshMap.checkSkip(outboundSkip, "outbound", -1);
        inboundSkip = MeshMap.checkSkip(inboundSkip, "inbound", inboundPort);
    }

    /**
     * The NAT pod {@code p}'s Istio or Linkerd init container wrote, from its arguments; empty
     * when it has none (the pod's annotations and the agent's shape then say it).
     *
     * @throws IllegalArgumentException naming the argument, where one makes the NAT capture
     *                                  otherwise than the kernel can, or is not known here
     */
    static Optional<PodNat> ofInitContainer(Pod p) {
        if (p.getSpec() == null || p.getSpec().getInitContainers() == null) {
            return Optional.empty();
        }
        for (Container c : p.getSpec().getInitContainers()) {
            List<String> words = new ArrayList<>();
            Optional.ofNullable(c.getCommand()).ifPresent(words::addAll);
            Optional.ofNullable(c.getArgs()).ifPresent(words::addAll);
            int at = -1;
            for (int i = 0; i < words.size() && at < 0; i++) {
                String w = words.get(i);
                at = w != null && (w.equals(ISTIO_IPTABLES) || w.endsWith("/" + ISTIO_IPTABLES)) ? i : -1;
            }
            try {
                if (at >= 0 && ISTIO_INIT.contains(c.getName())) {
                    return Optional.of(ofIstioIptables(words.subList(at + 1, words.size())));
                }
                if (LINKERD_INIT.equals(c.getName())) {
                    // Its image's entrypoint runs proxy-init; a command given names it first.
                    int first = 0;
                    while (first < words.size() && words.get(first) != null && !words.get(first).startsWith("-")) {
                        first++;
                    }
                    return Optional.of(ofLinkerdInit(words.subList(first, words.size())));
                }
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("init container " + c.getName() + ": " + e.getMessage(), e);
            }
        }
        return Optional.empty();
    }

    /**
     * The NAT istio-iptables writes with flags {@code args}: its defaults where a port, the uid or
     * the gid is not given (15001, 15006, 1337, the uid); the inbound ports it leaves out are its tunnel port
     * ({@code -e}, 15008), which it always leaves out, and those of {@code -d}. The outbound
     * ranges ({@code -i}) and inbound ports ({@code -b}) must be given, as Istio's injector gives
     * them, since without them its NAT takes them from its environment.
     *
     * @throws IllegalArgumentException naming the flag the kernel's capture does not follow
     */
    static PodNat ofIstioIptables(List<String> args) {
        Map<String, String> flags = new java.util.HashMap<>();
        for (int i = 0; i < args.size(); i++) {
            String a = args.get(i);
            if (a == null || a.isBlank()) {
                throw new IllegalArgumentException("a blank argument where a flag was expected");
            }
            String name;
            String value = null;
            if (a.startsWith("--")) {
                int eq = a.indexOf('=');
                name = eq < 0 ? a.substring(2) : a.substring(2, eq);
                value = eq < 0 ? null : a.substring(eq + 1);
                if (HARMLESS_SWITCHES.contains(name)) {
                    continue;
                }
                if (HARMLESS_VALUES.contains(name)) {
                    i += value == null ? 1 : 0;
                    continue;
                }
                String shortName = LONG.get(name);
                if (shortName == null) {
                    throw new IllegalArgumentException(a + ": not a flag the kernel's capture is known to follow");
                }
                name = shortName;
            } else if (a.startsWith("-") && a.length() >= 2) {
                name = a.substring(1, 2);
                if (!LONG.containsValue(name)) {
                    throw new IllegalArgumentException(a + ": not a flag the kernel's capture is known to follow");
                }
                String rest = a.substring(2);
                value = rest.isEmpty() ? null : rest.startsWith("=") ? rest.substring(1) : rest;
            } else {
                throw new IllegalArgumentException("'" + a + "' where a flag was expected");
            }
            if (value == null) {
                if (i + 1 >= args.size()) {
                    throw new IllegalArgumentException(a + " has no value");
                }
                value = args.get(++i);
            }
            flags.put(name, value == null ? "" : value.strip());
        }
        String mode = flags.getOrDefault("m", "REDIRECT");
        if (!mode.equals("REDIRECT")) {
            throw new IllegalArgumentException("-m " + mode + ": only REDIRECT is followed");
        }
        if (!"*".equals(flags.get("i"))) {
            throw new IllegalArgumentException("-i " + describe(flags.get("i"))
                    + ": the NAT captures connects to some addresses only, the kernel captures them all");
        }
        if (!"*".equals(flags.get("b"))) {
            throw new IllegalArgumentException("-b " + describe(flags.get("b"))
                    + ": the NAT captures connections to some ports only, the kernel to them all");
        }
        for (String f : List.of("x", "q", "k")) {
            if (!flags.getOrDefault(f, "").isEmpty()) {
                throw new IllegalArgumentException("-" + f + " " + flags.get(f)
                        + ": the NAT leaves connects alone or catches them in a way the kernel's capture does not follow");
            }
        }
        int uid = number(flags, "u", 1337);
        List<Integer> inboundSkip = new ArrayList<>(List.of(number(flags, "e", 15008)));
        ports(flags, "d").stream().filter(x -> !inboundSkip.contains(x)).forEach(inboundSkip::add);
        return new PodNat(uid, number(flags, "g", uid), number(flags, "p", 15001), number(flags, "z", 15006),
                ports(flags, "o"), inboundSkip);
    }

    /**
     * The NAT linkerd-init (linkerd2-proxy-init) writes with flags {@code args}: the proxy's
     * ports ({@code --incoming-proxy-port}, {@code --outgoing-proxy-port}) and uid must be given,
     * as Linkerd's injector gives them; the ports it leaves out are those of
     * {@code --inbound-ports-to-ignore} and {@code --outbound-ports-to-ignore} (ports, or ranges
     * {@code A-B}, a flag given twice adding to the list). {@code --ports-to-redirect} (some
     * inbound ports only), {@code --subnets-to-ignore}, {@code --simulate} (no rules) and
     * {@code --netns} (another namespace's rules) are refused.
     *
     * @throws IllegalArgumentException naming the flag the kernel's capture does not follow
     */
    static PodNat ofLinkerdInit(List<String> args) {
        Map<String, String> flags = new java.util.HashMap<>();
        Map<String, String> shortNames = Map.of("p", "incoming-proxy-port", "o", "outgoing-proxy-port", "u",
                "proxy-uid", "r", "ports-to-redirect", "w", "use-wait-flag");
        for (int i = 0; i < args.size(); i++) {
            String a = args.get(i);
            if (a == null || !a.startsWith("-") || a.equals("-") || a.equals("--")) {
                throw new IllegalArgumentException("'" + a + "' where a flag was expected");
            }
            String body = a.startsWith("--") ? a.substring(2) : a.substring(1);
            int eq = body.indexOf('=');
            String name = eq < 0 ? body : body.substring(0, eq);
            String value = eq < 0 ? null : body.substring(eq + 1);
            if (!a.startsWith("--")) {
                if (name.length() > 1 && value == null) { // -p4143
                    value = name.substring(1);
                    name = name.substring(0, 1);
                }
                name = shortNames.getOrDefault(name, "-" + name);
            }
            switch (name) {
                case "use-wait-flag" -> {
                    continue;
                }
                case "simulate" -> {
                    if (value == null || !value.equals("false")) {
                        throw new IllegalArgumentException(a + ": it writes no rules");
                    }
                    continue;
                }
                case "incoming-proxy-port", "outgoing-proxy-port", "proxy-uid", "ports-to-redirect",
                        "inbound-ports-to-ignore", "outbound-ports-to-ignore", "subnets-to-ignore", "netns" -> {
                    // below
                }
                default -> {
                    if (!LINKERD_HARMLESS_VALUES.contains(name)) {
                        throw new IllegalArgumentException(a + ": not a flag the kernel's capture is known to follow");
                    }
                }
            }
            if (value == null) {
                if (i + 1 >= args.size()) {
                    throw new IllegalArgumentException(a + " has no value");
                }
                value = args.get(++i);
            }
            value = value == null ? "" : value.strip();
            // A list flag given twice adds to its list, as linkerd-init reads it.
            flags.merge(name, value, (x, y) -> x.isEmpty() ? y : y.isEmpty() ? x : x + "," + y);
        }
        for (String f : List.of("ports-to-redirect", "subnets-to-ignore", "netns")) {
            if (!flags.getOrDefault(f, "").isEmpty()) {
                throw new IllegalArgumentException("--" + f + " " + flags.get(f)
                        + ": the NAT captures otherwise than the kernel's capture follows");
            }
        }
        for (String f : List.of("incoming-proxy-port", "outgoing-proxy-port", "proxy-uid")) {
            if (!flags.containsKey(f)) {
                throw new IllegalArgumentException("--" + f + " is not given");
            }
        }
        int uid = linkerdNumber(flags, "proxy-uid");
        if (uid <= 0) {
            // linkerd-init then writes no rule leaving the proxy's connects alone.
            throw new IllegalArgumentException("--proxy-uid " + uid + ": no uid is left alone");
        }
        return new PodNat(uid, -1, linkerdNumber(flags, "outgoing-proxy-port"), linkerdNumber(flags, "incoming-proxy-port"),
                portsAndRanges(flags, "outbound-ports-to-ignore"), portsAndRanges(flags, "inbound-ports-to-ignore"));
    }

    private static int linkerdNumber(Map<String, String> flags, String f) {
        try {
            return Integer.parseInt(flags.get(f));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("--" + f + " " + flags.get(f) + " is not a number");
        }
    }

    /** The ports of a list of ports and ranges {@code A-B}: each port of a range, as many as the kernel's entry holds. */
    private static List<Integer> portsAndRanges(Map<String, String> flags, String f) {
        List<Integer> out = new ArrayList<>();
        for (String part : flags.getOrDefault(f, "").split(",")) {
            if (part.isBlank()) {
                continue;
            }
            String[] bounds = part.strip().split("-", -1);
            try {
                int low = Integer.parseInt(bounds[0].strip());
                int high = bounds.length == 2 ? Integer.parseInt(bounds[1].strip()) : low;
                if (bounds.length > 2 || high < low) {
                    throw new NumberFormatException();
                }
                if (high - low >= MeshMap.SKIP_PORTS) {
                    throw new IllegalArgumentException("--" + f + " " + part.strip() + ": more ports than the kernel's "
                            + "entry holds (" + MeshMap.SKIP_PORTS + ")");
                }
                for (int port = low; port <= high; port++) {
                    if (!out.contains(port)) {
                        out.add(port);
                    }
                }
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("--" + f + " " + flags.get(f) + " is not a list of ports and ranges");
            }
        }
        return out;
    }

    private static String describe(String v) {
        return v == null ? "not given" : v.isEmpty() ? "\"\"" : v;
    }

    private static int number(Map<String, String> flags, String f, int absent) {
        String v = flags.get(f);
        if (v == null) {
            return absent;
        }
        try {
            int n = Integer.parseInt(v);
            if (n < 0) {
                throw new NumberFormatException();
            }
            return n;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("-" + f + " " + v + " is not a number");
        }
    }

    /** The ports of a comma-separated flag; none when absent or empty. */
    private static List<Integer> ports(Map<String, String> flags, String f) {
        List<Integer> out = new ArrayList<>();
        for (String part : flags.getOrDefault(f, "").split(",")) {
            if (part.isBlank()) {
                continue;
            }
            try {
                int port = Integer.parseInt(part.strip());
                if (!out.contains(port)) {
                    out.add(port);
                }
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("-" + f + " " + flags.get(f) + " is not a list of ports");
            }
        }
        return out;
    }
}
