/**
 * The node agent's control plane, for the command line that wires it: {@code io.github.sockmap4j.agent}
 * (the agent and its HTTP endpoints) and {@code .kubernetes} (the reconcilers) are exported;
 * {@code .control} (the control socket, the policy file, who holds each rule and Service) is the
 * agent's own.
 * It stands on core's and the node module's exported packages and on the linux module (the pins, maps, lock directory,
 * listener table and the control socket's request format), which exports them to this module
 * and to core only. Its Kubernetes and Micrometer dependencies have no module names of their own:
 * hence "requires-automatic".
 */
@SuppressWarnings({"requires-automatic", "requires-transitive-automatic"})
module io.github.sockmap4j.agent {
    requires transitive io.github.sockmap4j.core;
    requires transitive io.github.sockmap4j.node;
    requires io.github.sockmap4j.linux;
    requires io.github.sockmap4j.metrics;
    requires org.slf4j;
    requires io.netty.buffer;
    requires io.netty.common;
    requires io.netty.transport;
    requires io.netty.codec;
    requires io.netty.codec.http;
    requires transitive micrometer.core;
    requires micrometer.registry.prometheus;
    requires transitive kubernetes.client.api;
    requires transitive kubernetes.model.core;
    requires kubernetes.model.discovery;

    exports io.github.sockmap4j.agent;
    exports io.github.sockmap4j.agent.kubernetes;
}
