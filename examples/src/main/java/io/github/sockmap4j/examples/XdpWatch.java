package io.github.sockmap4j.examples;

import io.github.sockmap4j.xdp.XdpFilter;
import java.io.IOException;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Attaches an XDP filter with rules from a small file and prints its counters every second.
 *
 * <pre>
 * XdpWatch INTERFACE RULES-FILE [SECONDS]
 *
 * # rules file: one rule a line, first match by source, then by port, else the default
 * default pass
 * deny 10.99.0.0/16
 * allow fd00::/8
 * deny tcp 22
 * allow udp 53
 * </pre>
 *
 * Stops after SECONDS (default: until interrupted), detaching the filter.
 */
public final class XdpWatch {
    private XdpWatch() {
    }

    record Rule(String line, XdpFilter.Action action, InetAddress net, int bits, XdpFilter.Protocol proto, int port) {
    }

    static XdpFilter.Action action(String word, String line) throws IOException {
        return switch (word) {
            case "allow", "pass" -> XdpFilter.Action.PASS;
            case "deny", "drop" -> XdpFilter.Action.DROP;
            default -> throw new IOException("not allow/deny/pass/drop: '" + word + "' in: " + line);
        };
    }

    static List<Rule> parse(Path file, XdpFilter.Action[] defaultAction) throws IOException {
        List<Rule> rules = new ArrayList<>();
        int n = 0;
        for (String raw : Files.readAllLines(file)) {
            n++;
            String line = raw.replaceAll("#.*", "").trim();
            if (line.isEmpty()) {
                continue;
            }
            String[] w = line.split("\\s+");
            String where = file + ":" + n + ": " + raw;
            if (w[0].equals("default") && w.length == 2) {
                defaultAction[0] = action(w[1], where);
            } else if (w.length == 2 && w[1].contains("/")) {
                String[] cidr = w[1].split("/");
                rules.add(new Rule(raw, action(w[0], where), InetAddress.getByName(cidr[0]),
                        Integer.parseInt(cidr[1]), null, 0));
            } else if (w.length == 3 && (w[1].equals("tcp") || w[1].equals("udp"))) {
                rules.add(new Rule(raw, action(w[0], where), null, 0,
                        XdpFilter.Protocol.valueOf(w[1].toUpperCase(Locale.ROOT)), Integer.parseInt(w[2])));
            } else {
                throw new IOException("cannot read the rule at " + where
                        + " (expected 'default pass|drop', 'allow|deny CIDR' or 'allow|deny tcp|udp PORT')");
            }
        }
        return rules;
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: XdpWatch INTERFACE RULES-FILE [SECONDS]");
            System.exit(2);
        }
        XdpFilter.Action[] defaultAction = {XdpFilter.Action.PASS};
        List<Rule> rules = parse(Path.of(args[1]), defaultAction);
        int seconds = args.length > 2 ? Integer.parseInt(args[2]) : Integer.MAX_VALUE;
        try (XdpFilter f = XdpFilter.attach(args[0], defaultAction[0])) {
            List<String> names = new ArrayList<>();
            for (Rule r : rules) {
                names.add(r.net() != null ? f.addSourceRule(r.net(), r.bits(), r.action())
                        : f.addPortRule(r.port(), r.proto(), r.action()));
            }
            System.out.printf("XDP filter on %s (%s mode), default %s, %d rules%n", args[0], f.mode(),
                    defaultAction[0], rules.size());
            for (int s = 1; s <= seconds; s++) {
                Thread.sleep(1000);
                XdpFilter.Counters c = f.counters();
                StringBuilder sb = new StringBuilder(String.format(Locale.ROOT,
                        "%4ds passed %d dropped %d malformed %d default %d", s, c.passed(), c.dropped(), c.malformed(),
                        c.defaulted()));
                for (String name : names) {
                    sb.append(" | ").append(name).append(": ").append(f.ruleHits(name));
                }
                System.out.println(sb);
            }
        } catch (IOException e) {
            System.err.println("xdp: " + e.getMessage());
            System.exit(1);
        }
    }
}
