/**
 * sockmap4j core: what a service's process needs for the sockmap fast path (opting in through the
 * kernel or a node agent, channels, the flow, the counters it reads). Exported by audience:
 * {@code io.github.sockmap4j} for applications, {@code .spi} for integrations that hold raw socket
 * fds (the Netty transport); {@code io.github.sockmap4j.internal.*} is not exported. System calls,
 * sockets, the host and the kernel objects come from {@code io.github.sockmap4j.linux}, which
 * exports them to this module. What a node's owner does (admin, XDP) is the node module's.
 */
module io.github.sockmap4j.core {
    requires io.github.sockmap4j.linux;
    requires io.github.sockmap4j.control;
    requires org.slf4j;
    requires jdk.jfr;

    exports io.github.sockmap4j;
    exports io.github.sockmap4j.spi;
}
