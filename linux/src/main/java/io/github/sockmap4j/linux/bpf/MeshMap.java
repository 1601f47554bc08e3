package io.github.sockmap4j.linux.bpf;

import io.github.sockmap4j.linux.ffi.Libbpf;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * The pinned {@code sm4j_mesh} and {@code sm4j_meshaddr} maps: the meshed pods the node agent
 * accelerates (docs/mesh.md). By its network namespace's cookie, a pod's proxy (uid, gid, outbound
 * and inbound ports) and the destination ports its NAT leaves out of the outbound redirect: an
 * application's connect there goes straight to the proxy, but for those. By each of its
 * addresses, the namespace, inbound port and the ports its NAT leaves out of the inbound redirect:
 * a proxy's connect to the pod goes to that port, but for those. Root's alone (the pins' mode):
 * the node agent writes them from each pod's own annotations.
 *
 * <pre>
 * struct sm4j_mesh { __u32 proxy_uid; __u32 out_port; __u32 in_port; __u32 proxy_gid; __u16 skip_ports[8]; }; // key: netns
 * struct sm4j_mesh_addr_key { __u32 addr[4]; };                                       // IPv4 v4-mapped
 * struct sm4j_mesh_addr { __u64 netns; __u32 in_port; __u32 flags; __u16 skip_ports[8]; };
 * </pre>
 *
 * <p><b>Note:</b> not threadsafe: one writer at a time.
 */
public final class MeshMap implements AutoCloseable {
    /** SM4J_MESH_SKIP_PORTS: the most ports a pod's NAT may leave out of each redirect here. */
    public static final int SKIP_PORTS = 8;
    public static final StructLayout POD = MemoryLayout.structLayout(
            ValueLayout.JAVA_INT.withName("proxy_uid"),
            ValueLayout.JAVA_INT.withName("out_port"),
            ValueLayout.JAVA_INT.withName("in_port"),
            ValueLayout.JAVA_INT.withName("proxy_gid"),
            MemoryLayout.sequenceLayout(SKIP_PORTS, ValueLayout.JAVA_SHORT).withName("skip_ports"))
            .withName("sm4j_mesh");
    public static final StructLayout ADDR_KEY = MemoryLayout.structLayout(
            MemoryLayout.sequenceLayout(16, ValueLayout.JAVA_BYTE).withName("addr")).withName("sm4j_mesh_addr_key");
    public static final StructLayout ADDR = MemoryLayout.structLayout(
            ValueLayout.JAVA_LONG.withName("netns"),
            ValueLayout.JAVA_INT.withName("in_port"),
            ValueLayout.JAVA_INT.withName("flags"),
            MemoryLayout.sequenceLayout(SKIP_PORTS, ValueLayout.JAVA_SHORT).withName("skip_ports"))
            .withName("sm4j_mesh_addr");
    private static final long POD_SKIP = POD.byteOffset(MemoryLayout.PathElement.groupElement("skip_ports"));
    private static final long ADDR_SKIP = ADDR.byteOffset(MemoryLayout.PathElement.groupElement("skip_ports"));

    /**
     * A meshed pod as the maps hold it.
     *
     * @param netns        the cookie of the pod's network namespace
     * @param proxyUid     its proxy's uid, whose own connects are never sent to the proxy
     * @param proxyGid     its proxy's gid, whose connects are never sent to the proxy either (as
     *                     Istio's NAT leaves them alone); -1 for none
     * @param outboundPort the proxy's outbound port (where the pod's NAT sends its connects)
     * @param inboundPort  the proxy's inbound port (where the pod's NAT sends connections to it)
     * @param addresses    the pod's addresses
     * @param outboundSkip the destination ports its NAT leaves out of the outbound redirect (an
     *                     application's connect to one goes where it was dialed): at most
     *                     {@link #SKIP_PORTS}, in order
     * @param inboundSkip  the ports its NAT leaves out of the inbound redirect (another proxy's
     *                     connect to one goes to it, not to the proxy): the same
     */
    public record Pod(long netns, int proxyUid, int proxyGid, int outboundPort, int inboundPort, List<InetAddress> addresses,
                      List<Integer> outboundSkip, List<Integer> inboundSkip) {
        public Pod {
            if (netns == 0) {
                throw new IllegalArgumentException("a meshed pod needs its network namespace's cookie, not 0");
            }
            checkPort(outboundPort, "outbound");
            checkPort(inboundPort, "inbound");
            if (outboundPort == inboundPort) {
                throw new IllegalArgumentException("the proxy's outbound and inbound ports are both " + inboundPort);
            }
            if (proxyUid < 0) {
                throw new IllegalArgumentException("proxy uid " + Integer.toUnsignedString(proxyUid) + " is not a uid");
            }
            if (proxyGid < -1) {
                throw new IllegalArgumentException("proxy gid " + Integer.toUnsignedString(proxyGid) + " is not a gid");
            }
            addresses = List.copyOf(addresses);
            outboundSkip = checkSkip(outboundSkip, "outbound", -1);
            inboundSkip = checkSkip(inboundSkip, "inbound", inboundPort);
        }


        private static void checkPort(int port, String which) {
            if (port < 1 || port > 65535) {
                throw new IllegalArgumentException("the proxy's " + which + " port " + port + " is not in 1-65535");
            }
        }
    }

    /**
     * {@code ports} left out of a pod's {@code which} redirect ("outbound" or "inbound"), as the
     * kernel's entry holds them: at most {@link #SKIP_PORTS}, each in 1-65535, none twice, not the
     * proxy's own {@code ownPort} (-1: none).
     *
     * @throws IllegalArgumentException saying why the entry cannot hold them
     */
    public static List<Integer> checkSkip(List<Integer> ports, String which, int ownPort) {
        ports = List.copyOf(ports);
        if (ports.size() > SKIP_PORTS) {
            throw new IllegalArgumentException(ports.size() + " ports left out of the " + which + " redirect: at "
                    + "most " + SKIP_PORTS + " fit; a pod that leaves out more is left to its NAT");
        }
        for (int p : ports) {
            if (p < 1 || p > 65535) {
                throw new IllegalArgumentException("port " + p + " left out of the " + which
                        + " redirect is not in 1-65535");
            }
            if (p == ownPort) {
                throw new IllegalArgumentException("the proxy's " + which + " port " + p
                        + " is left out of its own redirect");
            }
        }
        if (ports.stream().distinct().count() != ports.size()) {
            throw new IllegalArgumentException("a port is left out of the " + which + " redirect twice: " + ports);
        }
        return ports;
    }

    private final BpfMap pods;
    private final BpfMap addresses;

    private MeshMap(BpfMap pods, BpfMap addresses) {
        this.pods = pods;
        this.addresses = addresses;
    }

    /** The meshed pods of {@code pinDir}; throws naming the pin when there is none. */
    public static MeshMap open(Libbpf bpf, Path pinDir) throws IOException {
        BpfMap pods = BpfMap.open(bpf, Pin.MESH, pinDir, 8);
        try {
            return new MeshMap(pods, BpfMap.open(bpf, Pin.MESH_ADDR, pinDir, ADDR_KEY.byteSize()));
        } catch (IOException | RuntimeException e) {
            pods.close();
            throw e;
        }
    }

    /**
     * Puts {@code pod}, replacing what its namespace had: its addresses first (a proxy's connect
     * to them goes to its inbound port once its proxy can be told why), then its namespace (its
     * applications' connects go to its proxy); addresses it no longer has last.
     */
    public void put(Pod pod) throws IOException {
        Pod before = get(pod.netns());
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment k = arena.allocate(ADDR_KEY);
            MemorySegment v = arena.allocate(ADDR);
            v.set(ValueLayout.JAVA_LONG, 0, pod.netns());
            v.set(ValueLayout.JAVA_INT, 8, pod.inboundPort());
            putPorts(v, ADDR_SKIP, pod.inboundSkip());
            for (InetAddress a : pod.addresses()) {
                fill(k, a);
                addresses.update(k, v, Libbpf.BPF_ANY, "meshed pod address " + a.getHostAddress());
            }
            MemorySegment nk = arena.allocate(ValueLayout.JAVA_LONG);
            nk.set(ValueLayout.JAVA_LONG, 0, pod.netns());
            MemorySegment nv = arena.allocate(POD);
            nv.set(ValueLayout.JAVA_INT, 0, pod.proxyUid());
            nv.set(ValueLayout.JAVA_INT, 4, pod.outboundPort());
            nv.set(ValueLayout.JAVA_INT, 8, pod.inboundPort());
            nv.set(ValueLayout.JAVA_INT, 12, pod.proxyGid() + 1);
            putPorts(nv, POD_SKIP, pod.outboundSkip());
            pods.update(nk, nv, Libbpf.BPF_ANY, "meshed pod of namespace " + Long.toUnsignedString(pod.netns()));
            if (before != null) {
                for (InetAddress a : before.addresses()) {
                    if (!pod.addresses().contains(a)) {
                        removeAddress(arena, k, a, pod.netns());
                    }
                }
            }
        }
    }

    /**
     * Removes the pod of namespace {@code netns}: its applications' connects go through its NAT
     * again first, then connects to its addresses do.
     *
     * @return whether there was one
     */
    public boolean remove(long netns) throws IOException {
        boolean listed = get(netns) != null;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment nk = arena.allocate(ValueLayout.JAVA_LONG);
            nk.set(ValueLayout.JAVA_LONG, 0, netns);
            boolean had = pods.tryDelete(nk) == 0;
            MemorySegment k = arena.allocate(ADDR_KEY);
            for (InetAddress a : addressesByNetns(new LinkedHashMap<>()).getOrDefault(netns, List.of())) {
                removeAddress(arena, k, a, netns);
            }
            return had || listed;
        }
    }

    /** Deletes the entry of {@code a} only while it is still {@code netns}'s (another pod may have the address now). */
    private void removeAddress(Arena arena, MemorySegment k, InetAddress a, long netns) {
        fill(k, a);
        MemorySegment v = arena.allocate(ADDR);
        if (addresses.lookup(k, v) && v.get(ValueLayout.JAVA_LONG, 0) == netns) {
            addresses.tryDelete(k);
        }
    }

    /** The pod of namespace {@code netns}, or null. */
    public Pod get(long netns) throws IOException {
        for (Pod p : list()) {
            if (p.netns() == netns) {
                return p;
            }
        }
        return null;
    }

    /** Every meshed pod, with the addresses filed for it (a namespace without a pod entry is not listed). */
    public List<Pod> list() throws IOException {
        Map<Long, List<Integer>> skips = new LinkedHashMap<>();
        Map<Long, List<InetAddress>> byNetns = addressesByNetns(skips);
        List<Long> netnsKeys = new ArrayList<>();
        pods.forEachKey(nk -> netnsKeys.add(nk.get(ValueLayout.JAVA_LONG, 0)));
        List<Pod> out = new ArrayList<>();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment nk = arena.allocate(ValueLayout.JAVA_LONG);
            MemorySegment pv = arena.allocate(POD);
            for (long netns : netnsKeys) {
                nk.set(ValueLayout.JAVA_LONG, 0, netns);
                if (pods.lookup(nk, pv)) {
                    out.add(new Pod(netns, pv.get(ValueLayout.JAVA_INT, 0), pv.get(ValueLayout.JAVA_INT, 12) - 1,
                            pv.get(ValueLayout.JAVA_INT, 4),
                            pv.get(ValueLayout.JAVA_INT, 8), byNetns.getOrDefault(netns, List.of()),
                            ports(pv, POD_SKIP), skips.getOrDefault(netns, List.of())));
                }
            }
        }
        return out;
    }

    /**
     * The addresses filed, by the namespace each is filed for (also of namespaces without a pod
     * entry); into {@code skips}, the ports each namespace's entries leave out.
     */
    private Map<Long, List<InetAddress>> addressesByNetns(Map<Long, List<Integer>> skips) throws IOException {
        Map<Long, List<InetAddress>> byNetns = new LinkedHashMap<>();
        List<byte[]> keys = new ArrayList<>();
        addresses.forEachKey(k -> keys.add(k.toArray(ValueLayout.JAVA_BYTE)));
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment k = arena.allocate(ADDR_KEY);
            MemorySegment v = arena.allocate(ADDR);
            for (byte[] key : keys) {
                MemorySegment.copy(key, 0, k, ValueLayout.JAVA_BYTE, 0, key.length);
                if (addresses.lookup(k, v)) {
                    long netns = v.get(ValueLayout.JAVA_LONG, 0);
                    byNetns.computeIfAbsent(netns, n -> new ArrayList<>()).add(address(k));
                    skips.putIfAbsent(netns, ports(v, ADDR_SKIP));
                }
            }
        }
        return byNetns;
    }

    /** Writes {@code ports} at {@code offset} of an entry (the rest of its list stays 0). */
    private static void putPorts(MemorySegment v, long offset, List<Integer> ports) {
        for (int i = 0; i < ports.size(); i++) {
            v.set(ValueLayout.JAVA_SHORT, offset + 2L * i, (short) (int) ports.get(i));
        }
    }

    /** The ports an entry's list at {@code offset} leaves out, up to the first 0. */
    private static List<Integer> ports(MemorySegment v, long offset) {
        List<Integer> ports = new ArrayList<>();
        for (int i = 0; i < SKIP_PORTS; i++) {
            int p = Short.toUnsignedInt(v.get(ValueLayout.JAVA_SHORT, offset + 2L * i));
            if (p == 0) {
                break;
            }
            ports.add(p);
        }
        return ports;
    }

    private static void fill(MemorySegment k, InetAddress a) {
        MemorySegment.copy(SockKeyLayout.mapped(Objects.requireNonNull(a)), 0, k, ValueLayout.JAVA_BYTE, 0, 16);
    }

    /** The address of a key: IPv4 for a v4-mapped one (InetAddress makes it so). */
    private static InetAddress address(MemorySegment k) throws UnknownHostException {
        return InetAddress.getByAddress(k.asSlice(0, 16).toArray(ValueLayout.JAVA_BYTE));
    }

    @Override
    public void close() {
        pods.close();
        addresses.close();
    }
}
