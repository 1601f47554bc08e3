package io.github.sockmap4j.cli;

import io.github.sockmap4j.admin.Rule;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.InetAddress;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/** Parsing only: what the CLI accepts and how it refuses, without touching a kernel. */
class CommandLineTest {
    record Result(int code, String out, String err) {
    }

    static Result run(String... args) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        int code = SockmapCli.run(new PrintWriter(out, true), new PrintWriter(err, true), args);
        return new Result(code, out.toString(), err.toString());
    }

    @Test
    void aPortAloneMatchesEveryServerAddress() {
        Rule t = Rule.parse("8080");
        assertEquals(8080, t.port());
        assertNull(t.network());
    }

    @Test
    void aPortWithACidr() throws Exception {
        Rule t = Rule.parse("8080/10.1.0.0/16");
        assertEquals(InetAddress.getByName("10.1.0.0"), t.network());
        assertEquals(16, t.prefixBits());
        assertEquals(128, Rule.parse("9090/fd00::1").prefixBits(), "a bare address is one host");
    }

    @Test
    void notAPortSaysWhatIsExpected() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Rule.parse("http"));
        assertTrue(e.getMessage().contains("expected PORT or PORT/CIDR"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> Rule.parse("70000"));
        assertTrue(e.getMessage().contains("1..65535"), e.getMessage());
    }

    @Test
    void aCommandRefusedForWantOfPrivilegesSaysWhatNeedsRoot() {
        String refused = "bpf_obj_get failed: EACCES (Permission denied) (/sys/fs/bpf/sockmap4j/counters)";
        String note = SockmapCli.withoutPrivileges("stats", refused, 0L);
        assertTrue(note.contains("'stats' opens the kernel's pinned maps, which needs root"), note);
        assertTrue(note.contains("sudo"), note);
        assertEquals("", SockmapCli.withoutPrivileges("stats", refused, 1L << 39), "with CAP_BPF it was not that");
        assertEquals("", SockmapCli.withoutPrivileges("stats", refused, 1L << 21), "nor with CAP_SYS_ADMIN");
        assertEquals("", SockmapCli.withoutPrivileges("stats", "no such port", 0L), "another failure");
        assertTrue(SockmapCli.withoutPrivileges("up", "bpf_prog_load failed: EPERM (Operation not permitted)", 0L)
                .contains("'up'"));
    }

    @Test
    void anUnknownCommandIsAUsageError() {
        Result r = run("frobnicate");
        assertEquals(2, r.code());
        assertTrue(r.err().contains("frobnicate"), r.err());
    }

    @Test
    void allowWithABadPortIsAUsageErrorNamingIt() {
        Result r = run("allow", "eighty");
        assertEquals(2, r.code());
        assertTrue(r.err().contains("not a port: 'eighty'"), r.err());
    }

    @Test
    void aNegativeBoundIsAUsageErrorNotAHugeOne() {
        Result r = run("allow", "8080", "--bound", "-5");
        assertEquals(2, r.code());
        assertTrue(r.err().contains("a bound is 0 (each receiver's) or a positive number of bytes: '-5'"), r.err());
    }

    @Test
    void aHostNameInACidrIsAUsageErrorNeverResolved() {
        for (String target : new String[] {"9000/localhost/8", "9000/ad.be", "9000/example.com/16"}) {
            Result r = run("deny", target);
            assertEquals(2, r.code(), target);
            assertTrue(r.err().contains("names are never resolved"), r.err());
        }
    }

    @Test
    void negativeDurationsAreUsageErrors() {
        Result r = run("stats", "--watch", "-1");
        assertEquals(2, r.code());
        assertTrue(r.err().contains("--watch takes 0 or more seconds: -1"), r.err());
        // Checked before the rules file is read, and so before anything could attach.
        r = run("xdp", "sm4j-none0", "/nonexistent-rules", "--seconds", "-1");
        assertEquals(2, r.code());
        assertTrue(r.err().contains("--seconds takes 1 or more: -1"), r.err());
    }

    @Test
    void aPrefixLongerThanItsAddressIsAUsageError() {
        Result r = run("allow", "8080/10.0.0.0/33");
        assertEquals(2, r.code());
        assertTrue(r.err().contains("prefix must be 0..32 for 10.0.0.0"), r.err());
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Rule.parse("9090/fd00::/129"));
        assertTrue(e.getMessage().contains("0..128"), e.getMessage());
    }

    @Test
    void versionPrintsTheName() {
        Result r = run("--version");
        assertEquals(0, r.code());
        assertTrue(r.out().startsWith("sockmap4j "), r.out());
    }

    @Test
    void jsonEscapesQuotesAndKeepsNumbersRaw() {
        assertEquals("{\"a\":1,\"b\":\"x\\\"y\",\"c\":true,\"d\":\"1\"}",
                SockmapCli.json("a", 1, "b", "x\"y", "c", true, "d", "1"));
    }

    @Test
    void everySubcommandHasHelp() {
        for (String sub : new String[] {"up", "status", "stats", "allow", "deny", "rules", "down", "xdp", "agent"}) {
            Result r = run(sub, "--help");
            assertEquals(0, r.code(), sub + ": " + r.err());
            assertTrue(r.out().contains("Usage: sockmap4j " + sub), sub + ": " + r.out());
        }
    }

    @Test
    void thePinDirectoryPropertyIsTheDefault() {
        String saved = System.getProperty("sockmap4j.pinDir");
        try {
            System.setProperty("sockmap4j.pinDir", "/sys/fs/bpf/sockmap4j-from-property-test");
            Result r = run("--json", "status");
            assertEquals(3, r.code(), "nothing pinned there");
            assertTrue(r.out().contains("\"pinDir\":\"/sys/fs/bpf/sockmap4j-from-property-test\""), r.out());
        } finally {
            if (saved == null) {
                System.clearProperty("sockmap4j.pinDir");
            } else {
                System.setProperty("sockmap4j.pinDir", saved);
            }
        }
    }

    @Test
    void byTcpSaysWhatItLeavesOut() {
        io.github.sockmap4j.SockmapStats none = io.github.sockmap4j.SockmapStats.of(new long[64], 0);
        assertEquals("", SockmapCli.notCounted(none), "nothing left out");
        io.github.sockmap4j.SockmapStats one = new io.github.sockmap4j.SockmapStats(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                0, 1, 0, 0, 0, 0, none.mesh());
        String said = SockmapCli.notCounted(one);
        assertTrue(said.contains("1 accepted connection whose client was not registered"), said);
    }
}
