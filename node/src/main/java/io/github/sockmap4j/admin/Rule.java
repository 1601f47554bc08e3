package io.github.sockmap4j.admin;

import io.github.sockmap4j.linux.bpf.PolicyRule;
import java.net.InetAddress;

/**
 * A rule of the fast path's policy, the one shape the CLI, the node agent and its owners use:
 * connections to a server on {@code port} at an address in {@code network}/{@code prefixBits}
 * (a null network and 0: any address) are redirected, with an in-flight bound of {@code bound}
 * bytes (0: each receiver's own).
 *
 * @param port       the server port, 1 to 65535
 * @param network    the server addresses' network, or null for any
 * @param prefixBits how many leading bits of {@code network} the server's address shares
 * @param bound      the in-flight bound in bytes; 0: each receiver's
 */
public record Rule(int port, InetAddress network, int prefixBits, int bound) {
    /**
     * Checked as every rule is, by the one shape the agent and the map take it in: the network
     * kept as the map keys it (its bits past the prefix zeroed; any address as null and 0).
     *
     * @throws IllegalArgumentException saying which value is out of range
     */
    public Rule {
        PolicyRule where = PolicyRule.of(port, network, prefixBits);
        PolicyRule.checkBound(bound);
        network = where.network();
        prefixBits = where.prefixBits();
    }

    /** Any address on {@code port}, each receiver's bound. */
    public static Rule port(int port) {
        return new Rule(port, null, 0, 0);
    }

    /**
     * {@code PORT} or {@code PORT/CIDR} (an address literal and its prefix: {@code 8080/10.0.0.0/8}),
     * with each receiver's bound.
     *
     * @throws IllegalArgumentException saying what is wrong with {@code text}
     */
    public static Rule parse(String text) {
        String[] p = text.split("/", 2);
        int port;
        try {
            port = Integer.parseInt(p[0]);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("not a port: '" + p[0] + "' (expected PORT or PORT/CIDR, e.g. 8080 or "
                    + "8080/10.0.0.0/8)");
        }
        if (p.length == 1) {
            return port(port);
        }
        SockmapAdmin.Network cidr;
        try {
            cidr = SockmapAdmin.Network.parse(p[1]);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(e.getMessage() + " (expected PORT or PORT/CIDR, e.g. 8080 or "
                    + "8080/10.0.0.0/8)", e);
        }
        return new Rule(port, cidr.address(), cidr.prefixBits(), 0);
    }

    /** This rule with another bound. */
    public Rule withBound(int bytes) {
        return new Rule(port, network, prefixBits, bytes);
    }

    /** {@code PORT} or {@code PORT/ADDRESS/BITS}, as {@link #parse} reads it. */
    public String target() {
        return PolicyRule.of(port, network, prefixBits).target();
    }

    @Override
    public String toString() {
        return target() + (bound == 0 ? "" : " bound " + bound);
    }
}
