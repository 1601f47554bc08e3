package io.github.sockmap4j.xdp;

import io.github.sockmap4j.linux.bpf.SockKeyLayout;
import io.github.sockmap4j.linux.bpf.XdpLayout;
import io.github.sockmap4j.linux.ffi.Errno;
import io.github.sockmap4j.linux.ffi.LibC;
import io.github.sockmap4j.linux.ffi.Libbpf;
import io.github.sockmap4j.linux.ffi.NativeIOException;
import io.github.sockmap4j.linux.ffi.SysCalls;
import io.github.sockmap4j.linux.sys.Capabilities;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.util.BitSet;
import java.util.HashMap;
import java.util.Map;

/**
 * An XDP ingress filter on one interface, driven from Java: packets are dropped or passed in
 * the driver by source CIDR (longest prefix wins) and then by TCP/UDP destination port, else by
 * the default action; rules change while it runs; every decision is counted.
 *
 * <p>The program is attached through a BPF link held by this object: {@link #close()} detaches
 * it, and so does the end of the process, whatever ends it. An interface that already has an
 * XDP program keeps it: attaching then fails instead of replacing it.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
public final class XdpFilter implements AutoCloseable {
    /** What a rule, or the default, does with a packet. */
    public enum Action {
        PASS(XdpLayout.XDPF_PASS), DROP(XdpLayout.XDPF_DROP);

        /** Its value in the kernel's maps ({@code enum xdpf_action}), whatever the enum's order. */
        final int wire;

        Action(int wire) {
            this.wire = wire;
        }
    }

    /** The mode the program runs in. */
    public enum Mode {
        /** In the driver, before an skb is allocated. */
        NATIVE,
        /** After the skb is allocated (drivers without XDP support). */
        GENERIC
    }

    /** A transport protocol of a port rule. */
    public enum Protocol {
        TCP(6), UDP(17);

        final int number;

        Protocol(int number) {
            this.number = number;
        }
    }

    private static final int XDP_FLAGS_SKB_MODE = 1 << 1;
    private static final int XDP_FLAGS_DRV_MODE = 1 << 2;
    private static final int MAX_RULES = XdpLayout.MAX_RULES;

    private final Libbpf bpf;
    private final MemorySegment obj;
    private final String ifname;
    private final Mode mode;
    private final int srcFd;
    private final int portFd;
    private final int configFd;
    private final int countersFd;
    private final int possibleCpus;
    private final BitSet ids = new BitSet(MAX_RULES);
    private final Map<String, Integer> ruleIds = new HashMap<>();
    /** The program, for {@link #run}. */
    private final int progFd;
    /** The link that attaches it; -1 for a filter that only runs frames given to it ({@link #unattached}). */
    private int linkFd;
    private boolean open = true;

    private XdpFilter(Libbpf bpf, MemorySegment obj, String ifname, Mode mode, int progFd, int linkFd)
            throws IOException {
        this.bpf = bpf;
        this.obj = obj;
        this.ifname = ifname;
        this.mode = mode;
        this.progFd = progFd;
        this.linkFd = linkFd;
        this.srcFd = bpf.mapFd(bpf.findMap(obj, "xdpf_src"));
        this.portFd = bpf.mapFd(bpf.findMap(obj, "xdpf_port"));
        this.configFd = bpf.mapFd(bpf.findMap(obj, "xdpf_config"));
        this.countersFd = bpf.mapFd(bpf.findMap(obj, "xdpf_counters"));
        this.possibleCpus = bpf.possibleCpus();
    }

    /**
     * Loads the filter and attaches it to {@code ifname} in this process's network namespace,
     * natively where the driver can, else generically.
     *
     * @throws IOException naming what to do: an unknown interface, missing privileges, an
     *                     interface that already has an XDP program
     */
    public static XdpFilter attach(String ifname, Action defaultAction) throws IOException {
        Capabilities caps = Capabilities.current();
        if (!caps.canBpf() || !caps.has(Capabilities.CAP_NET_ADMIN)) {
            throw new IOException("attaching XDP needs CAP_BPF (or CAP_SYS_ADMIN) and CAP_NET_ADMIN: run as root or "
                    + "grant them");
        }
        int ifindex = SysCalls.ifNameToIndex(ifname);
        if (ifindex == 0) {
            throw new IOException("no interface '" + ifname + "' in this network namespace ('ip link' lists them)");
        }
        Libbpf bpf = Libbpf.loadOrThrow();
        MemorySegment obj = open(bpf);
        try {
            bpf.loadObject(obj);
            int prog = bpf.programFd(bpf.findProgram(obj, "xdpf_filter"));
            Mode mode = Mode.NATIVE;
            int link = bpf.tryLinkCreate(prog, ifindex, Libbpf.BPF_XDP, XDP_FLAGS_DRV_MODE);
            if (link == -Errno.EOPNOTSUPP || link == -Errno.EINVAL) {
                mode = Mode.GENERIC;
                link = bpf.tryLinkCreate(prog, ifindex, Libbpf.BPF_XDP, XDP_FLAGS_SKB_MODE);
            }
            if (link == -Errno.EBUSY || link == -Errno.EEXIST) {
                throw Errno.error("attach XDP", link, ifname
                        + " already has an XDP program; sockmap4j does not replace it (detach it first: "
                        + "ip link set dev " + ifname + " xdp off)");
            }
            if (link < 0) {
                throw Errno.error("attach XDP", link, ifname);
            }
            XdpFilter f = new XdpFilter(bpf, obj, ifname, mode, prog, link);
            f.setDefaultAction(defaultAction);
            return f;
        } catch (IOException | RuntimeException e) {
            bpf.closeObject(obj);
            throw e;
        }
    }

    /** The embedded object, opened (not loaded). */
    private static MemorySegment open(Libbpf bpf) throws IOException {
        byte[] elf = XdpLayout.embeddedObject();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment buf = arena.allocate(elf.length, 8);
            MemorySegment.copy(elf, 0, buf, ValueLayout.JAVA_BYTE, 0, elf.length);
            return bpf.openObject(buf);
        }
    }

    /**
     * The filter loaded and attached nowhere: it decides only the frames given to {@link #run}
     * (the kernel's {@code BPF_PROG_TEST_RUN}), with the same rules and counters. For tests of the
     * program itself; needs CAP_BPF.
     */
    static XdpFilter unattached(Action defaultAction) throws IOException {
        Libbpf bpf = Libbpf.loadOrThrow();
        MemorySegment obj = open(bpf);
        try {
            bpf.loadObject(obj);
            int prog = bpf.programFd(bpf.findProgram(obj, "xdpf_filter"));
            XdpFilter f = new XdpFilter(bpf, obj, null, Mode.GENERIC, prog, -1);
            f.setDefaultAction(defaultAction);
            return f;
        } catch (IOException | RuntimeException e) {
            bpf.closeObject(obj);
            throw e;
        }
    }

    /** The XDP action ({@code XDP_DROP} 1, {@code XDP_PASS} 2) the program returns for {@code frame}, run once. */
    synchronized int run(byte[] frame) throws IOException {
        ensureOpen();
        return bpf.progTestRun(progFd, frame);
    }

    public String interfaceName() {
        return ifname;
    }

    public Mode mode() {
        return mode;
    }

    public synchronized void setDefaultAction(Action action) throws IOException {
        ensureOpen();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment key = arena.allocate(ValueLayout.JAVA_INT);
            MemorySegment val = arena.allocate(XdpLayout.CONFIG);
            XdpLayout.fillConfig(val, action.wire);
            check("xdpf_config", bpf.tryMapUpdate(configFd, key, val, Libbpf.BPF_ANY));
        }
    }

    private static void check(String map, int r) throws NativeIOException {
        if (r < 0) {
            throw Errno.error("bpf_map_update_elem(" + map + ")", r,
                    -r == Errno.E2BIG || -r == Errno.ENOSPC ? "at most " + MAX_RULES + " rules" : "");
        }
    }

    /** The LPM key of a source rule (the prefix over the 16-byte, v4-mapped address). */
    private static MemorySegment sourceKey(Arena arena, InetAddress network, int prefixBits) {
        int max = network instanceof Inet4Address ? 32 : 128;
        if (prefixBits < 0 || prefixBits > max) {
            throw new IllegalArgumentException("prefix must be 0.." + max + " for " + network + ": prefixBits="
                    + prefixBits);
        }
        MemorySegment key = arena.allocate(XdpLayout.SRC_KEY);
        XdpLayout.fillSourceKey(key, SockKeyLayout.mapped(network), max == 32 ? 96 + prefixBits : prefixBits);
        return key;
    }

    private static String sourceName(InetAddress network, int bits) {
        return "src " + network.getHostAddress() + "/" + bits;
    }

    private static String portName(int port, Protocol proto) {
        return proto.name().toLowerCase(java.util.Locale.ROOT) + " " + port;
    }

    /** Adds (or replaces) a rule for packets from {@code network/prefixBits}; returns its name. */
    public synchronized String addSourceRule(InetAddress network, int prefixBits, Action action) throws IOException {
        String name = sourceName(network, prefixBits);
        try (Arena arena = Arena.ofConfined()) {
            update(srcFd, "xdpf_src", sourceKey(arena, network, prefixBits), name, action);
        }
        return name;
    }

    public synchronized void removeSourceRule(InetAddress network, int prefixBits) throws IOException {
        try (Arena arena = Arena.ofConfined()) {
            remove(srcFd, sourceKey(arena, network, prefixBits), sourceName(network, prefixBits));
        }
    }

    private static MemorySegment portKey(Arena arena, int port, Protocol proto) {
        if (port < 0 || port > 65535) {
            throw new IllegalArgumentException("port must be 0..65535: port=" + port);
        }
        MemorySegment key = arena.allocate(XdpLayout.PORT_KEY);
        XdpLayout.fillPortKey(key, port, proto.number);
        return key;
    }

    /** Adds (or replaces) a rule for packets to a TCP or UDP port; returns its name. */
    public synchronized String addPortRule(int port, Protocol proto, Action action) throws IOException {
        String name = portName(port, proto);
        try (Arena arena = Arena.ofConfined()) {
            update(portFd, "xdpf_port", portKey(arena, port, proto), name, action);
        }
        return name;
    }

    public synchronized void removePortRule(int port, Protocol proto) throws IOException {
        try (Arena arena = Arena.ofConfined()) {
            remove(portFd, portKey(arena, port, proto), portName(port, proto));
        }
    }

    private void update(int mapFd, String map, MemorySegment key, String name, Action action) throws IOException {
        ensureOpen();
        Integer id = ruleIds.get(name);
        boolean fresh = id == null;
        if (fresh) {
            id = ids.nextClearBit(0);
            if (id >= MAX_RULES) {
                throw new IOException("at most " + MAX_RULES + " rules: remove one before adding " + name);
            }
            resetCounter(id);
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment val = arena.allocate(XdpLayout.RULE);
            XdpLayout.fillRule(val, action.wire, id);
            check(map, bpf.tryMapUpdate(mapFd, key, val, Libbpf.BPF_ANY));
        }
        if (fresh) {
            ids.set(id);
            ruleIds.put(name, id);
        }
    }

    private void remove(int mapFd, MemorySegment key, String name) throws IOException {
        ensureOpen();
        int r = bpf.tryMapDelete(mapFd, key);
        if (r < 0 && -r != Errno.ENOENT) {
            throw Errno.error("bpf_map_delete_elem", r, name);
        }
        Integer id = ruleIds.remove(name);
        if (id != null) {
            ids.clear(id);
        }
    }

    private void resetCounter(int idx) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment key = arena.allocateFrom(ValueLayout.JAVA_INT, idx);
            MemorySegment val = arena.allocate(8L * possibleCpus, 8);
            bpf.tryMapUpdate(countersFd, key, val, Libbpf.BPF_ANY);
        }
    }

    private long counter(int idx) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment key = arena.allocateFrom(ValueLayout.JAVA_INT, idx);
            MemorySegment val = arena.allocate(8L * possibleCpus, 8);
            if (bpf.tryMapLookup(countersFd, key, val) != 0) {
                return 0;
            }
            long sum = 0;
            for (int cpu = 0; cpu < possibleCpus; cpu++) {
                sum += val.getAtIndex(ValueLayout.JAVA_LONG, cpu);
            }
            return sum;
        }
    }

    /** Packets a rule (by the name its add method returned) has decided; 0 for an unknown rule. */
    public synchronized long ruleHits(String rule) {
        Integer id = ruleIds.get(rule);
        return id == null || !open ? 0 : counter(id);
    }

    /**
     * What the filter has decided so far, summed over CPUs.
     *
     * @param passed    packets passed to the stack
     * @param dropped   packets dropped
     * @param malformed truncated or unparsable packets (passed to the stack)
     * @param defaulted packets no rule matched
     */
    public record Counters(long passed, long dropped, long malformed, long defaulted) {
    }

    public synchronized Counters counters() {
        if (!open) {
            return new Counters(0, 0, 0, 0);
        }
        return new Counters(counter(XdpLayout.CTR_PASSED), counter(XdpLayout.CTR_DROPPED),
                counter(XdpLayout.CTR_MALFORMED), counter(XdpLayout.CTR_DEFAULT));
    }

    private void ensureOpen() throws IOException {
        if (!open) {
            throw new IOException("the XDP filter on " + ifname + " is detached");
        }
    }

    /** Detaches the filter (closing its link) and frees the program and maps. */
    @Override
    public synchronized void close() {
        if (open) {
            open = false;
            if (linkFd >= 0) {
                LibC.close(linkFd);
                linkFd = -1;
            }
            bpf.closeObject(obj);
        }
    }

    @Override
    public String toString() {
        return "XdpFilter[" + (ifname == null ? "attached nowhere" : ifname + ", " + mode) + (open ? "" : ", detached")
                + "]";
    }
}
