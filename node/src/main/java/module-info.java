/**
 * What a node's owner does with the fast path, apart from the services that use it:
 * {@code io.github.sockmap4j.admin} (set up pins for an agent, read their counters from outside,
 * remove them, opt in without privileges, Services and local peers, the kernel's run statistics)
 * and {@code io.github.sockmap4j.xdp} (the ingress filter). The node agent and the command line
 * stand on it; a service's process needs only core. Its signatures name core's types
 * ({@code SockmapConfig}, {@code SockmapStats}, {@code OptIn}), so core is read by whoever reads
 * this module; the pins, maps and programs come from the linux module, which exports them to
 * core, the agent and this module only.
 */
module io.github.sockmap4j.node {
    requires transitive io.github.sockmap4j.core;
    requires io.github.sockmap4j.linux;
    requires io.github.sockmap4j.control;

    exports io.github.sockmap4j.admin;
    exports io.github.sockmap4j.xdp;
}
