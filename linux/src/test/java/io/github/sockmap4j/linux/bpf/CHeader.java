package io.github.sockmap4j.linux.bpf;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The integer constants of one of this project's C headers: {@code #define NAME number} lines and
 * enum members (implicit values counted as C does, an explicit one may name an earlier constant).
 * Enough for the shared headers under bpf/src, which keep to that form.
 */
public record CHeader(Map<String, Long> constants) {
    /** bpf/src/{@code name} of this checkout (tests run in a module directory). */
    public static CHeader ofProject(String name) throws IOException {
        Path here = Path.of("").toAbsolutePath();
        for (Path dir = here; dir != null; dir = dir.getParent()) {
            Path h = dir.resolve("bpf/src").resolve(name);
            if (Files.isRegularFile(h)) {
                return parse(Files.readString(h));
            }
        }
        throw new IOException("bpf/src/" + name + " not found above " + here);
    }

    static CHeader parse(String text) {
        String src = text.replaceAll("(?s)/\\*.*?\\*/", " ").replaceAll("//[^\n]*", " ");
        Map<String, Long> c = new HashMap<>();
        Matcher d = Pattern.compile("(?m)^#define\\s+(\\w+)\\s+(0[xX][0-9a-fA-F]+|\\d+)[uUlL]*\\s*$").matcher(src);
        while (d.find()) {
            c.put(d.group(1), Long.decode(d.group(2)));
        }
        Matcher e = Pattern.compile("(?s)enum\\s+\\w+\\s*\\{(.*?)}").matcher(src);
        while (e.find()) {
            long next = 0;
            for (String item : e.group(1).split(",")) {
                String it = item.trim();
                if (it.isEmpty()) {
                    continue;
                }
                String[] kv = it.split("=");
                String name = kv[0].trim();
                if (kv.length == 2) {
                    String v = kv[1].trim();
                    String[] sum = v.split("\\+");
                    long val = 0;
                    for (String part : sum) {
                        String t = part.trim();
                        val += c.containsKey(t) ? c.get(t) : Long.decode(t);
                    }
                    next = val;
                }
                c.put(name, next);
                next++;
            }
        }
        return new CHeader(c);
    }

    public long get(String name) {
        Long v = constants.get(name);
        if (v == null) {
            throw new AssertionError(name + " is not defined in the header");
        }
        return v;
    }
}
