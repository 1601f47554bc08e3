package io.github.sockmap4j.agent.control;

import io.github.sockmap4j.agent.Owner;
import io.github.sockmap4j.linux.bpf.PolicyMap;
import io.github.sockmap4j.linux.bpf.PolicyRule;
import io.github.sockmap4j.control.AgentRequest;
import io.github.sockmap4j.linux.net.Cidr;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.stream.Collectors;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The agent's record of who holds each policy rule, and the only writer of the policy map while
 * it runs. A rule stays in the map while anyone holds it: a user's {@code ALLOW} (until that user
 * or root denies it), a connection's {@code OPTIN} (until the connection closes), a pod's
 * annotation (until the pod or the annotation goes). Kept in a root-only file next to the locks,
 * so the next agent adopts it: a rule the map holds and the file does not (made by root without an
 * agent) is root's; an {@code OPTIN} of the previous agent's connections is held for as long as
 * the process that made it lives.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
public final class RuleBook {
    private static final Logger LOG = LoggerFactory.getLogger(RuleBook.class);

    /** One holder of a rule: {@code uid} asked for it, {@code pid} its process where it has one. */
    record Holder(int uid, Owner owner, long pid) {
    }

    /** A rule as the map has it, its bound, and its holders. */
    static final class Entry {
        final PolicyRule rule;
        int bound;
        final List<Holder> holders = new ArrayList<>();

        Entry(PolicyRule rule, int bound) {
            this.rule = rule;
            this.bound = bound;
        }

        String describe() {
            return rule.port() + (rule.network() == null ? ""
                    : "/" + rule.network().getHostAddress() + " (" + rule.keyBits() + " key bits)");
        }
    }

    /** A request the book turns down, with the reason. */
    public static final class Refused extends Exception {
        private static final long serialVersionUID = 1L;

        Refused(String message) {
            super(message, null, false, false);
        }
    }

    private final PolicyMap policy;
    private final Map<PolicyRule, Entry> rules = new LinkedHashMap<>();
    private final RuleJournal journal;
    /** Rules changed since the last save. */
    private final Set<PolicyRule> dirty = new LinkedHashSet<>();

    private RuleBook(PolicyMap policy, Path file) {
        this.policy = policy;
        this.journal = new RuleJournal(file);
    }

    /** Adopts the rules of {@code policy}, with their holders from {@code file} when there is one. */
    public static RuleBook load(PolicyMap policy, Path file) throws IOException {
        return load(policy, file, false);
    }

    /**
     * The same; {@code restore}: the policy map was made anew (the pins of another version were
     * retired), and the journal's live rules are put back into it rather than taken as removed.
     */
    public static RuleBook load(PolicyMap policy, Path file, boolean restore) throws IOException {
        RuleBook b = new RuleBook(policy, file);
        Set<PolicyRule> inMap = new java.util.HashSet<>(policy.rules());
        java.util.List<String> unread = new java.util.ArrayList<>();
        String why = null;
        for (String line : b.journal.live()) {
            String[] f = line.split("\t");
            int bound;
            Owner owner;
            long pid;
            int uid;
            PolicyRule key;
            try {
                if (f.length != 7) {
                    throw new IllegalArgumentException("not 7 fields");
                }
                key = new PolicyRule(Integer.parseInt(f[3]), f[4].equals("*") ? null : Cidr.literal(f[4]),
                        Integer.parseInt(f[5]));
                bound = Integer.parseInt(f[6]);
                owner = Owner.parse(f[1]);
                pid = Long.parseLong(f[2]);
                uid = Integer.parseInt(f[0]);
            } catch (IllegalArgumentException e) {
                unread.add(line);
                why = why != null ? why : e.getMessage();
                continue;
            }
            if (!inMap.contains(key)) {
                if (!restore) {
                    continue; // removed from the map while no agent ran
                }
                policy.put(key, bound);
                inMap.add(key);
            }
            Entry r = b.rules.computeIfAbsent(key, k -> new Entry(k, bound));
            if (owner.kind() == Owner.Kind.CONNECTION) {
                owner = Owner.process(pid); // that connection ended with the previous agent
            }
            r.holders.add(new Holder(uid, owner, pid));
        }
        RuleJournal.setAside(file, unread, why);
        for (PolicyRule key : inMap) {
            if (!b.rules.containsKey(key)) {
                Entry r = new Entry(key, (int) policy.boundOf(key));
                r.holders.add(new Holder(0, Owner.USER, 0));
                b.rules.put(key, r);
            }
        }
        b.reapDeadProcesses();
        b.compact();
        return b;
    }

    /**
     * Carries out an ALLOW, OPTIN, BOUND or DENY of {@code uid} (already checked against the
     * policy file) and returns what was done.
     *
     * @param connection the requester's connection, for OPTIN
     */
    public synchronized String apply(int uid, long pid, Owner connection, AgentRequest req)
            throws Refused, IOException {
        return apply(uid, pid, connection, req, Integer.MAX_VALUE);
    }

