/**
 * The node agent's control plane, for the command line that wires it: {@code io.github.sockmap4j.agent}
 * (the agent, its HTTP endpoints, its command, {@code AgentMain} to run it alone) and
 * {@code .kubernetes} (the reconcilers) are exported;
 * {@code .control} (the control socket, the policy file, who holds each rule and Service) is the
 * agent's own.
 * It stands on core's and the node module's exported packages and on the linux module (the pins,
 * maps, lock directory, listener table and the control socket's request format and client),
 * which exports them to this module, core and node only. Its Kubernetes and Micrometer dependencies have no module names of their own:
 * hence "requires-automatic".
 */
@SuppressWarnings({"requires-automatic", "requires-transitive-automatic"})
module io.github.sockmap4j.agent {
    requires transitive io.github.sockmap4j.core;
    requires transitive io.github.sockmap4j.node;
    requires io.github.sockmap4j.linux;
    requires io.github.sockmap4j.control;
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
    requires info.picocli;

    exports io.github.sockmap4j.agent;
    // picocli sets the agent command's option fields, which are not public.
    opens io.github.sockmap4j.agent to info.picocli;
    exports io.github.sockmap4j.agent.kubernetes;
}
