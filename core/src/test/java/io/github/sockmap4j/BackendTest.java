package io.github.sockmap4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.internal.flow.FastPath;
import io.github.sockmap4j.internal.flow.FastPathAccess;
import io.github.sockmap4j.spi.RawSockets;
import io.github.sockmap4j.testsupport.ExportedSignatures;
import java.io.IOException;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The off mode as every caller sees it, without root: a {@code Sockmap} that is off opts in
 * nothing, answers zeros and "not accelerated", and says why; and no exported class hands out a
 * type of the library's internal packages.
 */
class BackendTest {
    static Sockmap off() throws IOException {
        return Sockmap.open(SockmapConfig.fromSystemProperties().withRequired(false).withDisabled(true));
    }

    @Test
    void theOffModeMovesNothingAndSaysWhy() throws Exception {
        try (Sockmap s = off()) {
            assertFalse(s.isActive());
            assertNull(s.fastPath());
            assertNull(FastPathAccess.of(s));
            assertTrue(s.unavailabilityCause().contains("sockmap4j.disable=true"), s.unavailabilityCause());
            assertNull(s.coverageProblem(), "no kernel objects here to cover anything");
            assertEquals(Fionread.NOT_PROBED, s.fionread());
            assertEquals(SockmapStats.EMPTY, s.stats());
            assertEquals(-1, s.verdictRunCount());
            assertTrue(s.cgroup().isEmpty());
            assertTrue(s.toString().startsWith("Sockmap[off: "), s.toString());
            try (OptIn o = s.optIn(8080)) {
                assertFalse(o.active());
                assertEquals(8080, o.port());
                o.setBound(65536);
                assertThrows(IllegalArgumentException.class, () -> o.setBound(-2));
            }
            RawSockets raw = RawSockets.of(s);
            assertFalse(raw.isAccelerated(0));
            assertNull(raw.readCounter(0, false));
            assertNull(raw.writeCredit(0, false));
        }
    }

    @Test
    void aClosedSockmapSaysClosedAndOptsNothingIn() throws Exception {
        Sockmap s = off();
        s.close();
        s.close();
        assertEquals("closed", s.unavailabilityCause());
        assertThrows(SockmapUnavailableException.class, s::ensureActive);
        try (OptIn o = s.optIn(8081)) {
            assertFalse(o.active());
        }
    }

    @Test
    void badInputIsRefusedInEveryModeBeforeAnyModeSeesIt() throws Exception {
        try (Sockmap s = off()) {
            assertThrows(IllegalArgumentException.class, () -> s.optIn(0));
            assertThrows(IllegalArgumentException.class, () -> s.optIn(70000));
            assertThrows(IllegalArgumentException.class, () -> s.optIn(80, null, 0, -5));
        }
    }

    @Test
    void theAccessorIsInstalledOnceByTheClass() throws Exception {
        try (Sockmap s = off()) {
            assertNull(FastPathAccess.of(s));
        }
        assertThrows(IllegalStateException.class, () -> FastPathAccess.install(o -> (FastPath) null));
    }

    /**
     * Core's exported packages' public and protected methods and fields: none takes or returns a
     * type of {@code io.github.sockmap4j.internal} or of the {@code io.github.sockmap4j.linux}
     * module, which other modules cannot name (a public accessor that exists only for the
     * library's own packages would).
     */
    @Test
    void noExportedSignatureNamesAnInternalType() throws Exception {
        assertTrue(ExportedSignatures.classes(Sockmap.class, EXPORTED).size() > 20, "found the exported classes");
        assertEquals(List.of(), ExportedSignatures.leaks(Sockmap.class, EXPORTED));
    }

    /** What core's module descriptor exports. */
    private static final String[] EXPORTED = {"io.github.sockmap4j", "io.github.sockmap4j.spi"};
}
