/**
 * sockmap4j's layer on Linux: every downcall into libc and libbpf ({@code .ffi}), sockets by fd
 * ({@code .net}), the host as the fast path needs it ({@code .sys}), and the fast path's kernel
 * objects ({@code .bpf}: the compiled programs in this jar, their loading, pins and locks, every
 * map and its layout), and the node agent's control socket as both its ends read it
 * ({@code .control}: the request format). Not an API: its packages
 * are exported to sockmap4j's own named modules only, and code outside them may change with any
 * release. (Core is built after this module, so javac does not see it here: hence "module".)
 */
@SuppressWarnings("module")
module io.github.sockmap4j.linux {
    requires org.slf4j;

    exports io.github.sockmap4j.linux.bpf to io.github.sockmap4j.core;
    exports io.github.sockmap4j.linux.control to io.github.sockmap4j.core;
    exports io.github.sockmap4j.linux.ffi to io.github.sockmap4j.core;
    exports io.github.sockmap4j.linux.net to io.github.sockmap4j.core;
    exports io.github.sockmap4j.linux.sys to io.github.sockmap4j.core;
}
