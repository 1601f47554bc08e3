package io.github.sockmap4j.agent.kubernetes;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;
import org.junit.jupiter.api.Test;

/** The ports annotation, as pods and Services are read: one parser. */
class PortsAnnotationTest {
    static PortsAnnotation of(String value) {
        return PortsAnnotation.of(value == null ? Map.of() : Map.of(PortsAnnotation.NAME, value), PortsAnnotation.NAME);
    }

    @Test
    void spacesAndEmptyEntriesDoNotCount() {
        PortsAnnotation a = of(" 8080 ,, 9000,grpc ,");
        assertEquals(List.of("8080", "9000", "grpc"), List.copyOf(a.entries()));
        assertTrue(a.names(8080, null));
        assertTrue(a.names(50051, "grpc"), "a Service port by its name");
        assertFalse(a.names(50051, null), "a pod's port by number only");
        assertFalse(a.names(80, "http"));
    }

    @Test
    void absentOrBlankIsEmpty() {
        assertTrue(of(null).isEmpty());
        assertTrue(of(" , ").isEmpty());
        assertTrue(PortsAnnotation.of(null, PortsAnnotation.NAME).isEmpty());
    }

    @Test
    void portsRefuseWhatIsNotAPortNamingIt() {
        assertEquals("'grpc' is not a port number",
                assertThrows(IllegalArgumentException.class, () -> of("8080,grpc").ports()).getMessage());
        assertEquals("port 70000 is outside 1-65535",
                assertThrows(IllegalArgumentException.class, () -> of("70000").ports()).getMessage());
        assertThrows(IllegalArgumentException.class, () -> of("0").ports());
    }

    @Property
    void everyPortListedIsReadBackInOrder(@ForAll @Size(min = 1, max = 8) List<@IntRange(min = 1, max = 65535) Integer> ports) {
        List<Integer> distinct = ports.stream().distinct().toList();
        String value = String.join(" , ", distinct.stream().map(String::valueOf).toList());
        PortsAnnotation a = of(value);
        assertEquals(distinct, a.ports());
        distinct.forEach(p -> assertTrue(a.names(p, null)));
    }
}
