package io.github.sockmap4j.testsupport;

import java.io.IOException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.lang.reflect.Type;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

/**
 * What a module's exported packages show other modules: the public and protected methods and
 * fields of their public classes that take or return a type of an {@code internal} package or of
 * the linux module, which other modules cannot name (a public accessor that exists only for the
 * library's own packages would). Read from the module's compiled classes, no root.
 */
public final class ExportedSignatures {
    private ExportedSignatures() {
    }

    /**
     * Each signature of {@code packages} (of the classes next to {@code anchor}) that names a
     * hidden type, as "class.member: type"; empty when none does.
     */
    public static List<String> leaks(Class<?> anchor, String... packages)
            throws IOException, URISyntaxException, ClassNotFoundException {
        List<String> leaks = new ArrayList<>();
        for (Class<?> c : classes(anchor, packages)) {
            if (!Modifier.isPublic(c.getModifiers())) {
                continue;
            }
            for (Method m : c.getDeclaredMethods()) {
                if (!(Modifier.isPublic(m.getModifiers()) || Modifier.isProtected(m.getModifiers())) || m.isSynthetic()) {
                    continue;
                }
                List<Type> types = new ArrayList<>(List.of(m.getGenericParameterTypes()));
                types.add(m.getGenericReturnType());
                for (Type t : types) {
                    if (hidden(t)) {
                        leaks.add(c.getName() + "." + m.getName() + ": " + t.getTypeName());
                    }
                }
            }
            for (var f : c.getDeclaredFields()) {
                if ((Modifier.isPublic(f.getModifiers()) || Modifier.isProtected(f.getModifiers()))
                        && hidden(f.getGenericType())) {
                    leaks.add(c.getName() + "." + f.getName() + ": " + f.getGenericType().getTypeName());
                }
            }
        }
        return leaks;
    }

    /** Whether {@code t} names a type users cannot: an internal package's, the linux module's. */
    static boolean hidden(Type t) {
        String name = t.getTypeName();
        return name.contains(".internal.") || name.contains("io.github.sockmap4j.linux.");
    }

    /** The classes of {@code packages} (dotted names) where {@code anchor} was loaded from. */
    public static List<Class<?>> classes(Class<?> anchor, String... packages)
            throws IOException, URISyntaxException, ClassNotFoundException {
        Path root = Path.of(anchor.getProtectionDomain().getCodeSource().getLocation().toURI());
        List<Class<?>> classes = new ArrayList<>();
        for (String pkg : packages) {
            try (Stream<Path> files = Files.list(root.resolve(pkg.replace('.', '/')))) {
                for (Path f : files.filter(p -> p.toString().endsWith(".class")).toList()) {
                    String name = root.relativize(f).toString().replace('/', '.').replaceAll("\\.class$", "");
                    classes.add(Class.forName(name, false, anchor.getClassLoader()));
                }
            }
        }
        return classes;
    }
}
