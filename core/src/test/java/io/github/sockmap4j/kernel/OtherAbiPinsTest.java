package io.github.sockmap4j.kernel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapConfig;
import io.github.sockmap4j.linux.bpf.Pins;
import io.github.sockmap4j.linux.bpf.RetiredSets;
import io.github.sockmap4j.testbed.Bpftool;
import io.github.sockmap4j.testsupport.TestKernel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A library process that finds pins of another ABI version refuses them, runs on TCP saying what
 * to do, and leaves them as they are: only the node agent, their owner, retires a set
 * (cli's AgentTest). The other version is played by pins whose meta map holds another number.
 */
@Tag("kernel")
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class OtherAbiPinsTest {
    @Test
    void aLibraryProcessRefusesPinsOfAnotherAbiAndLeavesThem() throws Exception {
        try (TestKernel k = TestKernel.start("other-abi")) {
            int other = Pins.ABI_VERSION + 1;
            Bpftool.run("map", "update", "pinned", k.pinDir.resolve("meta").toString(), "key", "0", "0", "0", "0",
                    "value", Integer.toString(other & 0xff), Integer.toString((other >> 8) & 0xff), "0", "0");
            List<String> pins;
            try (var files = Files.list(k.pinDir)) {
                pins = files.map(p -> p.getFileName().toString()).sorted().toList();
            }
            Path cg = TestKernel.newCgroup("other-abi-2");
            try (Sockmap s = Sockmap.open(SockmapConfig.fromSystemProperties().withPinDirectory(k.pinDir)
                    .withCgroup(cg).withRequired(false))) {
                assertFalse(s.isActive(), "never active on pins of another version");
                String cause = s.unavailabilityCause();
                assertTrue(cause.contains("another sockmap4j version (ABI " + other + ", this library has "
                        + Pins.ABI_VERSION + ")"), cause);
                assertTrue(cause.contains("start the agent of this version"), "says what to do: " + cause);
            } finally {
                Files.deleteIfExists(cg);
            }
            try (var files = Files.list(k.pinDir)) {
                assertEquals(pins, files.map(p -> p.getFileName().toString()).sorted().toList(), "pins left as they were");
            }
            assertTrue(RetiredSets.list(k.pinDir).isEmpty(), "nothing retired by a library process");
            int own = Pins.ABI_VERSION;
            Bpftool.run("map", "update", "pinned", k.pinDir.resolve("meta").toString(), "key", "0", "0", "0", "0",
                    "value", Integer.toString(own & 0xff), Integer.toString((own >> 8) & 0xff), "0", "0");
        }
    }
}
