package io.github.sockmap4j.agent.control;

import io.github.sockmap4j.linux.bpf.PolicyRule;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The file behind a {@link RuleBook}: a journal. A change appends what it added ("+" and a
 * holder's line) and removed ("-"), so that a request costs what it changed, not a rewrite of
 * every rule (2.5 MB at 65,536 rules). Once the journal holds more lines than
 * {@value #COMPACT_MIN} plus twice the live ones, it is rewritten as the live lines alone (a
 * root-only temporary file renamed over it). Lines are grouped by rule key.
 */
final class RuleJournal {
    static final int COMPACT_MIN = 4096;
    private static final Logger LOG = LoggerFactory.getLogger(RuleJournal.class);

    private final Path file;
    /** What the file says now, by rule key: each holder's line. */
    private final Map<PolicyRule, Set<String>> persisted = new HashMap<>();
    private int liveLines;
    private int journalLines;

    RuleJournal(Path file) {
        this.file = file;
    }

    /** The live lines of the file; none when there is no file. */
    Set<String> live() throws IOException {
        return Files.exists(file) ? replay(Files.readAllLines(file)) : Set.of();
    }

    /** The live lines of a journal: "+" adds a line, "-" removes it, a bare line (a snapshot) adds it. */
    static Set<String> replay(List<String> journal) {
        Set<String> live = new LinkedHashSet<>();
        for (String l : journal) {
            if (l.startsWith("+\t")) {
                live.add(l.substring(2));
            } else if (l.startsWith("-\t")) {
                live.remove(l.substring(2));
            } else if (!l.isEmpty()) {
                live.add(l);
            }
        }
        return live;
    }

    /**
     * Appends what changed for each key of {@code changed} (its lines now; none: the rule went),
     * or, once the journal has grown, compacts it with {@code all}'s lines.
     */
    void save(Map<PolicyRule, Set<String>> changed, Supplier<Map<PolicyRule, Set<String>>> all) {
        StringBuilder sb = new StringBuilder();
        int appended = 0;
        for (Map.Entry<PolicyRule, Set<String>> e : changed.entrySet()) {
            Set<String> before = persisted.getOrDefault(e.getKey(), Set.of());
            Set<String> now = e.getValue();
            for (String l : before) {
                if (!now.contains(l)) {
                    sb.append("-\t").append(l).append('\n');
                    appended++;
                }
            }
            for (String l : now) {
                if (!before.contains(l)) {
                    sb.append("+\t").append(l).append('\n');
                    appended++;
                }
            }
            liveLines += now.size() - before.size();
            if (now.isEmpty()) {
                persisted.remove(e.getKey());
            } else {
                persisted.put(e.getKey(), now);
            }
        }
        if (appended == 0) {
            return;
        }
        journalLines += appended;
        if (journalLines > COMPACT_MIN + 2L * liveLines) {
            compact(all.get());
            return;
        }
        try {
            Files.writeString(file, sb, StandardOpenOption.APPEND); // created root-only by compact()
        } catch (java.nio.file.NoSuchFileException gone) {
            compact(all.get());
        } catch (IOException e) {
            failed(e);
        }
    }

    /** Rewrites the file as {@code all}'s lines alone. */
    void compact(Map<PolicyRule, Set<String>> all) {
        StringBuilder sb = new StringBuilder();
        persisted.clear();
        liveLines = 0;
        for (Map.Entry<PolicyRule, Set<String>> e : all.entrySet()) {
            persisted.put(e.getKey(), e.getValue());
            liveLines += e.getValue().size();
            for (String l : e.getValue()) {
                sb.append(l).append('\n');
            }
        }
        journalLines = liveLines;
        try {
            Path tmp = file.resolveSibling(file.getFileName() + ".tmp");
            Files.deleteIfExists(tmp);
            Files.createFile(tmp, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
            Files.writeString(tmp, sb);
            Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
            failed(e);
        }
    }

    /**
     * Lines of {@code file} that did not read at start ({@code why}: the first one's reason): kept
     * in {@code FILE.set-aside} (root-only) for an operator, and named in one WARN; the agent starts
     * without them. A line the agent wrote once and cannot read now (an older form, a hand edit)
     * must not keep it down.
     */
    static void setAside(Path file, List<String> lines, String why) {
        if (lines.isEmpty()) {
            return;
        }
        Path aside = file.resolveSibling(file.getFileName() + ".set-aside");
        try {
            if (!Files.exists(aside)) {
                Files.createFile(aside, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
            }
            Files.write(aside, lines, StandardOpenOption.APPEND);
            LOG.warn("{} line(s) of {} did not read and were set aside in {} (the first: {}); the agent starts "
                    + "without them", lines.size(), file, aside, why);
        } catch (IOException e) {
            LOG.warn("{} line(s) of {} did not read (the first: {}) and could not be set aside in {}: {}; the agent "
                    + "starts without them", lines.size(), file, why, aside, e.toString());
        }
    }

    private void failed(IOException e) {
        LOG.warn("Cannot save the agent's rules to {} (a restarted agent would count them as root's): {}", file,
                e.toString());
    }
}
