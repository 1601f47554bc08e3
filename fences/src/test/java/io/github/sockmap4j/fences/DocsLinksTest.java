package io.github.sockmap4j.fences;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The project's Markdown, read as a reader follows it (no root): every relative link reaches a
 * file, and a heading where it names one; every page under docs/ is linked from another page;
 * every top-level docs page is in the index (docs/README.md); the README stays the door, at most
 * 200 lines. A page moved or renamed without its links fails here with the link.
 */
class DocsLinksTest {
    private static final Path ROOT = Path.of("..").toAbsolutePath().normalize();
    private static final Pattern LINK = Pattern.compile("\\]\\(([^)\\s]+)\\)");
    private static final Pattern HEADING = Pattern.compile("^#{1,6}\\s+(.*)$", Pattern.MULTILINE);
    private static final Pattern NOT_IN_SLUG = Pattern.compile("[^\\p{L}\\p{N}_\\- ]", Pattern.UNICODE_CHARACTER_CLASS);

    private static List<Path> markdown() throws IOException {
        try (Stream<Path> all = Files.walk(ROOT)) {
            return all.filter(p -> p.toString().endsWith(".md"))
                    .filter(p -> {
                        String rel = ROOT.relativize(p).toString();
                        return !rel.startsWith(".") && !rel.contains("/target/") && !rel.startsWith("target/")
                                && !rel.contains("node_modules");
                    })
                    .sorted().toList();
        }
    }

    /** A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces as hyphens. */
    static String slug(String heading) {
        return NOT_IN_SLUG.matcher(heading.strip().toLowerCase(Locale.ROOT)).replaceAll("").replace(' ', '-');
    }

    private static Set<String> anchors(Path page, Map<Path, Set<String>> cache) throws IOException {
        Set<String> a = cache.get(page);
        if (a == null) {
            a = new HashSet<>();
            Matcher m = HEADING.matcher(Files.readString(page));
            while (m.find()) {
                a.add(slug(m.group(1)));
            }
            cache.put(page, a);
        }
        return a;
    }

    @Test
    void everyRelativeLinkReachesItsFileAndHeading() throws IOException {
        List<String> dead = new ArrayList<>();
        Map<Path, Set<String>> cache = new HashMap<>();
        int links = 0;
        for (Path page : markdown()) {
            Matcher m = LINK.matcher(Files.readString(page));
            while (m.find()) {
                String link = m.group(1);
                if (link.matches("^[a-zA-Z][a-zA-Z+.-]*:.*")) {
                    continue; // http:, https:, mailto:
                }
                links++;
                int hash = link.indexOf('#');
                String file = hash < 0 ? link : link.substring(0, hash);
                Path target = file.isEmpty() ? page : page.getParent().resolve(file).normalize();
                if (!Files.exists(target)) {
                    dead.add(ROOT.relativize(page) + ": " + link + " (no such file)");
                } else if (hash >= 0 && target.toString().endsWith(".md")
                        && !anchors(target, cache).contains(link.substring(hash + 1))) {
                    dead.add(ROOT.relativize(page) + ": " + link + " (no such heading)");
                }
            }
        }
        assertTrue(links > 100, "read the links: " + links);
        assertEquals(List.of(), dead, "dead links");
    }

    @Test
    void everyDocsPageIsLinkedAndEveryTopLevelPageIsInTheIndex() throws IOException {
        Path docs = ROOT.resolve("docs");
        Set<Path> linked = new HashSet<>();
        for (Path page : markdown()) {
            Matcher m = LINK.matcher(Files.readString(page));
            while (m.find()) {
                String file = m.group(1).split("#", 2)[0];
                if (!file.isEmpty() && !file.contains(":")) {
                    Path target = page.getParent().resolve(file).normalize();
                    if (!target.equals(page)) {
                        linked.add(target);
                    }
                }
            }
        }
        TreeSet<String> orphans = new TreeSet<>();
        TreeSet<String> notInIndex = new TreeSet<>();
        String index = Files.readString(docs.resolve("README.md"));
        for (Path page : markdown()) {
            if (!page.startsWith(docs)) {
                continue;
            }
            if (!linked.contains(page)) {
                orphans.add(ROOT.relativize(page).toString());
            }
            if (page.getParent().equals(docs) && !page.getFileName().toString().equals("README.md")
                    && !index.contains("](" + page.getFileName() + ")")) {
                notInIndex.add(page.getFileName().toString());
            }
        }
        assertEquals(Set.of(), orphans, "docs pages no other page links to");
        assertEquals(Set.of(), notInIndex, "docs pages missing from docs/README.md");
    }

    @Test
    void theReadmeIsTheDoor() throws IOException {
        List<String> readme = Files.readAllLines(ROOT.resolve("README.md"));
        assertTrue(readme.size() <= 200, "README.md has " + readme.size() + " lines; at most 200");
        int first = readme.indexOf("./scripts/demo.sh");
        assertTrue(first > 0 && first < 15 && readme.get(first + 1).equals("./scripts/test.sh"),
                "the two commands come first");
    }

    @Test
    void slugsAreGitHubs() {
        assertEquals("the-lines-to-add", slug("The lines to add"));
        assertEquals("measured-scriptsbenchsh-rings-2026-12-06-2-vcpus-kernel-61844-jdk-25",
                slug("Measured: `scripts/bench.sh rings` (2026-12-06, 2 vCPUs, kernel 6.18.44, JDK 25)"));
    }
}
