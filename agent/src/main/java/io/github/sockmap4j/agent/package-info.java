/**
 * The node agent: {@link io.github.sockmap4j.agent.NodeAgent} owns a node's pin directory
 * (creates, adopts or retires the pins, attaches to the pods' cgroups, watches receivers in every
 * pod's network namespace, serves opt-ins on its control socket and holds rules for named
 * owners); {@link io.github.sockmap4j.agent.AgentHttp} serves its {@code /metrics},
 * {@code /healthz} and {@code /readyz}, with {@link io.github.sockmap4j.agent.AgentMetrics}.
 */
package io.github.sockmap4j.agent;
