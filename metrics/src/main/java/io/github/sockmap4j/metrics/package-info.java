/**
 * For services that export metrics: the fast path's counters as Micrometer meters.
 */
package io.github.sockmap4j.metrics;