    /**
     * As {@link #apply(int, long, Owner, AgentRequest)}, refusing an ALLOW or OPTIN that would
     * make {@code uid} hold more than {@code quota} rules.
     */
    public synchronized String apply(int uid, long pid, Owner connection, AgentRequest req, int quota)
            throws Refused, IOException {
        PolicyRule key = req.rule();
        Entry r = rules.get(key);
        switch (req.verb()) {
            case ALLOW, OPTIN -> {
                Owner owner = req.verb() == AgentRequest.Verb.ALLOW ? Owner.USER : connection;
                boolean holdsIt = r != null && r.holders.stream().anyMatch(h -> h.uid() == uid);
                if (uid != 0 && !holdsIt) {
                    int held = heldBy(uid);
                    if (held >= quota) {
                        throw new Refused("uid " + uid + " holds " + held + " rules, its quota: deny one it no "
                                + "longer needs, or ask root to raise its quota (a 'quota uid " + uid + " N' line "
                                + "in the agent's policy file)");
                    }
                }
                if (r == null) {
                    policy.put(key, req.bound());
                    r = new Entry(key, req.bound());
                    rules.put(key, r);
                } else if (r.bound != req.bound()) {
                    checkSoleHolder(uid, r, "change its bound");
                    policy.setBound(key, req.bound());
                    r.bound = req.bound();
                }
                Holder h = new Holder(uid, owner, pid);
                if (!r.holders.contains(h)) {
                    r.holders.add(h);
                }
                dirty.add(key);
                save();
                return (req.verb() == AgentRequest.Verb.ALLOW ? "allowed " : "opted in ") + r.describe()
                        + " bound " + Integer.toUnsignedString(r.bound);
            }
            case BOUND -> {
                if (r == null) {
                    throw new Refused("no rule for " + key.port() + ": opt it in first");
                }
                checkSoleHolder(uid, r, "change its bound");
                policy.setBound(key, req.bound());
                r.bound = req.bound();
                dirty.add(key);
                save();
                return "bound of " + r.describe() + " is " + Integer.toUnsignedString(r.bound);
            }
            case DENY -> {
                if (r == null) {
                    throw new Refused("no rule for " + describe(key) + " (nothing to remove)");
                }
                // The requester's own OPTIN hold first (its connection's, or its process's from the
                // agent before): a process that releases what it opted in takes nobody's hold with it,
                // root's service neither. Else root removes every holder; a user, its own.
                boolean removed = r.holders.removeIf(h -> h.uid() == uid
                        && (h.owner().equals(connection) || pid != 0 && h.owner().equals(Owner.process(pid))));
                if (!removed) {
                    removed = uid == 0
                            ? r.holders.removeIf(h -> true)
                            : r.holders.removeIf(h -> h.uid() == uid && h.owner().equals(Owner.USER));
                }
                if (!removed) {
                    throw new Refused("the rule for " + r.describe() + " was made by uid "
                            + r.holders.stream().map(h -> Integer.toString(h.uid())).distinct()
                                    .collect(Collectors.joining(", "))
                            + ": only they, or root, may remove it");
                }
                dirty.add(key);
                dropIfUnheld(r);
                save();
                return "denied " + r.describe() + (rules.containsKey(key) ? " (still held by others)" : "");
            }
            default -> throw new Refused("not a rule request: " + req.verb());
        }
    }

    private static String describe(PolicyRule rule) {
        return rule.port() + (rule.network() == null ? "" : "/" + rule.network().getHostAddress());
    }

    private static void checkSoleHolder(int uid, Entry r, String what) throws Refused {
        if (uid == 0) {
            return;
        }
        for (Holder h : r.holders) {
            if (h.uid() != uid) {
                throw new Refused("the rule for " + r.describe() + " is also held by uid " + h.uid()
                        + " (bound " + Integer.toUnsignedString(r.bound) + "): only root may " + what);
            }
        }
    }

    /** A connection ended: its OPTIN rules go, unless someone else holds them too. */
    public synchronized void connectionClosed(Owner connection) {
        dropHolders(h -> h.owner().equals(connection));
    }

    /** Drops the holders left by processes that have exited (see {@link #load}). */
    public synchronized void reapDeadProcesses() {
        dropHolders(h -> h.owner().kind() == Owner.Kind.PROCESS && !Files.exists(Path.of("/proc/" + h.pid())));
    }

