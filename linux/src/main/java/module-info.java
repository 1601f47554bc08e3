/**
 * sockmap4j's layer on Linux: every downcall into libc and libbpf ({@code .ffi}), sockets by fd
 * ({@code .net}), the host as the fast path needs it ({@code .sys}), the fast path's kernel
 * objects ({@code .bpf}: the compiled programs in this jar, their loading, pins and locks, every
 * map and its layout).
 *
 * <p>Not an API: its packages are exported to six modules only, core (the library: its kernel
 * mode and channels), node (what a node's owner does: admin, XDP), the node agent (pins, maps,
 * the lock directory), the agent's control protocol (rules, Services and addresses in its
 * requests; {@code .bpf} and {@code .net} only), the Netty transport (an automatic module:
 * {@code .sys}'s CPU pressure only) and the co-located rings ({@code .ffi}'s shared memory and
 * descriptor passing, {@code .net}'s Unix sockets), and may change
 * with any release. All are built after this module, so javac does not see them here:
 * hence "module".
 */
@SuppressWarnings("module")
module io.github.sockmap4j.linux {
    requires org.slf4j;

    exports io.github.sockmap4j.linux.bpf to io.github.sockmap4j.core, io.github.sockmap4j.node, io.github.sockmap4j.agent,
            io.github.sockmap4j.control;
    exports io.github.sockmap4j.linux.ffi to io.github.sockmap4j.core, io.github.sockmap4j.node, io.github.sockmap4j.agent,
            io.github.sockmap4j.colocated;
    exports io.github.sockmap4j.linux.net to io.github.sockmap4j.core, io.github.sockmap4j.node, io.github.sockmap4j.agent,
            io.github.sockmap4j.control, io.github.sockmap4j.colocated;
    exports io.github.sockmap4j.linux.sys to io.github.sockmap4j.core, io.github.sockmap4j.node, io.github.sockmap4j.agent,
            io.github.sockmap4j.netty;
}
