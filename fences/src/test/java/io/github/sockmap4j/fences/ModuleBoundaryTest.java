package io.github.sockmap4j.fences;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * Which module's main code may use which of another module's packages, read from every module's
 * sources and module descriptors (no root): the whole house, from the fences module, which
 * depends on none of it. A package whose name has an {@code internal} part is
 * its module's own; a package a descriptor exports to named modules ({@code exports P to M}) is
 * for those modules only; a package of a module with a descriptor that it does not export is its
 * own. JPMS enforces the same where both sides are named modules; this also covers the modules
 * that are not (yet), which the class path would let through.
 */
class ModuleBoundaryTest {
    private static final Pattern IMPORT = Pattern.compile(
            "^import (?:static )?(io\\.github\\.sockmap4j[\\w.]*?)\\.[A-Z]", Pattern.MULTILINE);
    private static final Pattern FQN = Pattern.compile("\\b(io\\.github\\.sockmap4j(?:\\.[a-z_]\\w*)*)\\.[A-Z]");
    private static final Pattern AUTOMATIC = Pattern.compile("<Automatic-Module-Name>([\\w.]+)</Automatic-Module-Name>");
    private static final Pattern MODULE = Pattern.compile("^(?:open )?module ([\\w.]+)", Pattern.MULTILINE);
    private static final Pattern EXPORTS = Pattern.compile("^\\s*exports ([\\w.]+)(?:\\s+to\\s+([\\w.,\\s]+))?;",
            Pattern.MULTILINE);

    /**
     * A module of the build: its directory, its JPMS name (its descriptor's, else its jar's
     * Automatic-Module-Name, else null), whether it has a descriptor, its packages and exports.
     */
    record Module(String dir, String name, boolean described, Set<String> packages, Map<String, Set<String>> exports) {
        Module(String dir, String name, Set<String> packages, Map<String, Set<String>> exports) {
            this(dir, name, name != null, packages, exports);
        }

        /** Whether code of {@code user} may use package {@code pkg} of this module. */
        boolean allows(String pkg, Module user) {
            if (user == this) {
                return true;
            }
            if (pkg.contains(".internal.") || pkg.endsWith(".internal")) {
                return false;
            }
            if (!described) {
                return true; // no descriptor: every package is for everyone, except internal ones
            }
            Set<String> to = exports.get(pkg);
            return to != null && (to.isEmpty() || (user.name != null && to.contains(user.name)));
        }
    }

    @Test
    void noModuleUsesAnotherModulesOwnPackages() throws IOException {
        List<Module> modules = modules(Path.of("..").toAbsolutePath().normalize());
        Map<String, Module> owner = new TreeMap<>();
        for (Module m : modules) {
            for (String p : m.packages()) {
                owner.put(p, m);
            }
        }
        assertTrue(owner.containsKey("io.github.sockmap4j.linux.ffi") && owner.containsKey("io.github.sockmap4j.linux.bpf")
                && modules.stream().anyMatch(m -> m.dir().equals("agent")), "read the build's modules: " + modules);
        Path root = Path.of("..").toAbsolutePath().normalize();
        List<String> where = new ArrayList<>();
        for (Module user : modules) {
            Path src = root.resolve(user.dir()).resolve("src/main/java");
            try (Stream<Path> all = Files.walk(src)) {
                for (Path f : all.filter(p -> p.toString().endsWith(".java")).toList()) {
                    for (String pkg : used(Files.readString(f))) {
                        Module m = owner.get(pkg);
                        if (m != null && !m.allows(pkg, user)) {
                            where.add(root.relativize(f) + " uses " + pkg + " of " + m.dir());
                        }
                    }
                }
            }
        }
        assertEquals(List.of(), where, "main code using another module's own packages");
    }

