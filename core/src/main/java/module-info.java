/**
 * sockmap4j core: the sockmap fast path (kernel objects, policy, channels). Only
 * {@code io.github.sockmap4j} is exported; {@code io.github.sockmap4j.internal.*} is not.
 */
module io.github.sockmap4j.core {
    requires org.slf4j;
    requires jdk.jfr;

    exports io.github.sockmap4j;
    exports io.github.sockmap4j.xdp;
}
