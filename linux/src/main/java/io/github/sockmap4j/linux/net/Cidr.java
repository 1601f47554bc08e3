package io.github.sockmap4j.linux.net;

import java.net.InetAddress;

/**
 * A network written as {@code ADDRESS} or {@code ADDRESS/PREFIX}, parsed without name resolution:
 * the address is a literal ({@link InetAddress#ofLiteral}) or the text is refused. A name in a rule
 * would be resolved through whatever the host's resolver says at that moment (a hosts file, DNS),
 * so a rule meant for one network could land on another.
 *
 * @param network    the address
 * @param prefixBits how many leading bits of it the network fixes (the address's full length when
 *                   no prefix is written)
 */
public record Cidr(InetAddress network, int prefixBits) {
    public Cidr {
        int max = network.getAddress().length * 8;
        if (prefixBits < 0 || prefixBits > max) {
            throw new IllegalArgumentException("prefix must be 0.." + max + " for " + network.getHostAddress()
                    + ": prefixBits=" + prefixBits);
        }
    }

    /**
     * Parses {@code ADDRESS[/PREFIX]}.
     *
     * @throws IllegalArgumentException saying what is wrong, quoting {@code text}
     */
    public static Cidr parse(String text) {
        int slash = text.indexOf('/');
        InetAddress a = literal(slash < 0 ? text : text.substring(0, slash));
        int max = a.getAddress().length * 8;
        if (slash < 0) {
            return new Cidr(a, max);
        }
        String p = text.substring(slash + 1);
        try {
            return new Cidr(a, Integer.parseInt(p));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("not a prefix length: '" + p + "' in '" + text + "'");
        }
    }

    /**
     * {@code address} as a literal {@link #literal} reads back: without an IPv6 scope (a socket
     * bound to {@code ::1%lo} has one), which no rule or Service key holds.
     */
    public static String text(InetAddress address) {
        if (address instanceof java.net.Inet6Address v6 && (v6.getScopeId() != 0 || v6.getScopedInterface() != null)) {
            try {
                return InetAddress.getByAddress(v6.getAddress()).getHostAddress();
            } catch (java.net.UnknownHostException e) {
                throw new IllegalStateException("16 bytes are an address", e);
            }
        }
        return address.getHostAddress();
    }

    /**
     * An IPv4 or IPv6 address literal; never a name, and never an IPv6 scope ({@code %eth0} or
     * {@code %2}): the kernel's rule and Service keys have no interface, and a scope naming an
     * interface would read at one moment and not after that interface goes (a rule written with
     * one could not be read back).
     *
     * @throws IllegalArgumentException when {@code text} is not one
     */
    public static InetAddress literal(String text) {
        int scope = text == null ? -1 : text.indexOf('%');
        if (scope >= 0) {
            throw new IllegalArgumentException("a scoped address: '" + text + "' (rules and Services have no "
                    + "interface scope: write '" + text.substring(0, scope) + "')");
        }
        try {
            return InetAddress.ofLiteral(text);
        } catch (IllegalArgumentException | NullPointerException e) {
            throw new IllegalArgumentException("not an address literal: '" + text + "' (names are never resolved "
                    + "here: write the address)");
        }
    }
}
