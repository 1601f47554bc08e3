package io.github.sockmap4j.linux.bpf;

import io.github.sockmap4j.linux.ffi.Errno;
import io.github.sockmap4j.linux.ffi.LibC;
import io.github.sockmap4j.linux.ffi.Libbpf;
import io.github.sockmap4j.linux.ffi.NativeIOException;
import java.nio.file.Path;
import java.util.EnumMap;
import java.util.Map;

/**
 * One process's file descriptors of a pin directory's objects, one named handle each.
 *
 * <p><b>Note:</b> immutable; {@link #close()} once, by the owner.
 */
record PinnedObjects(int socks, int policy, int counters, int sockState, int rx, int slots, int watch,
                     int config, int services, int svcSock, int local, int meta, int sockops, int redirect, int connect4,
                     int connect6, int getpeername4, int getpeername6, int svcOrig, int getsockopt, int shares,
                     int mesh, int meshAddr, int meshOrig) {

    /** Opens every pin of {@code dir}; on a failure closes what it opened and throws. */
    static PinnedObjects open(Libbpf bpf, Path dir) throws NativeIOException {
        Map<Pin, Integer> fds = new EnumMap<>(Pin.class);
        try {
            for (Pin p : Pin.values()) {
                String path = p.path(dir);
                int fd = bpf.tryGetPinned(path);
                if (fd < 0) {
                    throw Errno.error("bpf_obj_get", fd, path);
                }
                fds.put(p, fd);
            }
        } catch (NativeIOException e) {
            fds.values().forEach(LibC::close);
            throw e;
        }
        return new PinnedObjects(fds.get(Pin.SOCKS), fds.get(Pin.POLICY), fds.get(Pin.COUNTERS),
                fds.get(Pin.SOCK_STATE), fds.get(Pin.RX), fds.get(Pin.SLOTS), fds.get(Pin.WATCH), fds.get(Pin.CONFIG),
                fds.get(Pin.SERVICES), fds.get(Pin.SVC_SOCK), fds.get(Pin.LOCAL), fds.get(Pin.META), fds.get(Pin.SOCKOPS),
                fds.get(Pin.REDIRECT), fds.get(Pin.CONNECT4), fds.get(Pin.CONNECT6), fds.get(Pin.GETPEERNAME4),
                fds.get(Pin.GETPEERNAME6), fds.get(Pin.SVC_ORIG), fds.get(Pin.GETSOCKOPT),
                fds.get(Pin.SHARES), fds.get(Pin.MESH), fds.get(Pin.MESH_ADDR),
                fds.get(Pin.MESH_ORIG));
    }

    /**
     * The cgroup programs and their attach types: the sockops program, then the Service
     * translation's (connect, getpeername, and getsockopt for SO_ORIGINAL_DST).
     */
    int[][] cgroupPrograms() {
        return new int[][] {{sockops, Libbpf.BPF_CGROUP_SOCK_OPS}, {connect4, Libbpf.BPF_CGROUP_INET4_CONNECT},
            {connect6, Libbpf.BPF_CGROUP_INET6_CONNECT}, {getpeername4, Libbpf.BPF_CGROUP_INET4_GETPEERNAME},
            {getpeername6, Libbpf.BPF_CGROUP_INET6_GETPEERNAME}, {getsockopt, Libbpf.BPF_CGROUP_GETSOCKOPT}};
    }

    /** Closes every descriptor but the policy map's, which its {@link PolicyMap} owns. */
    void closeAllButPolicy() {
        for (int fd : new int[] {socks, counters, sockState, rx, slots, watch, config, services, svcSock, local, meta,
            sockops,
            redirect, connect4, connect6, getpeername4, getpeername6, svcOrig, getsockopt, shares, mesh, meshAddr,
            meshOrig}) {
            LibC.close(fd);
        }
    }
}
