package io.github.sockmap4j.testbed;

import java.io.IOException;
import java.util.List;

/** Named network namespaces ({@code ip netns}): made for a test, deleted with what is in them. */
public final class Netns {
    private Netns() {
    }

    /** A new named namespace with its loopback up. */
    public static void add(String ns) throws IOException, InterruptedException {
        Sh.run("ip", "netns", "add", ns);
        Sh.run("ip", "-n", ns, "link", "set", "lo", "up");
    }

    public static boolean exists(String ns) throws IOException, InterruptedException {
        return Sh.run("ip", "netns", "list").lines().anyMatch(l -> l.split(" ")[0].equals(ns));
    }

    /**
     * Deletes every one of {@code names} that exists (a veth end goes with its namespace, its peer
     * with it; routes and netfilter rules too), trying all before throwing the first failure.
     */
    public static void deleteAll(List<String> names) throws IOException {
        IOException first = null;
        for (String ns : names) {
            try {
                if (exists(ns)) {
                    Sh.run("ip", "netns", "delete", ns);
                }
            } catch (IOException e) {
                first = first == null ? e : first;
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                first = first == null ? new IOException("interrupted deleting " + ns, e) : first;
            }
        }
        if (first != null) {
            throw first;
        }
    }
}
