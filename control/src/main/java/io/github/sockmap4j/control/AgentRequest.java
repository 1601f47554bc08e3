package io.github.sockmap4j.control;

import io.github.sockmap4j.linux.bpf.PolicyRule;
import io.github.sockmap4j.linux.bpf.ServiceMap;
import io.github.sockmap4j.linux.net.Cidr;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.stream.Collectors;

/**
 * One request to a node agent over its control socket, and its one-line text form:
 *
 * <pre>
 * ALLOW PORT NETWORK|* KEYBITS BOUND    a rule until DENY (BOUND: bytes, 0 the receiver's, -1 unbounded)
 * OPTIN PORT NETWORK|* KEYBITS BOUND    a rule for as long as this connection stays open
 * BOUND PORT NETWORK|* KEYBITS BOUND    a new bound for a rule this user made
 * DENY  PORT NETWORK|* KEYBITS          removes a rule this user made
 * LIST                                  every rule and who holds it
 * SERVICE VIP PORT all|only LOCAL REMOTE   puts a Service in the Service map (or replaces the one of
 *                                       VIP PORT that this user put): endpoints ADDRESS:PORT or
 *                                       [IPV6]:PORT, comma-separated, {@code -} for none; {@code only}:
 *                                       local endpoints only
 * UNSERVICE VIP PORT                    removes a Service this user put
 * SERVICES                              every Service and who put it
 * PING                                  is the agent there?
 * </pre>
 *
 * KEYBITS counts the bits of the policy key's 16-byte address (an IPv4 prefix of n bits is 96 + n),
 * 0 with {@code *}: a {@link PolicyRule}, checked as it is made when the line is parsed. The agent answers one line, {@code OK text} or {@code ERR text}; to LIST (and
 * SERVICES) it answers {@code OK N} and then N lines, one a rule (a Service), each up to {@link #MAX_LIST_LINE} bytes, so
 * that a list of any length arrives whole. A refusal always says why; an agent that refuses a
 * connection (too many of one user's) says so in an {@code ERR} line before it closes it.
 */
public record AgentRequest(Verb verb, PolicyRule rule, int bound, ServiceMap.Service service) {
    /**
     * How the agent's line starts when it closes a connection that held no rule and sent nothing for
     * its idle time: the client held nothing there, and may connect again.
     */
    public static final String IDLE_CLOSED = "ERR idle:";

    /** What a request asks. */
    public enum Verb { ALLOW, OPTIN, BOUND, DENY, LIST, SERVICE, UNSERVICE, SERVICES, PING }

    /**
     * The longest request line the agent accepts (a longer one is answered with ERR and the
     * connection closed): a SERVICE of 16 IPv6 endpoints fits.
     */
    public static final int MAX_LINE = 1024;
    /** The longest line of a LIST answer (a rule with many holders). */
    public static final int MAX_LIST_LINE = 1 << 20;

    /** A rule request: ALLOW, OPTIN, BOUND or DENY ({@code bound} 0 for DENY). */
    public AgentRequest(Verb verb, PolicyRule rule, int bound) {
        this(verb, rule, bound, null);
    }

    /** The rule's values were checked when it was made; here, which fields each verb carries. */
    public AgentRequest {
        switch (verb) {
            case SERVICE, UNSERVICE -> {
                if (service == null) {
                    throw new IllegalArgumentException(verb + " needs a Service");
                }
            }
            case ALLOW, OPTIN, BOUND, DENY -> {
                if (rule == null) {
                    throw new IllegalArgumentException(verb + " needs a rule");
                }
                PolicyRule.checkBound(bound);
            }
            default -> {
            }
        }
    }

    public static AgentRequest ping() {
        return new AgentRequest(Verb.PING, null, 0, null);
    }

    public static AgentRequest list() {
        return new AgentRequest(Verb.LIST, null, 0, null);
    }

    public static AgentRequest services() {
        return new AgentRequest(Verb.SERVICES, null, 0, null);
    }

    public static AgentRequest putService(ServiceMap.Service s) {
        return new AgentRequest(Verb.SERVICE, null, 0, s);
    }

    public static AgentRequest removeService(InetSocketAddress vip) {
        return new AgentRequest(Verb.UNSERVICE, null, 0, new ServiceMap.Service(vip, List.of(), List.of(), false));
    }

    /** A Service as the control socket's SERVICES lists it ("VIP local=... remote=..."). */
    public static String describe(io.github.sockmap4j.linux.bpf.ServiceMap.Service s) {
        return show(s.vip()) + " local=" + endpoints(s.local()) + " remote=" + endpoints(s.remote())
                + (s.localOnly() ? " local-only" : "");
    }

    /** {@code ADDRESS:PORT}, {@code [IPV6]:PORT}. */
    public static String show(InetSocketAddress a) {
        String h = Cidr.text(a.getAddress());
        return (h.contains(":") ? "[" + h + "]" : h) + ":" + a.getPort();
    }

