package io.github.sockmap4j.linux.bpf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import java.nio.file.Path;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import org.junit.jupiter.api.Test;

/** Lock directory names: one per pin directory, a different one for each. */
class LockDirNameTest {
    @Test
    void pinDirectoriesThatDifferByASlashOrAnUnderscoreShareNothing() {
        assertNotEquals(LockDir.pathFor(Path.of("/sys/fs/bpf/red4")), LockDir.pathFor(Path.of("/sys/fs/bpf_red4")));
        assertEquals("_sys_fs_bpf_sockmap4j", LockDir.name("/sys/fs/bpf/sockmap4j"), "the usual name reads as before");
    }

    @Property(tries = 2000)
    void distinctPathsGetDistinctNames(@ForAll("paths") String a, @ForAll("paths") String b) {
        if (!a.equals(b)) {
            assertNotEquals(LockDir.name(a), LockDir.name(b), a + " and " + b);
        }
    }

    @Provide
    Arbitrary<String> paths() {
        // The characters the encoding treats specially, and one it does not.
        return Arbitraries.strings().withChars('/', '_', '=', 'a').ofMinLength(1).ofMaxLength(8).map(s -> "/" + s);
    }
}
