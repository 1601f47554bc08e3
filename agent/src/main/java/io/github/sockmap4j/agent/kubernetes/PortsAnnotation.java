package io.github.sockmap4j.agent.kubernetes;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The {@code sockmap4j.io/ports} annotation of a pod or a Service, read the one way: entries
 * separated by commas, spaces around them and empty ones ignored. A pod's entries are port
 * numbers; a Service's may also name its ports.
 *
 * @param entries the entries, in order, trimmed
 */
record PortsAnnotation(Set<String> entries) {
    /** The annotation's name, on pods and Services. */
    static final String NAME = "sockmap4j.io/ports";
    static final PortsAnnotation NONE = new PortsAnnotation(Set.of());

    /** The annotation {@code name} of {@code annotations} (null: none); empty when absent. */
    static PortsAnnotation of(Map<String, String> annotations, String name) {
        String value = annotations == null ? null : annotations.get(name);
        if (value == null) {
            return NONE;
        }
        Set<String> entries = new LinkedHashSet<>();
        for (String e : value.split(",")) {
            if (!e.isBlank()) {
                entries.add(e.trim());
            }
        }
        return new PortsAnnotation(java.util.Collections.unmodifiableSet(entries));
    }

    boolean isEmpty() {
        return entries.isEmpty();
    }

    /** Whether it names {@code port} by its number, or by {@code portName} (a Service port's; null: none). */
    boolean names(int port, String portName) {
        return entries.contains(Integer.toString(port)) || (portName != null && entries.contains(portName));
    }

    /**
     * Its entries as port numbers.
     *
     * @throws IllegalArgumentException naming the first entry that is not a port from 1 to 65535
     */
    List<Integer> ports() {
        List<Integer> out = new ArrayList<>();
        for (String e : entries) {
            int port;
            try {
                port = Integer.parseInt(e);
            } catch (NumberFormatException ex) {
                throw new IllegalArgumentException("'" + e + "' is not a port number");
            }
            if (port < 1 || port > 65535) {
                throw new IllegalArgumentException("port " + port + " is outside 1-65535");
            }
            out.add(port);
        }
        return out;
    }
}
