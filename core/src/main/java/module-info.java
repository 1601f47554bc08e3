/**
 * sockmap4j core: the sockmap fast path (kernel objects, policy, channels) and the XDP filter.
 * Exported by audience: {@code io.github.sockmap4j} for applications, {@code .spi} for
 * integrations that hold raw socket fds (the Netty transport), {@code .admin} for operators and
 * the node agent, {@code .xdp} for the ingress filter; {@code io.github.sockmap4j.internal.*} is
 * not exported.
 */
module io.github.sockmap4j.core {
    requires org.slf4j;
    requires jdk.jfr;

    exports io.github.sockmap4j;
    exports io.github.sockmap4j.admin;
    exports io.github.sockmap4j.spi;
    exports io.github.sockmap4j.xdp;
}
