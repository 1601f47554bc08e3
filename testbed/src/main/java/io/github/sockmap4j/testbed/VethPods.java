package io.github.sockmap4j;

import static io.github.sockmap4j.ChildJvm.sh;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Two network namespaces joined by a veth pair, each end with an address of a /24: two "pods" of
 * one node. {@link #close()} deletes both namespaces (and with them the pair).
 */
public final class VethPods implements AutoCloseable {
    public final String nsA;
    public final String nsB;
    public final String addrA;
    public final String addrB;

    private VethPods(String nsA, String nsB, String addrA, String addrB) {
        this.nsA = nsA;
        this.nsB = nsB;
        this.addrA = addrA;
        this.addrB = addrB;
    }

    /** @param tag a few letters telling this test's namespaces and links apart (links: at most 15 chars) */
    public static VethPods create(String tag, String addrA, String addrB) throws IOException, InterruptedException {
        String id = Long.toString(ProcessHandle.current().pid() % 100000);
        VethPods p = new VethPods("sm4j-" + id + "-" + tag + "a", "sm4j-" + id + "-" + tag + "b", addrA, addrB);
        String va = "sm4j" + id + tag + "a";
        String vb = "sm4j" + id + tag + "b";
        sh("ip", "netns", "add", p.nsA);
        try {
            sh("ip", "netns", "add", p.nsB);
            sh("ip", "link", "add", va, "type", "veth", "peer", "name", vb);
            sh("ip", "link", "set", va, "netns", p.nsA);
            sh("ip", "link", "set", vb, "netns", p.nsB);
            sh("ip", "-n", p.nsA, "addr", "add", addrA + "/24", "dev", va);
            sh("ip", "-n", p.nsB, "addr", "add", addrB + "/24", "dev", vb);
            for (String[] nd : new String[][] {{p.nsA, va}, {p.nsB, vb}}) {
                sh("ip", "-n", nd[0], "link", "set", nd[1], "up");
                sh("ip", "-n", nd[0], "link", "set", "lo", "up");
            }
            return p;
        } catch (IOException | RuntimeException e) {
            p.close();
            throw e;
        }
    }

    /** {@code command} run inside namespace {@code ns} (ip netns exec). */
    public static List<String> in(String ns, List<String> command) {
        List<String> full = new ArrayList<>(List.of("ip", "netns", "exec", ns));
        full.addAll(command);
        return full;
    }

    /** Deletes both namespaces; a veth end goes with its namespace, and its peer with it. */
    @Override
    public void close() throws IOException {
        IOException first = null;
        for (String ns : new String[] {nsA, nsB}) {
            try {
                if (new ProcessBuilder("ip", "netns", "list").start().inputReader().lines()
                        .anyMatch(l -> l.split(" ")[0].equals(ns))) {
                    sh("ip", "netns", "delete", ns);
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
