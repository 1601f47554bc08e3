package io.github.sockmap4j.examples;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Every line of the README's Java blocks is in ReadmeSnippets, which the build compiles. */
class ReadmeSnippetsTest {

    static String squeeze(String line) {
        return line.replaceAll("\\s+", " ").strip();
    }

    @Test
    void theReadmesJavaCompiles() throws Exception {
        Path module = Path.of("").toAbsolutePath();
        List<String> readme = Files.readAllLines(module.resolveSibling("README.md"));
        String snippets = squeeze(Files.readString(
                module.resolve("src/main/java/io/github/sockmap4j/examples/ReadmeSnippets.java")));
        List<String> missing = new ArrayList<>();
        int blocks = 0;
        boolean inJava = false;
        for (String line : readme) {
            if (line.startsWith("```")) {
                inJava = !inJava && line.strip().equals("```java");
                blocks += inJava ? 1 : 0;
                continue;
            }
            if (inJava && !line.isBlank() && !snippets.contains(squeeze(line))) {
                missing.add(line);
            }
        }
        assertTrue(blocks >= 2, "the README has its Java blocks: " + blocks);
        assertTrue(missing.isEmpty(), "README lines not in ReadmeSnippets.java: " + missing);
    }
}
