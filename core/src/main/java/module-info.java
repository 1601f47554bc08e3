/**
 * sockmap4j core: the sockmap fast path (kernel objects, policy, channels) and the XDP filter.
 * Exported by audience: {@code io.github.sockmap4j} for applications, {@code .spi} for
 * integrations that hold raw socket fds (the Netty transport), {@code .admin} for operators and
 * the node agent, {@code .xdp} for the ingress filter; {@code io.github.sockmap4j.internal.*} is
 * not exported. System calls, sockets and the host come from {@code io.github.sockmap4j.linux},
 * which exports them to this module.
 */
module io.github.sockmap4j.core {
    requires io.github.sockmap4j.linux;
    requires org.slf4j;
    requires jdk.jfr;

    exports io.github.sockmap4j;
    exports io.github.sockmap4j.admin;
    exports io.github.sockmap4j.spi;
    exports io.github.sockmap4j.xdp;
}
