package io.github.sockmap4j.linux.bpf;

import io.github.sockmap4j.linux.ffi.Libbpf;
import io.github.sockmap4j.linux.ffi.NativeIOException;
import io.github.sockmap4j.linux.sys.NetnsCookie;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The pinned {@code sm4j_services} map of a pin directory: the Services whose connects the
 * programs send straight to an endpoint (struct sm4j_svc). Opened by whoever writes Services (the
 * agent, an operator's CLI); the programs only read it.
 *
 * <p><b>Note:</b> not threadsafe: one writer at a time.
 */
public final class ServiceMap implements AutoCloseable {
    /** A Service as the map holds it: its endpoints, those on this node first. */
    public record Service(InetSocketAddress vip, List<InetSocketAddress> local, List<InetSocketAddress> remote,
                          boolean localOnly) {
        public Service {
            local = List.copyOf(local);
            remote = List.copyOf(remote);
            if (local.size() + remote.size() > ServiceLayout.ENDPOINTS) {
                throw new IllegalArgumentException("at most " + ServiceLayout.ENDPOINTS + " endpoints per Service: "
                        + vip + " has " + (local.size() + remote.size()) + "; leave larger ones to kube-proxy");
            }
            boolean v4 = vip.getAddress() instanceof java.net.Inet4Address;
            for (InetSocketAddress e : concat(local, remote)) {
                if ((e.getAddress() instanceof java.net.Inet4Address) != v4) {
                    throw new IllegalArgumentException("endpoint " + e + " is not of the family of " + vip);
                }
            }
        }

        private static List<InetSocketAddress> concat(List<InetSocketAddress> a, List<InetSocketAddress> b) {
            List<InetSocketAddress> all = new ArrayList<>(a);
            all.addAll(b);
            return all;
        }
    }

    /**
     * Whose connects a Service moves: {@code ownerUid}'s only (-1: everyone's) and those made in
     * the network namespace of cookie {@code netns} only (0: in every one).
     */
    public record Scope(int ownerUid, long netns) {
        /** Every connect of the attached cgroups: root's Services and the Kubernetes feed's. */
        public static final Scope EVERYONE = new Scope(-1, 0);

        public Scope {
            if (ownerUid < -1) {
                throw new IllegalArgumentException("owner uid " + ownerUid);
            }
        }

        /**
         * The scope of {@code s} put by {@code uid} (0: root, for everyone), from a process in
         * the namespace of cookie {@code callerNetns}: that namespace only when the Service names a
         * loopback address, which is a different host in each namespace.
         */
        public static Scope of(int uid, Service s, long callerNetns) {
            return new Scope(uid == 0 ? -1 : uid, namespaceLocal(s) ? callerNetns : 0);
        }

        /** Whether every connect of {@code uid} in namespace {@code netns} is moved. */
        public boolean covers(int uid, long netns) {
            return (ownerUid < 0 || ownerUid == uid) && (this.netns == 0 || this.netns == netns);
        }
    }

    /**
     * Where a Service is in the map: its VIP, and for a loopback VIP (one host per network
     * namespace) the cookie of the namespace it is of; {@code netns} is 0 for any other VIP, which
     * is one address on the whole host. Two namespaces' Services of 127.0.0.2:80 are two entries.
     */
    public record Key(long netns, InetSocketAddress vip) {
        /** The key of {@code vip} as put or removed from the namespace of cookie {@code callerNetns}. */
        public static Key of(InetSocketAddress vip, long callerNetns) {
            return new Key(vip.getAddress().isLoopbackAddress() ? callerNetns : 0, vip);
        }
    }

    /** A Service as the map holds it, and where. */
    public record Entry(Key key, Service service) {
    }

    /** Whether {@code s} names a loopback address (its VIP or an endpoint): one per namespace. */
    public static boolean namespaceLocal(Service s) {
        return s.vip().getAddress().isLoopbackAddress() || Service.concat(s.local(), s.remote()).stream()
                .anyMatch(e -> e.getAddress().isLoopbackAddress());
    }

    private final BpfMap map;

    private ServiceMap(BpfMap map) {
        this.map = map;
    }

    /**
     * The Service map of {@code pinDir}.
     *
     * @throws IOException naming the pin when the directory has none (nothing set up, or pins of
     *         an older version without Services)
     */
    public static ServiceMap open(Libbpf bpf, Path pinDir) throws IOException {
        return new ServiceMap(BpfMap.open(bpf, Pin.SERVICES, pinDir, ServiceLayout.KEY.byteSize()));
    }

    /**
     * Adds {@code s} or replaces the Service of the same VIP and port (a loopback VIP: of this
     * thread's network namespace), for every connect; one that
     * names a loopback address, for connects in this thread's network namespace only.
     */
    public void put(Service s) throws NativeIOException {
        put(s, Scope.of(0, s, namespaceLocal(s) ? NetnsCookie.here() : 0));
    }

    /**
     * Adds {@code s} or replaces the Service at its {@link Key} (a loopback VIP's: in the namespace
     * of {@code scope}), moving the connects of {@code scope}.
     */
    public void put(Service s, Scope scope) throws NativeIOException {
        if (namespaceLocal(s) && scope.netns() == 0) {
            throw new IllegalArgumentException("the Service " + s.vip() + " names a loopback address, which is one "
                    + "namespace's: its scope must name that namespace");
        }
        Key at = Key.of(s.vip(), scope.netns());
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment v = arena.allocate(ServiceLayout.SERVICE);
            v.set(ValueLayout.JAVA_INT, ServiceLayout.COUNT, s.local().size() + s.remote().size());
            v.set(ValueLayout.JAVA_INT, ServiceLayout.LOCAL_COUNT, s.local().size());
            v.set(ValueLayout.JAVA_INT, ServiceLayout.FLAGS, s.localOnly() ? ServiceLayout.LOCAL_ONLY : 0);
            v.set(ValueLayout.JAVA_INT, ServiceLayout.OWNER, scope.ownerUid() + 1);
            v.set(ValueLayout.JAVA_LONG, ServiceLayout.NETNS, scope.netns());
            int i = 0;
            for (InetSocketAddress e : Service.concat(s.local(), s.remote())) {
                fillAddress(v.asSlice(ServiceLayout.EP + i * ServiceLayout.ENDPOINT.byteSize(),
                        ServiceLayout.ENDPOINT.byteSize()), e);
                i++;
            }
            map.update(key(arena, at), v, Libbpf.BPF_ANY, s.vip().toString());
        }
    }

    /**
     * Removes the Service of {@code vip} (a loopback one: of this thread's network namespace);
     * whether there was one.
     */
    public boolean remove(InetSocketAddress vip) throws NativeIOException {
        return remove(Key.of(vip, vip.getAddress().isLoopbackAddress() ? NetnsCookie.here() : 0));
    }

    /** Removes the Service at {@code at}; whether there was one. */
    public boolean remove(Key at) throws NativeIOException {
        try (Arena arena = Arena.ofConfined()) {
            return map.delete(key(arena, at), at.vip().toString());
        }
    }

    /** Every Service in the map, of every namespace. */
    public List<Service> list() throws IOException {
        return entries().stream().map(Entry::service).toList();
    }

    /** Every Service in the map, with where it is. */
    public List<Entry> entries() throws IOException {
        List<Entry> out = new ArrayList<>();
        UnknownHostException[] bad = {null};
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment v = arena.allocate(ServiceLayout.SERVICE);
            map.forEachKey(k -> {
                if (!map.lookup(k, v)) {
                    return; // removed meanwhile
                }
                try {
                    Service sv = service(k, v);
                    out.add(new Entry(new Key(k.get(ValueLayout.JAVA_LONG, ServiceLayout.KEY_NETNS), sv.vip()), sv));
                } catch (UnknownHostException e) {
                    bad[0] = e; // 16 bytes are always an address
                }
            });
        }
        if (bad[0] != null) {
            throw bad[0];
        }
        return out;
    }

    private static Service service(MemorySegment k, MemorySegment v) throws UnknownHostException {
        int count = v.get(ValueLayout.JAVA_INT, ServiceLayout.COUNT);
        int local = v.get(ValueLayout.JAVA_INT, ServiceLayout.LOCAL_COUNT);
        List<InetSocketAddress> l = new ArrayList<>();
        List<InetSocketAddress> r = new ArrayList<>();
        for (int i = 0; i < Math.min(count, ServiceLayout.ENDPOINTS); i++) {
            InetSocketAddress e = address(v.asSlice(ServiceLayout.EP + i * ServiceLayout.ENDPOINT.byteSize(),
                    ServiceLayout.ENDPOINT.byteSize()));
            (i < local ? l : r).add(e);
        }
        return new Service(address(k.asSlice(ServiceLayout.KEY_ADDR)), l, r, (v.get(ValueLayout.JAVA_INT, ServiceLayout.FLAGS)
                & ServiceLayout.LOCAL_ONLY) != 0);
    }

    /**
     * How many translated sockets the pin directory's {@code svcsock} map remembers (each one's
     * Service, for getpeername): those open, as each entry goes at its socket's close.
     */
    public static int translatedSockets(Libbpf bpf, java.nio.file.Path pinDir) throws IOException {
        try (BpfMap svcsock = BpfMap.open(bpf, Pin.SVC_SOCK, pinDir, 8)) {
            return svcsock.count();
        }
    }

    private static MemorySegment key(Arena arena, Key at) {
        MemorySegment k = arena.allocate(ServiceLayout.KEY);
        k.set(ValueLayout.JAVA_LONG, ServiceLayout.KEY_NETNS, at.netns());
        fillAddress(k.asSlice(ServiceLayout.KEY_ADDR), at.vip());
        return k;
    }

    /** addr[16] then port (host order), the shape of sm4j_endpoint and of sm4j_svc_key after its netns. */
    private static void fillAddress(MemorySegment at, InetSocketAddress a) {
        MemorySegment.copy(SockKeyLayout.mapped(a.getAddress()), 0, at, ValueLayout.JAVA_BYTE, 0, 16);
        at.set(ValueLayout.JAVA_INT, 16, a.getPort());
    }

    private static InetSocketAddress address(MemorySegment at) throws UnknownHostException {
        byte[] b = at.asSlice(0, 16).toArray(ValueLayout.JAVA_BYTE);
        return new InetSocketAddress(InetAddress.getByAddress(b), at.get(ValueLayout.JAVA_INT, 16));
    }

    @Override
    public void close() {
        map.close();
    }
}
