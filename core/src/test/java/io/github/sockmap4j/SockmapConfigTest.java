package io.github.sockmap4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import org.junit.jupiter.api.Test;

class SockmapConfigTest {
    @Test
    void builderDefaults() {
        SockmapConfig c = SockmapConfig.builder().build();
        assertEquals(SockmapConfig.DEFAULT_PIN_DIRECTORY, c.pinDirectory());
        assertNull(c.cgroup());
        assertEquals(SockmapConfig.DEFAULT_MAX_SOCKETS, c.maxSockets());
        assertFalse(c.disabled());
        assertFalse(c.required());
        assertFalse(c.allowRootCgroup());
        assertTrue(c.probe());
        assertTrue(c.credit(), "writers hold for credit unless told not to");
    }

    @Test
    void toBuilderKeepsEveryValue() {
        SockmapConfig c = SockmapConfig.builder().pinDirectory(Path.of("/sys/fs/bpf/x")).cgroup(Path.of("/cg"))
                .maxSockets(10).disabled(true).required(true).allowRootCgroup(true).probe(false).credit(false).build();
        assertEquals(c, c.toBuilder().build());
        assertEquals(c.hashCode(), c.toBuilder().build().hashCode());
        assertNotEquals(c, c.withMaxSockets(11));
        assertEquals(Path.of("/other"), c.withPinDirectory(Path.of("/other")).pinDirectory());
        assertFalse(c.withRequired(false).required());
        assertTrue(c.toString().contains("maxSockets=10"), c.toString());
    }

    @Test
    void badValuesNameThemselves() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> SockmapConfig.builder().maxSockets(1).build());
        assertTrue(e.getMessage().contains("maxSockets=1"), e.getMessage());
        assertThrows(NullPointerException.class, () -> SockmapConfig.builder().pinDirectory(null).build());
    }

    @Test
    void systemPropertiesOverrideTheDefaults() {
        String[] keys = {"sockmap4j.pinDir", "sockmap4j.maxSockets", "sockmap4j.probe", "sockmap4j.disable",
            "sockmap4j.cgroup"};
        String[] saved = new String[keys.length];
        for (int i = 0; i < keys.length; i++) {
            saved[i] = System.getProperty(keys[i]);
        }
        try {
            System.setProperty("sockmap4j.pinDir", "/sys/fs/bpf/props");
            System.setProperty("sockmap4j.maxSockets", "77");
            System.setProperty("sockmap4j.probe", "false");
            System.setProperty("sockmap4j.disable", "true");
            System.setProperty("sockmap4j.cgroup", " ");
            SockmapConfig c = SockmapConfig.fromSystemProperties();
            assertEquals(Path.of("/sys/fs/bpf/props"), c.pinDirectory());
            assertEquals(77, c.maxSockets());
            assertFalse(c.probe());
            assertTrue(c.disabled());
            assertNull(c.cgroup(), "a blank cgroup means this process's own");
        } finally {
            for (int i = 0; i < keys.length; i++) {
                if (saved[i] == null) {
                    System.clearProperty(keys[i]);
                } else {
                    System.setProperty(keys[i], saved[i]);
                }
            }
        }
    }

    @Test
    void aPropertyThatIsNotANumberIsAnErrorNamingIt() {
        String saved = System.getProperty("sockmap4j.maxSockets");
        try {
            System.setProperty("sockmap4j.maxSockets", "abc");
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, SockmapConfig::fromSystemProperties);
            assertTrue(e.getMessage().contains("sockmap4j.maxSockets=abc"), e.getMessage());
        } finally {
            if (saved == null) {
                System.clearProperty("sockmap4j.maxSockets");
            } else {
                System.setProperty("sockmap4j.maxSockets", saved);
            }
        }
    }
}
