package io.github.sockmap4j.testbed;

import static io.github.sockmap4j.testbed.Sh.run;

import java.io.IOException;
import java.util.List;

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
        try {
            Netns.add(p.nsA);
            Netns.add(p.nsB);
            run("ip", "link", "add", va, "type", "veth", "peer", "name", vb);
            run("ip", "link", "set", va, "netns", p.nsA);
            run("ip", "link", "set", vb, "netns", p.nsB);
            run("ip", "-n", p.nsA, "addr", "add", addrA + "/24", "dev", va);
            run("ip", "-n", p.nsB, "addr", "add", addrB + "/24", "dev", vb);
            run("ip", "-n", p.nsA, "link", "set", va, "up");
            run("ip", "-n", p.nsB, "link", "set", vb, "up");
            return p;
        } catch (IOException | InterruptedException | RuntimeException e) {
            p.close();
            throw e;
        }
    }

    /** {@code command} run inside namespace {@code ns}: see {@link Sh#in}. */
    public static List<String> in(String ns, List<String> command) {
        return Sh.in(ns, command);
    }

    /** Deletes both namespaces; a veth end goes with its namespace, and its peer with it. */
    @Override
    public void close() throws IOException {
        Netns.deleteAll(List.of(nsA, nsB));
    }
}
