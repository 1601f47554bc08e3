package io.github.sockmap4j.examples;

import io.github.sockmap4j.xdp.XdpFilter;
import io.github.sockmap4j.xdp.XdpRules;
import java.io.IOException;
import java.nio.file.Path;
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

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: XdpWatch INTERFACE RULES-FILE [SECONDS]");
            System.exit(2);
        }
        int seconds = args.length > 2 ? Integer.parseInt(args[2]) : Integer.MAX_VALUE;
        try {
            XdpRules rules = XdpRules.parse(Path.of(args[1]));
            try (XdpFilter f = XdpFilter.attach(args[0], rules.defaultAction())) {
                watch(f, rules.applyTo(f), seconds, rules.defaultAction());
            }
        } catch (IOException e) {
            System.err.println("xdp: " + e.getMessage());
            System.exit(1);
        }
    }

    /** Prints the filter's counters every second for {@code seconds}. */
    static void watch(XdpFilter f, List<String> names, int seconds, XdpFilter.Action def) throws InterruptedException {
        {
            System.out.printf("XDP filter on %s (%s mode), default %s, %d rules%n", f.interfaceName(), f.mode(), def,
                    names.size());
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
        }
    }
}
