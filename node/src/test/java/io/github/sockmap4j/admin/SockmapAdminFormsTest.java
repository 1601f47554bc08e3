package io.github.sockmap4j.admin;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link SockmapAdmin}'s two forms, without root: one object a pin directory, and the static
 * methods of 0.1 that take the directory first, each deprecated for removal and answering as
 * {@code SockmapAdmin.of(dir)} does; what concerns no directory stays static and is not deprecated.
 */
class SockmapAdminFormsTest {
    @Test
    void everyStaticFormTakingADirectoryIsTheDeprecatedTwinOfAnInstanceMethod() throws Exception {
        int twins = 0;
        for (Method m : SockmapAdmin.class.getMethods()) {
            if (m.getDeclaringClass() != SockmapAdmin.class || !Modifier.isStatic(m.getModifiers())) {
                continue;
            }
            Class<?>[] p = m.getParameterTypes();
            boolean takesDirectory = p.length > 0 && p[0] == Path.class && !m.getName().equals("of");
            Deprecated d = m.getAnnotation(Deprecated.class);
            if (!takesDirectory) {
                assertNull(d, m + " concerns no directory: not deprecated");
                continue;
            }
            assertTrue(d != null && d.forRemoval(), m + " is deprecated for removal");
            Method twin = SockmapAdmin.class.getMethod(m.getName(), Arrays.copyOfRange(p, 1, p.length));
            assertFalse(Modifier.isStatic(twin.getModifiers()), twin + " is the instance form");
            assertEquals(m.getReturnType(), twin.getReturnType(), m.getName());
            twins++;
        }
        assertEquals(15, twins, "the 0.1 directory methods");
    }

    @Test
    @SuppressWarnings("removal")
    void bothFormsAnswerAlikeForADirectoryWithNoPins(@TempDir Path dir) throws Exception {
        SockmapAdmin admin = SockmapAdmin.of(dir);
        assertEquals(dir, admin.pinDirectory());
        assertEquals(SockmapAdmin.agentSocket(dir), admin.agentSocket());
        assertFalse(admin.isUp());
        assertEquals(SockmapAdmin.isUp(dir), admin.isUp());
        assertFalse(admin.agentRunning(), "no agent listens for a directory nobody set up");
        assertEquals(SockmapAdmin.agentRunning(dir), admin.agentRunning());
        assertEquals(List.of(), admin.retiredSets());
        assertEquals(SockmapAdmin.retiredSets(dir), admin.retiredSets());
        assertTrue(Files.isDirectory(dir), "nothing removed, nothing made");
        assertThrows(NullPointerException.class, () -> SockmapAdmin.of(null));
    }
}
