package io.github.sockmap4j.agent.control;

import io.github.sockmap4j.linux.bpf.PolicyRule;
import io.github.sockmap4j.control.AgentRequest;
import io.github.sockmap4j.linux.net.Cidr;
import java.io.IOException;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Who may opt in what through a node agent: its policy file, one grant a line.
 *
 * <pre>
 * # who      ports             server networks        largest bound (bytes)
 * uid 1000   8080,9000-9100    10.0.0.0/8,fd00::/8    4194304
 * gid 2000   *                 *                      1048576
 * # how many rules one uid may hold at once (root: no limit)
 * quota default 256
 * quota uid 1000 4096
 * </pre>
 *
 * A request is allowed when a line names the requester's uid, or its primary or a supplementary
 * gid, covers its port, covers its network (a request for any address needs {@code *}), and its
 * bound is at most the line's (0, each receiver's own bound, is always within). Root may do
 * anything; only root may set a rule unbounded. Without a file only root may opt in. A uid other
 * than root holds at most its quota of rules ({@value #DEFAULT_QUOTA} unless a {@code quota} line
 * says otherwise): the policy map is shared by every user of the node, and one user must not fill it.
 *
 * <p><b>Note:</b> immutable, so threadsafe.
 */
public final class AgentPolicy {
    /** One line. */
    record Grant(boolean group, int id, List<int[]> ports, List<Net> networks, long maxBound, int line) {
    }

    /** A network: {@code any}, or a 16-byte v4-mapped address with the key bits that must match. */
    record Net(boolean any, byte[] addr, int keyBits) {
        boolean covers(InetAddress network, int requestBits) {
            if (any) {
                return true;
            }
            if (network == null || requestBits < keyBits) {
                return false;
            }
            byte[] a = mapped(network);
            for (int bit = 0; bit < keyBits; bit++) {
                int mask = 0x80 >>> (bit % 8);
                if ((a[bit / 8] & mask) != (addr[bit / 8] & mask)) {
                    return false;
                }
            }
            return true;
        }
    }

    /** Rules a uid may hold where the policy file sets no quota for it. */
    public static final int DEFAULT_QUOTA = 256;

    private final Path file;
    private final List<Grant> grants;
    private final int defaultQuota;
    private final Map<Integer, Integer> quotas;

    private AgentPolicy(Path file, List<Grant> grants, int defaultQuota, Map<Integer, Integer> quotas) {
        this.file = file;
        this.grants = List.copyOf(grants);
        this.defaultQuota = defaultQuota;
        this.quotas = Map.copyOf(quotas);
    }

    /** No file: root only. */
    public static AgentPolicy rootOnly() {
        return new AgentPolicy(null, List.of(), DEFAULT_QUOTA, Map.of());
    }

    /** How many rules {@code uid} may hold at once; {@link Integer#MAX_VALUE} for root. */
    public int quota(int uid) {
        return uid == 0 ? Integer.MAX_VALUE : quotas.getOrDefault(uid, defaultQuota);
    }

    /** Where the policy comes from, for messages: "the agent's policy file F", or that there is none. */
    public String source() {
        return file == null ? "the agent runs without a policy file (--policy)" : "the agent's policy file " + file;
    }

    public static AgentPolicy load(Path file) throws IOException {
        return parse(file, Files.readAllLines(file));
    }

    /**
     * @throws IllegalArgumentException naming the line and what is wrong with it
     */
    static AgentPolicy parse(Path file, List<String> lines) {
        List<Grant> grants = new ArrayList<>();
        int defaultQuota = DEFAULT_QUOTA;
        Map<Integer, Integer> quotas = new HashMap<>();
        for (int i = 0; i < lines.size(); i++) {
            String raw = lines.get(i);
            int hash = raw.indexOf('#');
            String line = (hash >= 0 ? raw.substring(0, hash) : raw).trim();
            if (line.isEmpty()) {
                continue;
            }
            boolean quota = line.startsWith("quota ") || line.equals("quota");
            try {
                if (quota) {
                    String[] f = line.split("\\s+");
                    if (f.length == 3 && f[1].equals("default")) {
                        defaultQuota = count(f[2]);
                    } else if (f.length == 4 && f[1].equals("uid")) {
                        int id = parseInt(f[2], "uid");
                        if (id < 0) {
                            throw new IllegalArgumentException("a negative id");
                        }
                        quotas.put(id, count(f[3]));
                    } else {
                        throw new IllegalArgumentException("a quota line is 'quota default N' or 'quota uid ID N'");
                    }
                } else {
                    grants.add(grant(line, i + 1));
                }
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException((file == null ? "policy" : file.toString()) + ":" + (i + 1) + ": "
                        + raw.trim() + ": " + e.getMessage() + (quota ? ""
                        : " (expected 'uid|gid ID PORTS|* NETWORKS|* MAX-BOUND', or 'quota default|uid ...')"));
            }
        }
        return new AgentPolicy(file, grants, defaultQuota, quotas);
    }

    private static Grant grant(String line, int n) {
        String[] f = line.split("\\s+");
        if (f.length != 5) {
            throw new IllegalArgumentException("5 fields, found " + f.length);
        }
        boolean group = switch (f[0]) {
            case "uid" -> false;
            case "gid" -> true;
            default -> throw new IllegalArgumentException("'" + f[0] + "' is neither uid nor gid");
        };
        int id = parseInt(f[1], "id");
        if (id < 0) {
            throw new IllegalArgumentException("a negative id");
        }
        List<int[]> ports = new ArrayList<>();
        if (!f[2].equals("*")) {
            for (String p : f[2].split(",")) {
                String[] r = p.split("-", 2);
                int lo = parseInt(r[0], "port");
                int hi = r.length == 2 ? parseInt(r[1], "port") : lo;
                if (lo < 1 || hi > 65535 || lo > hi) {
                    throw new IllegalArgumentException("ports must be 1..65535, low-high: '" + p + "'");
                }
                ports.add(new int[] {lo, hi});
            }
        }
        List<Net> nets = new ArrayList<>();
        for (String c : f[3].split(",")) {
            nets.add(net(c));
        }
        long max = parseLong(f[4], "bound");
        if (max < 0 || max > 0xfffffffeL) {
            throw new IllegalArgumentException("the largest bound is 0.." + 0xfffffffeL + " bytes (unbounded is for "
                    + "root only): '" + f[4] + "'");
        }
        return new Grant(group, id, ports, nets, max, n);
    }

    private static Net net(String c) {
        if (c.equals("*")) {
            return new Net(true, null, 0);
        }
        Cidr cidr = Cidr.parse(c);
        InetAddress a = cidr.network();
        return new Net(false, mapped(a), a.getAddress().length == 4 ? 96 + cidr.prefixBits() : cidr.prefixBits());
    }

    static byte[] mapped(InetAddress a) {
        return io.github.sockmap4j.linux.bpf.SockKeyLayout.mapped(a);
    }

    private static int count(String s) {
        int n = parseInt(s, "number of rules");
        if (n < 0) {
            throw new IllegalArgumentException("a quota is 0 or more rules: '" + s + "'");
        }
        return n;
    }

    private static int parseInt(String s, String what) {
        try {
            return Integer.parseInt(s);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("not a " + what + ": '" + s + "'");
        }
    }

    private static long parseLong(String s, String what) {
        try {
            return Long.parseLong(s);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("not a " + what + ": '" + s + "'");
        }
    }

    /**
     * Null when {@code uid} (with these groups) may make this rule, else why not and what to do.
     *
     * @param request an ALLOW, OPTIN or BOUND request
     */
    public String refusal(int uid, Set<Integer> gids, AgentRequest request) {
        if (uid == 0) {
            return null;
        }
        if (request.bound() == -1) {
            return "only root may make a rule unbounded (uid " + uid + " asked for bound -1); ask for a bound in bytes";
        }
        long bound = Integer.toUnsignedLong(request.bound());
        PolicyRule rule = request.rule();
        String where = rule.network() == null ? "any address"
                : rule.network().getHostAddress() + " (" + rule.keyBits() + " key bits)";
        boolean portAndNet = false;
        long largest = -1;
        for (Grant g : grants) {
            boolean mine = g.group() ? gids.contains(g.id()) : g.id() == uid;
            if (!mine || !coversPort(g, rule.port())) {
                continue;
            }
            if (g.networks().stream().noneMatch(n -> n.covers(rule.network(), rule.keyBits()))) {
                continue;
            }
            portAndNet = true;
            largest = Math.max(largest, g.maxBound());
            if (bound <= g.maxBound()) {
                return null;
            }
        }
        String policy = file == null ? "the agent runs without a policy file (--policy), so only root may opt in"
                : "see the agent's policy file " + file;
        if (portAndNet) {
            return "uid " + uid + " may set bounds up to " + largest + " bytes on port " + rule.port() + ", not "
                    + bound + " (" + policy + ")";
        }
        return "uid " + uid + " may not opt in port " + rule.port() + " for " + where + ": no grant for it ("
                + policy + ")";
    }

    /**
     * Null when {@code uid} (with these groups) may put this Service, else why not and what to do.
     * A Service sends other processes' connects elsewhere, so a grant must cover its VIP and
     * port as well as each endpoint's address and port (as a rule for that one address would
     * need: {@link #refusal}); root may put any.
     */
    public String serviceRefusal(int uid, Set<Integer> gids, io.github.sockmap4j.linux.bpf.ServiceMap.Service s) {
        if (uid == 0) {
            return null;
        }
        List<java.net.InetSocketAddress> all = new ArrayList<>();
        all.add(s.vip());
        all.addAll(s.local());
        all.addAll(s.remote());
        for (java.net.InetSocketAddress a : all) {
            String no = refusal(uid, gids, new AgentRequest(AgentRequest.Verb.ALLOW, new PolicyRule(a.getPort(), a.getAddress(), 128), 0));
            if (no != null) {
                return "uid " + uid + " may not put the Service " + AgentRequest.show(s.vip()) + ": "
                        + (a == s.vip() ? "its address" : "its endpoint " + AgentRequest.show(a)) + " is not in a grant "
                        + "of its (a grant must cover the Service's address and port and each endpoint's; "
                        + (file == null ? "the agent runs without a policy file (--policy), so only root may"
                        : "see the agent's policy file " + file) + ")";
            }
        }
        return null;
    }

    private static boolean coversPort(Grant g, int port) {
        if (g.ports().isEmpty()) {
            return true;
        }
        for (int[] r : g.ports()) {
            if (port >= r[0] && port <= r[1]) {
                return true;
            }
        }
        return false;
    }

    public int grants() {
        return grants.size();
    }
}
