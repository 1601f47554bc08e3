/**
 * sockmap4j's layer on Linux: every downcall into libc and libbpf ({@code .ffi}), sockets by fd
 * ({@code .net}), the host as the fast path needs it ({@code .sys}), the fast path's kernel
 * objects ({@code .bpf}: the compiled programs in this jar, their loading, pins and locks, every
 * map and its layout), and the node agent's control socket as both of its ends read it
 * ({@code .control}: the request format).
 *
 * <p>Not an API: its packages are exported to three modules only, core (the library: its kernel
 * mode, channels and the control socket's client), node (what a node's owner does: admin, XDP)
 * and the node agent (pins, maps, the lock directory, the control socket's server), and may
 * change with any release. All are built after this module, so javac does not see them here:
 * hence "module".
 */
@SuppressWarnings("module")
module io.github.sockmap4j.linux {
    requires org.slf4j;

    exports io.github.sockmap4j.linux.bpf to io.github.sockmap4j.core, io.github.sockmap4j.node, io.github.sockmap4j.agent;
    exports io.github.sockmap4j.linux.control to io.github.sockmap4j.core, io.github.sockmap4j.node, io.github.sockmap4j.agent;
    exports io.github.sockmap4j.linux.ffi to io.github.sockmap4j.core, io.github.sockmap4j.node, io.github.sockmap4j.agent;
    exports io.github.sockmap4j.linux.net to io.github.sockmap4j.core, io.github.sockmap4j.node, io.github.sockmap4j.agent;
    exports io.github.sockmap4j.linux.sys to io.github.sockmap4j.core, io.github.sockmap4j.node, io.github.sockmap4j.agent;
}
