package io.github.sockmap4j.agent;

import io.github.sockmap4j.agent.control.ControlCounts;
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
 * {@code sockmap4j.agent.requests} tagged {@code outcome} (control socket requests answered OK,
 * or ERR), {@code sockmap4j.agent.refusals} tagged {@code reason} (every refusal once: connections
 * at admission, lines, and requests by why: {@link ControlCounts.Refusal}).
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
        // Each counted as it happens, never one computed from others: a difference can go
        // negative (a connection refused at admission made no request), and a negative counter
        // fails the whole scrape.
        FunctionCounter.builder("sockmap4j.agent.requests", agent, NodeAgent::controlDone)
                .description("control socket requests").tags("outcome", "done").register(r);
        FunctionCounter.builder("sockmap4j.agent.requests", agent, NodeAgent::controlRefusedRequests)
                .description("control socket requests").tags("outcome", "refused").register(r);
        for (ControlCounts.Refusal why : ControlCounts.Refusal.values()) {
            FunctionCounter.builder("sockmap4j.agent.refusals", agent, a -> a.controlRefusals(why))
                    .description("what the control socket refused, by reason").tags("reason", why.tag()).register(r);
        }
    }
}