    @Test
    void ruleReadsDescriptorsAsJpmsDoes() {
        Module core = new Module("core", "io.github.sockmap4j.core", Set.of("a.b", "a.b.internal.c", "a.x"),
                Map.of("a.b", Set.of()));
        Module linux = new Module("linux", "io.github.sockmap4j.linux", Set.of("a.l"),
                Map.of("a.l", Set.of("io.github.sockmap4j.core")));
        Module agent = new Module("agent", null, Set.of("a.g", "a.g.internal"), Map.of());
        Module automatic = new Module("netty", "io.github.sockmap4j.netty", false, Set.of("a.n"), Map.of());
        assertTrue(core.allows("a.b", agent));
        assertTrue(!core.allows("a.x", agent), "not exported");
        assertTrue(!core.allows("a.b.internal.c", agent), "internal");
        assertTrue(linux.allows("a.l", core), "exported to core");
        assertTrue(!linux.allows("a.l", agent), "exported to named modules only");
        Module linuxToNetty = new Module("linux", "io.github.sockmap4j.linux", Set.of("a.l"),
                Map.of("a.l", Set.of("io.github.sockmap4j.netty")));
        assertTrue(linuxToNetty.allows("a.l", automatic), "exported to an automatic module by its name");
        assertTrue(automatic.allows("a.n", core), "an automatic module's packages are everyone's");
        assertTrue(agent.allows("a.g", core));
        assertTrue(!agent.allows("a.g.internal", core), "internal without a descriptor too");
        assertTrue(core.allows("a.x", core), "its own");
    }

    /** The sockmap4j packages a source file names, in imports and in code (not in comments). */
    static Set<String> used(String source) {
        Set<String> pkgs = new TreeSet<>();
        Matcher m = IMPORT.matcher(source);
        while (m.find()) {
            pkgs.add(m.group(1));
        }
        for (String line : source.lines().toList()) {
            String t = line.strip();
            if (t.startsWith("*") || t.startsWith("/*") || t.startsWith("//") || t.startsWith("import ")
                    || t.startsWith("package ")) {
                continue;
            }
            Matcher q = FQN.matcher(t);
            while (q.find()) {
                pkgs.add(q.group(1));
            }
        }
        return pkgs;
    }

    /** Every module of the build under {@code root} with main Java sources. */
    static List<Module> modules(Path root) throws IOException {
        List<Module> modules = new ArrayList<>();
        try (Stream<Path> poms = Files.walk(root, 3)) {
            for (Path pom : poms.filter(p -> p.getFileName().toString().equals("pom.xml")).sorted().toList()) {
                Path dir = pom.getParent();
                Path src = dir.resolve("src/main/java");
                if (dir.toString().contains("/target") || !Files.isDirectory(src)) {
                    continue;
                }
                Set<String> packages = new TreeSet<>();
                try (Stream<Path> files = Files.walk(src)) {
                    files.filter(p -> p.toString().endsWith(".java") && !p.getFileName().toString().equals("module-info.java"))
                            .forEach(p -> packages.add(src.relativize(p.getParent()).toString().replace('/', '.')));
                }
                String name = null;
                Map<String, Set<String>> exports = new TreeMap<>();
                Path descriptor = src.resolve("module-info.java");
                boolean described = Files.exists(descriptor);
                Matcher automatic = AUTOMATIC.matcher(Files.readString(pom));
                if (!described && automatic.find()) {
                    name = automatic.group(1);
                }
                if (described) {
                    String text = Files.readString(descriptor);
                    Matcher n = MODULE.matcher(text);
                    assertTrue(n.find(), "no module name in " + descriptor);
                    name = n.group(1);
                    Matcher e = EXPORTS.matcher(text);
                    while (e.find()) {
                        Set<String> to = new TreeSet<>();
                        if (e.group(2) != null) {
                            for (String t : e.group(2).split(",")) {
                                to.add(t.strip());
                            }
                        }
                        exports.put(e.group(1), to);
                    }
                }
                modules.add(new Module(root.relativize(dir).toString(), name, described, packages, exports));
            }
        }
        return modules;
    }
}
