package io.github.sockmap4j.xdp;

import io.github.sockmap4j.internal.ffi.Errno;
import io.github.sockmap4j.internal.ffi.LibC;
import io.github.sockmap4j.internal.ffi.Libbpf;
import io.github.sockmap4j.internal.ffi.NativeIOException;
import io.github.sockmap4j.internal.sys.Capabilities;
import java.io.IOException;
import java.io.InputStream;
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
    public enum Action { PASS, DROP }

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
    private static final int MAX_RULES = 1024;
    private static final int CTR_PASSED = MAX_RULES;

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
    private int linkFd;

    private XdpFilter(Libbpf bpf, MemorySegment obj, String ifname, Mode mode, int linkFd) throws IOException {
        this.bpf = bpf;
        this.obj = obj;
        this.ifname = ifname;
        this.mode = mode;
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
        int ifindex = LibC.ifNameToIndex(ifname);
        if (ifindex == 0) {
            throw new IOException("no interface '" + ifname + "' in this network namespace ('ip link' lists them)");
        }
        Libbpf bpf;
        try {
            bpf = Libbpf.load();
        } catch (UnsatisfiedLinkError e) {
            throw new IOException(e.getMessage(), e);
        }
        byte[] elf;
        try (InputStream in = XdpFilter.class.getResourceAsStream("xdp_filter.bpf.o")) {
            if (in == null) {
                throw new IOException("the XDP object is missing from the sockmap4j-core jar (a broken build)");
            }
            elf = in.readAllBytes();
        }
        MemorySegment obj;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment buf = arena.allocate(elf.length, 8);
            MemorySegment.copy(elf, 0, buf, ValueLayout.JAVA_BYTE, 0, elf.length);
            obj = bpf.openObject(buf);
        }
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
                throw new NativeIOException("attach XDP", -link, ifname
                        + " already has an XDP program; sockmap4j does not replace it (detach it first: "
                        + "ip link set dev " + ifname + " xdp off)");
            }
            if (link < 0) {
                throw new NativeIOException("attach XDP", -link, ifname);
            }
            XdpFilter f = new XdpFilter(bpf, obj, ifname, mode, link);
            f.setDefaultAction(defaultAction);
            return f;
        } catch (IOException | RuntimeException e) {
            bpf.closeObject(obj);
            throw e;
        }
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
            MemorySegment val = arena.allocate(8, 4);
            val.set(ValueLayout.JAVA_INT, 0, action.ordinal());
            check("xdpf_config", bpf.tryMapUpdate(configFd, key, val, Libbpf.BPF_ANY));
        }
    }

    private static void check(String map, int r) throws NativeIOException {
        if (r < 0) {
            throw new NativeIOException("bpf_map_update_elem(" + map + ")", -r,
                    -r == Errno.E2BIG || -r == Errno.ENOSPC ? "at most " + MAX_RULES + " rules" : "");
        }
    }

    private static byte[] sourceKey(InetAddress network, int prefixBits) {
        int max = network instanceof Inet4Address ? 32 : 128;
        if (prefixBits < 0 || prefixBits > max) {
            throw new IllegalArgumentException("prefix must be 0.." + max + " for " + network + ": prefixBits="
                    + prefixBits);
        }
        byte[] raw = network.getAddress();
        byte[] a = new byte[16];
        int bits = prefixBits;
        if (raw.length == 4) {
            a[10] = (byte) 0xff;
            a[11] = (byte) 0xff;
            System.arraycopy(raw, 0, a, 12, 4);
            bits += 96;
        } else {
            System.arraycopy(raw, 0, a, 0, 16);
        }
        for (int i = 0; i < 16; i++) {
            int keep = Math.max(0, Math.min(8, bits - i * 8));
            a[i] &= (byte) (keep == 0 ? 0 : (0xff << (8 - keep)));
        }
        byte[] key = new byte[20];
        key[0] = (byte) bits;
        key[1] = (byte) (bits >>> 8);
        System.arraycopy(a, 0, key, 4, 16);
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
        update(srcFd, "xdpf_src", sourceKey(network, prefixBits), name, action);
        return name;
    }

    public synchronized void removeSourceRule(InetAddress network, int prefixBits) throws IOException {
        remove(srcFd, sourceKey(network, prefixBits), sourceName(network, prefixBits));
    }

    private static byte[] portKey(int port, Protocol proto) {
        if (port < 0 || port > 65535) {
            throw new IllegalArgumentException("port must be 0..65535: port=" + port);
        }
        return new byte[] {(byte) port, (byte) (port >>> 8), (byte) proto.number, 0};
    }

    /** Adds (or replaces) a rule for packets to a TCP or UDP port; returns its name. */
    public synchronized String addPortRule(int port, Protocol proto, Action action) throws IOException {
        String name = portName(port, proto);
        update(portFd, "xdpf_port", portKey(port, proto), name, action);
        return name;
    }

    public synchronized void removePortRule(int port, Protocol proto) throws IOException {
        remove(portFd, portKey(port, proto), portName(port, proto));
    }

    private void update(int fd, String map, byte[] key, String name, Action action) throws IOException {
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
            MemorySegment val = arena.allocate(8, 4);
            val.set(ValueLayout.JAVA_INT, 0, action.ordinal());
            val.set(ValueLayout.JAVA_INT, 4, id);
            check(map, bpf.tryMapUpdate(fd, arena.allocateFrom(ValueLayout.JAVA_BYTE, key), val, Libbpf.BPF_ANY));
        }
        if (fresh) {
            ids.set(id);
            ruleIds.put(name, id);
        }
    }

    private void remove(int fd, byte[] key, String name) throws IOException {
        ensureOpen();
        try (Arena arena = Arena.ofConfined()) {
            int r = bpf.tryMapDelete(fd, arena.allocateFrom(ValueLayout.JAVA_BYTE, key));
            if (r < 0 && -r != Errno.ENOENT) {
                throw new NativeIOException("bpf_map_delete_elem", -r, name);
            }
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
        return id == null || linkFd < 0 ? 0 : counter(id);
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
        if (linkFd < 0) {
            return new Counters(0, 0, 0, 0);
        }
        return new Counters(counter(CTR_PASSED), counter(CTR_PASSED + 1), counter(CTR_PASSED + 2),
                counter(CTR_PASSED + 3));
    }

    private void ensureOpen() throws IOException {
        if (linkFd < 0) {
            throw new IOException("the XDP filter on " + ifname + " is detached");
        }
    }

    /** Detaches the filter (closing its link) and frees the program and maps. */
    @Override
    public synchronized void close() {
        if (linkFd >= 0) {
            LibC.close(linkFd);
            linkFd = -1;
            bpf.closeObject(obj);
        }
    }

    @Override
    public String toString() {
        return "XdpFilter[" + ifname + ", " + mode + (linkFd < 0 ? ", detached" : "") + "]";
    }
}
