package io.github.sockmap4j.linux.bpf;

import io.github.sockmap4j.linux.ffi.Errno;
import io.github.sockmap4j.linux.ffi.Libbpf;
import io.github.sockmap4j.linux.ffi.NativeIOException;
import java.nio.file.Path;

/**
 * The objects of the BPF object that are pinned in a pin directory: their name in the object
 * and their file name under the pin directory. The meta map comes last among the maps: its pin
 * marks a complete set (see {@link Pins#create}).
 */
enum Pin {
    SOCKS("sm4j_socks", "socks", false),
    POLICY("sm4j_policy", "policy", false),
    COUNTERS("sm4j_counters", "counters", false),
    SOCK_STATE("sm4j_sockstate", "sockstate", false),
    RX("sm4j_rx", "rx", false),
    SLOTS("sm4j_slots", "slots", false),
    WATCH("sm4j_watch", "watch", false),
    /** The programs' read-only configuration (their .rodata, struct sm4j_config), set before load. */
    CONFIG(".rodata", "config", false),
    SERVICES("sm4j_services", "services", false),
    SVC_SOCK("sm4j_svcsock", "svcsock", false),
    /** Translated sockets by their own end, for SO_ORIGINAL_DST (a mesh's proxy). */
    SVC_ORIG("sm4j_svcorig", "svcorig", false),
    /** SOCKHASH entries by share (a user, a pod): no one fills the map for others. */
    SHARES("sm4j_shares", "shares", false),
    /** This node's address prefixes: where a registered socket's server may be (LocalPeersMap). */
    LOCAL("sm4j_local", "local", false),
    /** Sockets another program's sockmap held when they were to be registered (Collisions). */
    BUSY("sm4j_busy", "busy", false),
    /** Meshed pods by network namespace, and by address (MeshMap): the node agent's. */
    MESH("sm4j_mesh", "mesh", false),
    MESH_ADDR("sm4j_meshaddr", "meshaddr", false),
    /** Proxies' connects sent to another meshed pod's inbound port, by connection, for that pod's proxy. */
    MESH_ORIG("sm4j_meshorig", "meshorig", false),
    META("sm4j_meta", "meta", false),
    SOCKOPS("sm4j_sockops", "prog_sockops", true),
    REDIRECT("sm4j_redirect", "prog_redirect", true),
    CONNECT4("sm4j_connect4", "prog_connect4", true),
    CONNECT6("sm4j_connect6", "prog_connect6", true),
    GETPEERNAME4("sm4j_getpeername4", "prog_getpeername4", true),
    GETPEERNAME6("sm4j_getpeername6", "prog_getpeername6", true),
    GETSOCKOPT("sm4j_getsockopt", "prog_getsockopt", true);

    final String objectName;
    final String fileName;
    final boolean program;

    Pin(String objectName, String fileName, boolean program) {
        this.objectName = objectName;
        this.fileName = fileName;
        this.program = program;
    }

    String path(Path pinDir) {
        return pinDir.resolve(fileName).toString();
    }

    /**
     * A descriptor of this pin of {@code pinDir}, the caller's to close.
     *
     * @throws NativeIOException naming the pin when the directory has none (nothing set up, or
     *         pins of an older version)
     */
    int open(Libbpf bpf, Path pinDir) throws NativeIOException {
        String path = path(pinDir);
        int fd = bpf.tryGetPinned(path);
        if (fd < 0) {
            throw Errno.error("bpf_obj_get", fd, path);
        }
        return fd;
    }
}