    /** Endpoints as a request line has them: {@code ADDRESS:PORT,[IPV6]:PORT}, or {@code -} for none. */
    public static String endpoints(List<InetSocketAddress> l) {
        return l.isEmpty() ? "-" : l.stream().map(AgentRequest::show).collect(Collectors.joining(","));
    }

    /** The request's line, without its newline. */
    public String format() {
        if (verb == Verb.PING || verb == Verb.LIST || verb == Verb.SERVICES) {
            return verb.name();
        }
        if (verb == Verb.SERVICE || verb == Verb.UNSERVICE) {
            String head = verb + " " + Cidr.text(service.vip().getAddress()) + " " + service.vip().getPort();
            return verb == Verb.UNSERVICE ? head : head + " " + (service.localOnly() ? "only" : "all") + " "
                    + endpoints(service.local()) + " " + endpoints(service.remote());
        }
        String net = rule.network() == null ? "*" : Cidr.text(rule.network());
        return verb + " " + rule.port() + " " + net + " " + rule.keyBits() + (verb == Verb.DENY ? "" : " " + bound);
    }

    /**
     * Parses one line.
     *
     * @throws IllegalArgumentException saying what is wrong with it
     */
    public static AgentRequest parse(String line) {
        String[] f = line.trim().split(" +");
        Verb verb;
        try {
            verb = Verb.valueOf(f[0].toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("unknown request '" + f[0] + "' (ALLOW, OPTIN, BOUND, DENY, LIST, "
                    + "SERVICE, UNSERVICE, SERVICES, PING)");
        }
        if (verb == Verb.PING) {
            return ping();
        }
        if (verb == Verb.LIST) {
            return list();
        }
        if (verb == Verb.SERVICES) {
            return services();
        }
        if (verb == Verb.SERVICE || verb == Verb.UNSERVICE) {
            int fields = verb == Verb.UNSERVICE ? 3 : 6;
            if (f.length != fields) {
                throw new IllegalArgumentException(verb + " takes " + (fields - 1) + " fields: '" + line + "'");
            }
            InetSocketAddress vip = new InetSocketAddress(literal(f[1]), parsePort(f[2], line));
            if (verb == Verb.UNSERVICE) {
                return removeService(vip);
            }
            if (!f[3].equals("all") && !f[3].equals("only")) {
                throw new IllegalArgumentException("SERVICE's third field is 'all' or 'only' (local endpoints only): '"
                        + f[3] + "'");
            }
            return putService(new ServiceMap.Service(vip, endpointList(f[4], line), endpointList(f[5], line),
                    f[3].equals("only")));
        }
        int fields = verb == Verb.DENY ? 4 : 5;
        if (f.length != fields) {
            throw new IllegalArgumentException(verb + " takes " + (fields - 1) + " fields: '" + line + "'");
        }
        try {
            InetAddress net = f[2].equals("*") ? null : literal(f[2]);
            return new AgentRequest(verb, new PolicyRule(Integer.parseInt(f[1]), net, Integer.parseInt(f[3])),
                    verb == Verb.DENY ? 0 : Integer.parseInt(f[4]));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("not a number in '" + line + "'");
        }
    }

    private static int parsePort(String s, String line) {
        int port;
        try {
            port = Integer.parseInt(s);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("not a port: '" + s + "' in '" + line + "'");
        }
        return PolicyRule.anyAddress(port).port(); // checked as a rule's port is
    }

    /**
     * {@code ADDRESS:PORT,[IPV6]:PORT,...} or {@code -}: address literals only.
     *
     * @throws IllegalArgumentException saying which one is wrong
     */
    public static List<InetSocketAddress> endpointList(String s, String line) {
        List<InetSocketAddress> out = new ArrayList<>();
        if (s.equals("-")) {
            return out;
        }
        for (String e : s.split(",")) {
            out.add(endpoint(e, line));
        }
        return out;
    }

    /** {@code ADDRESS:PORT} or {@code [IPV6]:PORT}. */
    public static InetSocketAddress endpoint(String e, String line) {
        int colon = e.lastIndexOf(':');
        if (colon <= 0 || colon == e.length() - 1) {
            throw new IllegalArgumentException("'" + e + "' is not ADDRESS:PORT ([IPV6]:PORT)");
        }
        String host = e.substring(0, colon);
        if (host.startsWith("[") && host.endsWith("]")) {
            host = host.substring(1, host.length() - 1);
        } else if (host.contains(":")) {
            throw new IllegalArgumentException("'" + e + "': write an IPv6 address as [IPV6]:PORT");
        }
        return new InetSocketAddress(literal(host), parsePort(e.substring(colon + 1), line));
    }

    /** An address literal only: the agent never resolves names. */
    private static InetAddress literal(String s) {
        return Cidr.literal(s);
    }

    /** Where the agent of {@code pinDirectory} listens: in its lock directory. */
    public static Path socketPath(Path lockDirectory) {
        return lockDirectory.resolve("agent.sock");
    }
}
