package io.github.sockmap4j.internal.bpf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import java.io.IOException;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.StructLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Each Java layout of a shared struct against the BTF of the compiled BPF object (as Cilium's
 * bpf_alignchecker does): same size, same member offsets.
 */
class LayoutTest {
    static final Map<String, StructLayout> JAVA = Map.ofEntries(
            Map.entry("sm4j_sock_key", SockKeyLayout.LAYOUT),
            Map.entry("sm4j_policy_key", PolicyKeyLayout.LAYOUT),
            Map.entry("sm4j_policy", PolicyKeyLayout.VALUE),
            Map.entry("sm4j_sock_state", SockStateLayout.LAYOUT),
            Map.entry("sm4j_rx", ReadSlotLayout.RX),
            Map.entry("sm4j_slot", ReadSlotLayout.SLOT),
            Map.entry("sm4j_watch", WatchLayout.WATCH),
            Map.entry("sm4j_config", WatchLayout.CONFIG));

    record BtfStruct(long size, Map<String, Long> offsets) {
    }

    static Map<String, BtfStruct> btf() throws IOException, InterruptedException {
        Path obj = Files.createTempFile("sockmap4j", ".bpf.o");
        try {
            Files.write(obj, KernelSockmap.embeddedObject());
            Process p = new ProcessBuilder("bpftool", "btf", "dump", "file", obj.toString(), "format", "raw")
                    .redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            p.waitFor(30, TimeUnit.SECONDS);
            Map<String, BtfStruct> structs = new HashMap<>();
            Pattern head = Pattern.compile("^\\[\\d+] STRUCT '(\\w+)' size=(\\d+) vlen=(\\d+)");
            Pattern member = Pattern.compile("^\\s+'(\\w+)' type_id=\\d+ bits_offset=(\\d+)");
            String[] lines = out.split("\n");
            for (int i = 0; i < lines.length; i++) {
                Matcher h = head.matcher(lines[i]);
                if (h.find()) {
                    Map<String, Long> offs = new LinkedHashMap<>();
                    int n = Integer.parseInt(h.group(3));
                    for (int j = 1; j <= n; j++) {
                        Matcher m = member.matcher(lines[i + j]);
                        if (m.find()) {
                            offs.put(m.group(1), Long.parseLong(m.group(2)) / 8);
                        }
                    }
                    structs.put(h.group(1), new BtfStruct(Long.parseLong(h.group(2)), offs));
                }
            }
            return structs;
        } finally {
            Files.deleteIfExists(obj);
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"sm4j_sock_key", "sm4j_policy_key", "sm4j_policy", "sm4j_sock_state", "sm4j_rx",
        "sm4j_slot", "sm4j_watch", "sm4j_config"})
    void javaLayoutMatchesBtf(String name) throws Exception {
        BtfStruct b = btf().get(name);
        assertNotNull(b, name + " not in the object's BTF");
        StructLayout j = JAVA.get(name);
        assertEquals(b.size(), j.byteSize(), name + " size");
        assertEquals(b.offsets().keySet().stream().toList(),
                j.memberLayouts().stream().map(l -> l.name().orElseThrow()).toList(), name + " members");
        for (var e : b.offsets().entrySet()) {
            assertEquals(e.getValue(), j.byteOffset(MemoryLayout.PathElement.groupElement(e.getKey())),
                    name + "." + e.getKey() + " offset");
        }
    }
}
