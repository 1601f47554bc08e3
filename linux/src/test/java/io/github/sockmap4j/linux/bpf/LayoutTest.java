package io.github.sockmap4j.linux.bpf;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.lang.foreign.StructLayout;
import java.util.Map;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Each Java layout of a struct shared with the BPF programs against the BTF of the compiled
 * object (as Cilium's bpf_alignchecker does): same size, same members, same offsets. And every
 * constant the Java side mirrors (counter indexes, flags, the ABI version, the unbounded value,
 * the XDP actions and counters) against the header it comes from. Needs no privilege.
 */
class LayoutTest {
    static final Map<String, StructLayout> SOCKMAP = Map.ofEntries(
            Map.entry("sm4j_sock_key", SockKeyLayout.LAYOUT),
            Map.entry("sm4j_policy_key", PolicyKeyLayout.LAYOUT),
            Map.entry("sm4j_policy", PolicyKeyLayout.VALUE),
            Map.entry("sm4j_sock_state", SockStateLayout.LAYOUT),
            Map.entry("sm4j_rx", ReadSlotLayout.RX),
            Map.entry("sm4j_slot", ReadSlotLayout.SLOT),
            Map.entry("sm4j_watch", WatchLayout.WATCH),
            Map.entry("sm4j_config", WatchLayout.CONFIG),
            Map.entry("sm4j_svc_key", ServiceLayout.KEY),
            Map.entry("sm4j_endpoint", ServiceLayout.ENDPOINT),
            Map.entry("sm4j_svc", ServiceLayout.SERVICE),
            Map.entry("sm4j_svc_sock", ServiceLayout.SOCK),
            Map.entry("sm4j_local_key", LocalPeersMap.KEY),
            Map.entry("sm4j_mesh", MeshMap.POD),
            Map.entry("sm4j_mesh_addr_key", MeshMap.ADDR_KEY),
            Map.entry("sm4j_mesh_addr", MeshMap.ADDR));
    static final Map<String, StructLayout> XDP = Map.of(
            "xdpf_src_key", XdpLayout.SRC_KEY,
            "xdpf_port_key", XdpLayout.PORT_KEY,
            "xdpf_rule", XdpLayout.RULE,
            "xdpf_config", XdpLayout.CONFIG);

    static Btf sockmapBtf;
    static Btf xdpBtf;

    @BeforeAll
    static void readBtf() throws Exception {
        sockmapBtf = Btf.ofResource(ObjectLoader.class, ObjectLoader.OBJECT_RESOURCE);
        xdpBtf = Btf.ofResource(XdpLayout.class, XdpLayout.OBJECT_RESOURCE);
    }

    @ParameterizedTest
    @ValueSource(strings = {"sm4j_sock_key", "sm4j_policy_key", "sm4j_policy", "sm4j_sock_state", "sm4j_rx",
        "sm4j_slot", "sm4j_watch", "sm4j_config", "sm4j_svc_key", "sm4j_endpoint", "sm4j_svc", "sm4j_svc_sock",
        "sm4j_local_key", "sm4j_mesh", "sm4j_mesh_addr_key", "sm4j_mesh_addr"})
    void sockmapLayoutMatchesBtf(String name) {
        sockmapBtf.assertMatches(name, SOCKMAP.get(name), false);
    }

    @ParameterizedTest
    @ValueSource(strings = {"xdpf_src_key", "xdpf_port_key", "xdpf_rule", "xdpf_config"})
    void xdpLayoutMatchesBtf(String name) {
        xdpBtf.assertMatches(name, XDP.get(name), false);
    }

    @Test
    void counterIndexesMatchTheHeader() throws Exception {
        CHeader h = CHeader.ofProject("sockmap4j.h");
        for (Counter c : Counter.values()) {
            assertEquals(h.get("SM4J_CTR_" + c.name()), c.index(), c.name());
        }
        assertEquals(h.get("SM4J_CTR_MAX"), Counter.values().length, "one Java counter per C counter");
    }

    @Test
    void abiVersionFlagsAndUnboundedMatchTheHeader() throws Exception {
        CHeader h = CHeader.ofProject("sockmap4j.h");
        assertEquals(h.get("SM4J_ABI_VERSION"), Pins.ABI_VERSION, "ABI version");
        assertEquals(h.get("SM4J_SOCK_TCP"), SockStateLayout.TCP, "SM4J_SOCK_TCP");
        assertEquals(h.get("SM4J_WATCH_WANTED"), WatchLayout.WANTED, "SM4J_WATCH_WANTED");
        assertEquals(h.get("SM4J_WATCH_FIXED"), WatchLayout.FIXED, "SM4J_WATCH_FIXED");
        assertEquals(h.get("SM4J_WATCH_EXACT"), WatchLayout.EXACT, "SM4J_WATCH_EXACT");
        assertEquals(h.get("SM4J_WATCH_FIXED"), WatchLayout.FIXED, "SM4J_WATCH_FIXED");
        assertEquals(h.get("SM4J_UNBOUNDED"), Integer.toUnsignedLong(PolicyKeyLayout.UNBOUNDED), "SM4J_UNBOUNDED");
        assertEquals(h.get("SM4J_SVC_ENDPOINTS"), ServiceLayout.ENDPOINTS, "SM4J_SVC_ENDPOINTS");
        assertEquals(h.get("SM4J_SVC_LOCAL_ONLY"), ServiceLayout.LOCAL_ONLY, "SM4J_SVC_LOCAL_ONLY");
        assertEquals(h.get("SM4J_MESH_SKIP_PORTS"), MeshMap.SKIP_PORTS, "SM4J_MESH_SKIP_PORTS");
    }

    @Test
    void xdpConstantsMatchTheHeader() throws Exception {
        CHeader h = CHeader.ofProject("xdp_filter.h");
        assertEquals(h.get("XDPF_MAX_RULES"), XdpLayout.MAX_RULES);
        assertEquals(h.get("XDPF_PASS"), XdpLayout.XDPF_PASS);
        assertEquals(h.get("XDPF_DROP"), XdpLayout.XDPF_DROP);
        assertEquals(h.get("XDPF_CTR_PASSED"), XdpLayout.CTR_PASSED);
        assertEquals(h.get("XDPF_CTR_DROPPED"), XdpLayout.CTR_DROPPED);
        assertEquals(h.get("XDPF_CTR_MALFORMED"), XdpLayout.CTR_MALFORMED);
        assertEquals(h.get("XDPF_CTR_DEFAULT"), XdpLayout.CTR_DEFAULT);
        assertEquals(h.get("XDPF_CTR_MAX"), XdpLayout.CTR_DEFAULT + 1, "no outcome counter unread");
    }

    @Test
    void headerParserCountsEnumsAsC() {
        CHeader h = CHeader.parse("#define B 10\n/* x */ enum e { A = B, C, D = B + 5, E, };\n");
        assertEquals(10, h.get("A"));
        assertEquals(11, h.get("C"));
        assertEquals(15, h.get("D"));
        assertEquals(16, h.get("E"));
    }
}
