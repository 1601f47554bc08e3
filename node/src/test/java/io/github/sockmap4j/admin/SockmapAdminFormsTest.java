package io.github.sockmap4j.admin;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link SockmapAdmin} has one form, without root: an object a pin directory, from {@code of} or
 * {@code up}; no static method takes a pin directory, and what concerns no directory stays static.
 */
class SockmapAdminFormsTest {
    @Test
    void noStaticMethodTakesAPinDirectoryButOf() {
        for (Method m : SockmapAdmin.class.getMethods()) {
            if (m.getDeclaringClass() != SockmapAdmin.class || !Modifier.isStatic(m.getModifiers())) {
                continue;
            }
            Class<?>[] p = m.getParameterTypes();
            assertFalse(p.length > 0 && p[0] == Path.class && !m.getName().equals("of"),
                    m + ": the instance of(pinDirectory) is the one form for a directory");
            assertFalse(m.isAnnotationPresent(Deprecated.class), m + " is not deprecated");
        }
    }

    @Test
    void anAdminOfADirectoryWithNoPinsAnswersAndTouchesNothing(@TempDir Path dir) throws Exception {
        SockmapAdmin admin = SockmapAdmin.of(dir);
        assertEquals(dir, admin.pinDirectory());
        assertFalse(admin.isUp());
        assertFalse(admin.agentRunning(), "no agent listens for a directory nobody set up");
        assertEquals(List.of(), admin.retiredSets());
        assertTrue(Files.isDirectory(dir), "nothing removed, nothing made");
        assertThrows(NullPointerException.class, () -> SockmapAdmin.of(null));
    }
}
