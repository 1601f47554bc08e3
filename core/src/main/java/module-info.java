/**
 * sockmap4j core: the sockmap fast path (kernel objects, policy, channels) and the XDP filter.
 * Two packages are exported, {@code io.github.sockmap4j} and {@code io.github.sockmap4j.xdp};
 * {@code io.github.sockmap4j.internal.*} is not.
 */
module io.github.sockmap4j.core {
    requires org.slf4j;
    requires jdk.jfr;

    exports io.github.sockmap4j;
    exports io.github.sockmap4j.xdp;
}