    /**
     * Makes {@code owner} (e.g. {@code pod:NS/NAME}) hold exactly {@code wanted} (root's rules:
     * the agent made them from what it was told to), dropping what it held before and no longer
     * wants. Errors of one rule (a full map) are logged and the others still applied.
     */
    public synchronized void hold(Owner owner, List<AgentRequest> wanted) {
        Set<PolicyRule> keep = wanted.stream().map(AgentRequest::rule).collect(Collectors.toSet());
        dropHolders(h -> h.owner().equals(owner), keep);
        for (AgentRequest w : wanted) {
            PolicyRule key = w.rule();
            Entry r = rules.get(key);
            try {
                if (r == null) {
                    policy.put(key, w.bound());
                    r = new Entry(key, w.bound());
                    rules.put(key, r);
                }
                Holder h = new Holder(0, owner, 0);
                if (!r.holders.contains(h)) {
                    r.holders.add(h);
                    dirty.add(key);
                }
            } catch (IOException e) {
                LOG.warn("Cannot opt {} in for {}: {}", describe(w.rule()), owner, e.getMessage());
            }
        }
        save();
    }

    /** Whether {@code owner} (a connection's id) holds any rule now. */
    public synchronized boolean holds(Owner owner) {
        return rules.values().stream().anyMatch(r -> r.holders.stream().anyMatch(h -> h.owner().equals(owner)));
    }

    /** The owners of {@code kind} that hold anything. */
    public synchronized Set<Owner> owners(Owner.Kind kind) {
        return rules.values().stream().flatMap(r -> r.holders.stream()).map(Holder::owner)
                .filter(o -> o.kind() == kind).collect(Collectors.toSet());
    }

    private void dropHolders(java.util.function.Predicate<Holder> which) {
        dropHolders(which, Set.of());
    }

    private void dropHolders(java.util.function.Predicate<Holder> which, Set<PolicyRule> except) {
        boolean changed = false;
        for (Entry r : List.copyOf(rules.values())) {
            if (except.contains(r.rule)) {
                continue;
            }
            if (r.holders.removeIf(which)) {
                changed = true;
                dirty.add(r.rule);
                dropIfUnheld(r);
            }
        }
        if (changed) {
            save();
        }
    }

    private void dropIfUnheld(Entry r) {
        if (r.holders.isEmpty()) {
            policy.tryRemove(r.rule);
            rules.remove(r.rule);
        }
    }

    /** How many rules {@code uid} holds (by any of its holders). */
    private int heldBy(int uid) {
        int n = 0;
        for (Entry r : rules.values()) {
            for (Holder h : r.holders) {
                if (h.uid() == uid) {
                    n++;
                    break;
                }
            }
        }
        return n;
    }

    /** How many rules the map holds through this book. */
    public synchronized int size() {
        return rules.size();
    }

    /** Each rule's text and its holders' uids and kinds, for status output. */
    public synchronized List<String> describeAll() {
        return describeFor(0);
    }

    /**
     * What {@code uid} may see of the rules: root every rule and every holder; another user only
     * the rules it holds, with its own holds (who else opted in what, and their pids, is theirs).
     */
    public synchronized List<String> describeFor(int uid) {
        List<String> out = new ArrayList<>();
        for (Entry r : rules.values()) {
            List<Holder> seen = r.holders.stream().filter(h -> uid == 0 || h.uid() == uid).toList();
            if (!seen.isEmpty()) {
                out.add(r.describe() + " bound " + Integer.toUnsignedString(r.bound) + " held by "
                        + seen.stream().map(h -> "uid " + h.uid() + " (" + h.owner() + ")")
                                .collect(Collectors.joining(", ")));
            }
        }
        return out;
    }

    private static String line(Entry r, Holder h) {
        return h.uid() + "\t" + h.owner() + "\t" + h.pid() + "\t" + r.rule.port() + "\t"
                + (r.rule.network() == null ? "*" : Cidr.text(r.rule.network())) + "\t" + r.rule.keyBits() + "\t" + r.bound;
    }

    private static Set<String> lines(Entry r) {
        Set<String> out = new LinkedHashSet<>();
        for (Holder h : r.holders) {
            out.add(line(r, h));
        }
        return out;
    }

    /** Has the journal record what the dirty rules changed. */
    private void save() {
        Map<PolicyRule, Set<String>> changed = new LinkedHashMap<>();
        for (PolicyRule key : dirty) {
            Entry r = rules.get(key);
            changed.put(key, r == null ? Set.of() : lines(r));
        }
        dirty.clear();
        journal.save(changed, this::allLines);
    }

    /** Rewrites the journal as the live lines alone. */
    private void compact() {
        dirty.clear();
        journal.compact(allLines());
    }

    private Map<PolicyRule, Set<String>> allLines() {
        Map<PolicyRule, Set<String>> all = new LinkedHashMap<>();
        for (Map.Entry<PolicyRule, Entry> e : rules.entrySet()) {
            all.put(e.getKey(), lines(e.getValue()));
        }
        return all;
    }

    @Override
    public String toString() {
        return "RuleBook" + Objects.toString(describeAll());
    }
}
