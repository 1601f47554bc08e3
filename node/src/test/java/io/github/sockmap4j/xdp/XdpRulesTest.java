package io.github.sockmap4j.xdp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The rules file format (no kernel: parsing only). */
class XdpRulesTest {
    @TempDir
    Path dir;

    XdpRules parse(String text) throws IOException {
        Path f = dir.resolve("rules");
        Files.writeString(f, text);
        return XdpRules.parse(f);
    }

    @Test
    void readsEveryKindOfRuleInOrder() throws Exception {
        XdpRules r = parse("""
                # a comment line
                default drop
                deny 10.99.0.0/16     # trailing comment
                allow fd00::/8
                deny tcp 22
                pass udp 53
                """);
        assertEquals(XdpFilter.Action.DROP, r.defaultAction());
        assertEquals(4, r.rules().size());
        XdpRules.Rule first = r.rules().get(0);
        assertEquals(XdpFilter.Action.DROP, first.action());
        assertEquals(InetAddress.getByName("10.99.0.0"), first.network());
        assertEquals(16, first.bits());
        assertEquals(8, r.rules().get(1).bits());
        assertEquals(XdpFilter.Protocol.TCP, r.rules().get(2).protocol());
        assertEquals(22, r.rules().get(2).port());
        assertNull(r.rules().get(2).network());
        assertEquals(XdpFilter.Action.PASS, r.rules().get(3).action());
    }

    @Test
    void anEmptyFilePassesEverything() throws Exception {
        XdpRules r = parse("\n# nothing\n");
        assertEquals(XdpFilter.Action.PASS, r.defaultAction());
        assertTrue(r.rules().isEmpty());
    }

    @Test
    void anUnknownActionNamesTheLineAndTheForms() {
        IOException e = assertThrows(IOException.class, () -> parse("allow 10.0.0.0/8\nblock tcp 80\n"));
        assertTrue(e.getMessage().contains(":2: block tcp 80"), e.getMessage());
        assertTrue(e.getMessage().contains("allow|deny tcp|udp PORT"), e.getMessage());
    }

    @Test
    void aBadNumberNamesTheLine() {
        IOException e = assertThrows(IOException.class, () -> parse("deny tcp eighty\n"));
        assertTrue(e.getMessage().contains("not a number") && e.getMessage().contains(":1:"), e.getMessage());
    }

    @Test
    void aLineOfNoKnownShapeIsRefused() {
        IOException e = assertThrows(IOException.class, () -> parse("deny\n"));
        assertTrue(e.getMessage().contains("cannot read the rule"), e.getMessage());
    }

    @Test
    void actionWireValuesDoNotDependOnDeclarationOrder() {
        assertEquals(0, XdpFilter.Action.PASS.wire);
        assertEquals(1, XdpFilter.Action.DROP.wire);
    }
}
