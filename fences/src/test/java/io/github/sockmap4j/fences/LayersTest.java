package io.github.sockmap4j.fences;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * Core's packages, the linux and control modules' under them and the node module's over them in layers, read
 * from their sources' imports (no root), from the fences module, which depends on none of them: each package imports only packages of lower layers, so no import runs back up and
 * there is no cycle. A new import that does fails here with the file that has it.
 */
class LayersTest {
    private static final String BASE = "io.github.sockmap4j";
    /** Lowest first; a package may import those before it. */
    static final List<List<String>> LAYERS = List.of(
            List.of("linux.ffi"),
            List.of("linux.net"),
            List.of("linux.sys"),
            List.of("linux.bpf"),
            List.of("control"),
            List.of("internal.jfr"),
            List.of("internal.flow"),
            List.of(""),
            List.of("spi", "admin", "xdp"));
    private static final Pattern IMPORT = Pattern.compile("^import (?:static )?(io\\.github\\.sockmap4j[\\w.]*?)\\.[A-Z]",
            Pattern.MULTILINE);

    @Test
    void everyImportRunsDown() throws IOException {
        Map<String, Integer> layer = new TreeMap<>();
        for (int i = 0; i < LAYERS.size(); i++) {
            for (String p : LAYERS.get(i)) {
                layer.put(p.isEmpty() ? BASE : BASE + "." + p, i);
            }
        }
        List<String> up = new ArrayList<>();
        TreeSet<String> unplaced = new TreeSet<>();
        int files = 0;
        // core's sources, the linux module's under it and the node module's over it, one layering
        for (Path src : List.of(Path.of("../core/src/main/java"), Path.of("../linux/src/main/java"),
                Path.of("../control/src/main/java"), Path.of("../node/src/main/java"))) {
            try (Stream<Path> all = Files.walk(src.resolve("io/github/sockmap4j"))) {
                for (Path f : all.filter(p -> p.toString().endsWith(".java")).toList()) {
                    String pkg = src.relativize(f.getParent()).toString().replace('/', '.');
                    Integer own = layer.get(pkg);
                    if (own == null) {
                        unplaced.add(pkg);
                        continue;
                    }
                    files++;
                    Matcher m = IMPORT.matcher(Files.readString(f));
                    while (m.find()) {
                        String to = m.group(1);
                        Integer other = layer.get(to);
                        if (other == null) {
                            unplaced.add(to);
                        } else if (!to.equals(pkg) && other >= own) {
                            up.add(f.normalize() + " imports " + to);
                        }
                    }
                }
            }
        }
        assertTrue(files > 100, "read core's sources: " + files);
        assertEquals(List.of(), List.copyOf(unplaced), "packages with no layer: give them one");
        assertEquals(List.of(), up, "imports that run up or across a layer");
    }
}
