/**
 * Micrometer meters of the fast path, the XDP filter and the co-located agreements
 * ({@code io.github.sockmap4j.metrics}).
 * Its signatures name core's, the node module's (the XDP filter) and Micrometer's types, so all
 * three are read by whoever reads this module; Micrometer has no module name of its own: hence the suppressed "requires-automatic".
 */
@SuppressWarnings({"requires-automatic", "requires-transitive-automatic"})
module io.github.sockmap4j.metrics {
    requires transitive io.github.sockmap4j.core;
    requires transitive io.github.sockmap4j.node;
    requires transitive micrometer.core;
    // ColocatedMetrics only: optional, as the co-located transport is
    requires static io.github.sockmap4j.colocated.grpc;

    exports io.github.sockmap4j.metrics;
}
