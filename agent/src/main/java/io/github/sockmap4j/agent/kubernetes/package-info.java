/**
 * The agent's Kubernetes reconcilers (fabric8 informers): this node's pods' port annotations
 * into rules, and Services with their EndpointSlices into the Service map.
 */
package io.github.sockmap4j.agent.kubernetes;
