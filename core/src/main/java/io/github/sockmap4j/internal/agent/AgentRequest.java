package io.github.sockmap4j.internal.agent;

import io.github.sockmap4j.internal.net.Cidr;
import java.net.InetAddress;
import java.nio.file.Path;
import java.util.Locale;

/**
 * One request to a node agent over its control socket, and its one-line text form:
 *
 * <pre>
 * ALLOW PORT NETWORK|* KEYBITS BOUND    a rule until DENY (BOUND: bytes, 0 the receiver's, -1 unbounded)
 * OPTIN PORT NETWORK|* KEYBITS BOUND    a rule for as long as this connection stays open
 * BOUND PORT NETWORK|* KEYBITS BOUND    a new bound for a rule this user made
 * DENY  PORT NETWORK|* KEYBITS          removes a rule this user made
 * LIST                                  every rule and who holds it
 * PING                                  is the agent there?
 * </pre>
 *
 * KEYBITS counts the bits of the policy key's 16-byte address (an IPv4 prefix of n bits is 96 + n),
 * 0 with {@code *}. The agent answers one line, {@code OK text} or {@code ERR text}; to LIST it
 * answers {@code OK N} and then N lines, one a rule, each up to {@link #MAX_LIST_LINE} bytes, so
 * that a list of any length arrives whole. A refusal always says why; an agent that refuses a
 * connection (too many of one user's) says so in an {@code ERR} line before it closes it.
 */
public record AgentRequest(Verb verb, int port, InetAddress network, int keyBits, int bound) {
    /** What a request asks. */
    public enum Verb { ALLOW, OPTIN, BOUND, DENY, LIST, PING }

    /** The longest request line the agent accepts (a longer one is answered with ERR and the connection closed). */
    public static final int MAX_LINE = 256;
    /** The longest line of a LIST answer (a rule with many holders). */
    public static final int MAX_LIST_LINE = 1 << 20;

    public AgentRequest {
        if (verb != Verb.PING && verb != Verb.LIST) {
            if (port < 1 || port > 65535) {
                throw new IllegalArgumentException("port must be 1..65535: " + port);
            }
            int max = network == null ? 0 : 128;
            if (keyBits < 0 || keyBits > max || (network != null && network.getAddress().length == 4 && keyBits < 96)) {
                throw new IllegalArgumentException("address bits must be " + (network == null ? "0 for any address"
                        : network.getAddress().length == 4 ? "96..128 for an IPv4 network" : "0..128") + ": " + keyBits);
            }
            if (bound < -1) {
                throw new IllegalArgumentException("bound must be >= 0 bytes, or -1 (unbounded): " + bound);
            }
        }
    }

    public static AgentRequest ping() {
        return new AgentRequest(Verb.PING, 0, null, 0, 0);
    }

    public static AgentRequest list() {
        return new AgentRequest(Verb.LIST, 0, null, 0, 0);
    }

    /** The request's line, without its newline. */
    public String format() {
        if (verb == Verb.PING || verb == Verb.LIST) {
            return verb.name();
        }
        String net = network == null ? "*" : network.getHostAddress();
        return verb + " " + port + " " + net + " " + keyBits + (verb == Verb.DENY ? "" : " " + bound);
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
            throw new IllegalArgumentException("unknown request '" + f[0] + "' (ALLOW, OPTIN, BOUND, DENY, LIST, PING)");
        }
        if (verb == Verb.PING) {
            return ping();
        }
        if (verb == Verb.LIST) {
            return list();
        }
        int fields = verb == Verb.DENY ? 4 : 5;
        if (f.length != fields) {
            throw new IllegalArgumentException(verb + " takes " + (fields - 1) + " fields: '" + line + "'");
        }
        try {
            InetAddress net = f[2].equals("*") ? null : literal(f[2]);
            return new AgentRequest(verb, Integer.parseInt(f[1]), net, Integer.parseInt(f[3]),
                    verb == Verb.DENY ? 0 : Integer.parseInt(f[4]));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("not a number in '" + line + "'");
        }
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
