package io.github.sockmap4j.linux.bpf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.StructLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The structs of a BTF blob (a compiled BPF object, or the kernel's own), as bpftool dumps them:
 * size and member byte offsets. Reading a file's BTF needs no privilege.
 */
public record Btf(Map<String, Struct> structs) {
    public record Struct(long size, Map<String, Long> offsets) {
    }

    /** The BTF of an object embedded in the linux jar, by its resource name next to {@code anchor}. */
    public static Btf ofResource(Class<?> anchor, String resource) throws IOException, InterruptedException {
        Path obj = Files.createTempFile("sockmap4j", ".bpf.o");
        try (var in = anchor.getResourceAsStream(resource)) {
            if (in == null) {
                throw new IOException(resource + " is not next to " + anchor.getName());
            }
            Files.write(obj, in.readAllBytes());
            return of(obj);
        } finally {
            Files.deleteIfExists(obj);
        }
    }

    public static Btf of(Path file) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(io.github.sockmap4j.testbed.Sh.tool("bpftool"), "btf", "dump", "file", file.toString(), "format", "raw")
                .redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
            throw new IOException("bpftool btf dump file " + file + " failed: " + out);
        }
        Map<String, Struct> structs = new HashMap<>();
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
                structs.putIfAbsent(h.group(1), new Struct(Long.parseLong(h.group(2)), offs));
            }
        }
        return new Btf(structs);
    }

    public Struct get(String name) {
        Struct s = structs.get(name);
        if (s == null) {
            throw new AssertionError(name + " is not in the BTF");
        }
        return s;
    }

    /** The named members of a Java layout, in order (padding has no name). */
    public static List<String> members(StructLayout layout) {
        return layout.memberLayouts().stream().filter(l -> l.name().isPresent()).map(l -> l.name().get()).toList();
    }

    /**
     * Fails unless {@code layout} is the struct {@code name} of this BTF: same size and members in
     * the same order at the same offsets; or, for a {@code prefix}, no larger and its named members
     * where the BTF has them.
     */
    public void assertMatches(String name, StructLayout layout, boolean prefix) {
        Struct b = get(name);
        if (prefix) {
            assertTrue(layout.byteSize() <= b.size(), name + " is a prefix");
        } else {
            assertEquals(b.size(), layout.byteSize(), name + " size");
            assertEquals(List.copyOf(b.offsets().keySet()), members(layout), name + " members");
        }
        for (String member : members(layout)) {
            assertEquals(b.offsets().get(member), offset(layout, member), name + "." + member + " offset");
        }
    }

    public static long offset(StructLayout layout, String member) {
        return layout.byteOffset(MemoryLayout.PathElement.groupElement(member));
    }
}
