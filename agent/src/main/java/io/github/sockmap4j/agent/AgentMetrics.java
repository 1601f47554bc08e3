package io.github.sockmap4j.agent;

import io.github.sockmap4j.metrics.SockmapMetrics;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.binder.MeterBinder;

/**
 * The node agent's meters: its pin directory's counters as {@link SockmapMetrics} has them
 * ({@code sockmap4j.active} is 1 while the agent is ready), and {@code sockmap4j.agent.namespaces}
 * (network namespaces the in-flight watcher looks in), {@code sockmap4j.agent.estimates}
 * (receivers' estimates it raised), {@code sockmap4j.agent.rules} (rules in the policy map),
 * {@code sockmap4j.agent.requests} tagged {@code outcome} (control socket requests).
 */
public final class AgentMetrics implements MeterBinder {
    private final NodeAgent agent;
    private final SockmapMetrics counters;

    public AgentMetrics(NodeAgent agent) {
        this.agent = agent;
        this.counters = SockmapMetrics.of(agent::stats, agent::isReady);
    }

    @Override
    public void bindTo(MeterRegistry r) {
        counters.bindTo(r);
        Gauge.builder("sockmap4j.agent.namespaces", agent, NodeAgent::watchedNamespaces)
                .description("network namespaces the in-flight watcher looks in").strongReference(true).register(r);
        FunctionCounter.builder("sockmap4j.agent.estimates", agent, NodeAgent::watcherEstimates)
                .description("read estimates or bounds the watcher raised").register(r);
        Gauge.builder("sockmap4j.agent.rules", agent, NodeAgent::rules)
                .description("rules in the policy map").strongReference(true).register(r);
        FunctionCounter.builder("sockmap4j.agent.requests", agent, a -> a.controlRequests() - a.controlRefusals())
                .description("control socket requests").tags("outcome", "done").register(r);
        FunctionCounter.builder("sockmap4j.agent.requests", agent, NodeAgent::controlRefusals)
                .description("control socket requests").tags("outcome", "refused").register(r);
    }
}
