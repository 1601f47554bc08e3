package io.github.sockmap4j.agent.control;

import io.github.sockmap4j.linux.bpf.PolicyRule;
import io.github.sockmap4j.control.AgentRequest;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.nio.file.Path;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** Who may opt in what, from a policy file's lines. */
class AgentPolicyTest {
    static final Path FILE = Path.of("/etc/sockmap4j/policy");
    static final AgentPolicy POLICY = AgentPolicy.parse(FILE, List.of(
            "# who      ports           networks             largest bound",
            "uid 1000   8080,9000-9100  10.0.0.0/8,fd00::/8  4194304",
            "gid 2000   *               *                    1048576  # anything, small bounds",
            ""));

    static AgentRequest allow(int port, String net, int bits, int bound) throws Exception {
        return new AgentRequest(AgentRequest.Verb.ALLOW,
                PolicyRule.of(port, net == null ? null : InetAddress.getByName(net), bits), bound);
    }

    @Test
    void aGrantCoversItsPortsNetworksAndBounds() throws Exception {
        assertNull(POLICY.refusal(1000, Set.of(1000), allow(8080, "10.1.2.3", 32, 0)));
        assertNull(POLICY.refusal(1000, Set.of(1000), allow(9050, "10.1.0.0", 16, 4194304)));
        assertNull(POLICY.refusal(1000, Set.of(1000), allow(8080, "fd00::1", 128, 1)));
        String port = POLICY.refusal(1000, Set.of(1000), allow(8081, "10.1.2.3", 32, 0));
        assertTrue(port.contains("uid 1000 may not opt in port 8081") && port.contains(FILE.toString()), port);
        String outside = POLICY.refusal(1000, Set.of(1000), allow(8080, "11.0.0.1", 32, 0));
        assertTrue(outside != null && outside.contains("may not opt in port 8080 for 11.0.0.1 (128 key bits)"),
                "outside its networks: " + outside);
        String wider = POLICY.refusal(1000, Set.of(1000), allow(8080, "10.0.0.0", 7, 0));
        assertTrue(wider != null && wider.contains("may not opt in port 8080 for 10.0.0.0 (103 key bits)"),
                "wider than its network: " + wider);
        String any = POLICY.refusal(1000, Set.of(1000), allow(8080, null, 0, 0));
        assertTrue(any != null && any.contains("may not opt in port 8080 for any address"), "any address needs '*': " + any);
        String bound = POLICY.refusal(1000, Set.of(1000), allow(8080, "10.1.2.3", 32, 4194305));
        assertTrue(bound.contains("bounds up to 4194304"), bound);
    }

    @Test
    void aGroupGrantCountsSupplementaryGroups() throws Exception {
        assertNull(POLICY.refusal(1234, Set.of(1234, 2000), allow(443, null, 0, 1048576)));
        assertNotNull(POLICY.refusal(1234, Set.of(1234), allow(443, null, 0, 0)));
    }

    @Test
    void onlyRootMakesAnUnboundedRuleAndRootMayDoAnything() throws Exception {
        String no = POLICY.refusal(1000, Set.of(1000, 2000), allow(8080, "10.1.2.3", 32, -1));
        assertTrue(no.contains("only root may make a rule unbounded"), no);
        assertNull(POLICY.refusal(0, Set.of(0), allow(1, null, 0, -1)));
        assertTrue(AgentPolicy.rootOnly().refusal(1000, Set.of(1000), allow(8080, null, 0, 0))
                .contains("without a policy file"));
    }

    @Test
    void badLinesNameTheLineAndWhatIsWrong() {
        for (String[] bad : new String[][] {
            {"user 1000 80 * 0", "neither uid nor gid"},
            {"uid 1000 80 *", "5 fields"},
            {"uid 1000 0-80 * 0", "ports must be 1..65535"},
            {"uid 1000 80 10.0.0.0/33 0", "prefix must be 0..32"},
            {"uid 1000 80 example.com 0", "not an address literal"},
            {"uid 1000 80 ad.be 0", "names are never resolved"},
            {"quota uid 1000", "a quota line is"},
            {"quota default -1", "a quota is 0 or more rules"},
            {"uid 1000 80 * -1", "unbounded is for root only"},
        }) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> AgentPolicy.parse(FILE, List.of("# ok", bad[0])));
            assertTrue(e.getMessage().startsWith(FILE + ":2: ") && e.getMessage().contains(bad[1]), e.getMessage());
        }
    }

    @Test
    void aServiceNeedsAGrantForItsAddressAndEachEndpoint() {
        AgentPolicy p = AgentPolicy.parse(FILE, List.of("uid 1000 6334,16334 10.96.0.0/12,10.244.0.0/16 0"));
        var ok = new io.github.sockmap4j.linux.bpf.ServiceMap.Service(
                new java.net.InetSocketAddress(InetAddress.ofLiteral("10.96.0.10"), 6334),
                List.of(new java.net.InetSocketAddress(InetAddress.ofLiteral("10.244.1.2"), 16334)), List.of(), false);
        assertNull(p.serviceRefusal(1000, Set.of(1000), ok));
        var elsewhere = new io.github.sockmap4j.linux.bpf.ServiceMap.Service(ok.vip(), ok.local(),
                List.of(new java.net.InetSocketAddress(InetAddress.ofLiteral("192.168.1.1"), 16334)), false);
        String no = p.serviceRefusal(1000, Set.of(1000), elsewhere);
        assertTrue(no.contains("its endpoint 192.168.1.1:16334 is not in a grant") && no.contains(FILE.toString()), no);
        String other = p.serviceRefusal(1001, Set.of(1001), ok);
        assertTrue(other.contains("uid 1001 may not put the Service 10.96.0.10:6334: its address"), other);
        assertNull(p.serviceRefusal(0, Set.of(0), elsewhere), "root may put any");
    }
}
