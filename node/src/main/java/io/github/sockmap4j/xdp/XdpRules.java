package io.github.sockmap4j.xdp;

import io.github.sockmap4j.linux.net.Cidr;
import java.io.IOException;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Filter rules from a small text file, one a line ({@code #} starts a comment):
 *
 * <pre>
 * default pass            # or drop: what no rule matches gets
 * deny 10.99.0.0/16       # by source CIDR, IPv4 or IPv6
 * allow fd00::/8
 * deny tcp 22             # by destination port
 * allow udp 53
 * </pre>
 *
 * @param defaultAction what packets no rule matches get
 * @param rules         the rules, in file order
 */
public record XdpRules(XdpFilter.Action defaultAction, List<Rule> rules) {
    /** One rule: a source CIDR ({@code network} non-null) or a protocol and port. */
    public record Rule(XdpFilter.Action action, InetAddress network, int bits, XdpFilter.Protocol protocol,
                       int port) {
    }

    /** Reads a rules file; the message of a bad line names the file, the line and what is expected. */
    public static XdpRules parse(Path file) throws IOException {
        XdpFilter.Action def = XdpFilter.Action.PASS;
        List<Rule> rules = new ArrayList<>();
        int n = 0;
        for (String raw : Files.readAllLines(file)) {
            n++;
            String line = raw.replaceAll("#.*", "").trim();
            if (line.isEmpty()) {
                continue;
            }
            String[] w = line.split("\\s+");
            String where = file + ":" + n + ": " + raw.trim();
            try {
                if (w[0].equals("default") && w.length == 2) {
                    def = action(w[1], where);
                } else if (w.length == 2 && w[1].contains("/")) {
                    Cidr cidr = Cidr.parse(w[1]);
                    rules.add(new Rule(action(w[0], where), cidr.network(), cidr.prefixBits(), null, 0));
                } else if (w.length == 3 && (w[1].equals("tcp") || w[1].equals("udp"))) {
                    rules.add(new Rule(action(w[0], where), null, 0,
                            XdpFilter.Protocol.valueOf(w[1].toUpperCase(Locale.ROOT)), Integer.parseInt(w[2])));
                } else {
                    throw new IOException("cannot read the rule at " + where);
                }
            } catch (NumberFormatException e) {
                throw new IOException("not a number in the rule at " + where, e);
            } catch (IllegalArgumentException e) {
                throw new IOException("cannot read the rule at " + where + ": " + e.getMessage(), e);
            }
        }
        return new XdpRules(def, List.copyOf(rules));
    }

    private static XdpFilter.Action action(String word, String where) throws IOException {
        return switch (word) {
            case "allow", "pass" -> XdpFilter.Action.PASS;
            case "deny", "drop" -> XdpFilter.Action.DROP;
            default -> throw new IOException("not allow/deny/pass/drop: '" + word + "' at " + where
                    + " (expected 'default pass|drop', 'allow|deny CIDR' or 'allow|deny tcp|udp PORT')");
        };
    }

    /** Adds every rule to a filter; returns the rules' names, in order. */
    public List<String> applyTo(XdpFilter f) throws IOException {
        List<String> names = new ArrayList<>();
        for (Rule r : rules) {
            names.add(r.network() != null ? f.addSourceRule(r.network(), r.bits(), r.action())
                    : f.addPortRule(r.port(), r.protocol(), r.action()));
        }
        return names;
    }
}
