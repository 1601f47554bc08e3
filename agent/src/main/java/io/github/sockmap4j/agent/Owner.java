package io.github.sockmap4j.agent;

import java.util.Objects;

/**
 * Who holds a rule in the agent's book. Written {@code KIND:NAME} in the agent's rules journal
 * ({@link #toString()}, read back by {@link #parse}), the user as {@code user} and a named owner
 * as its name alone.
 *
 * @param kind what holds it
 * @param name which one of that kind
 */
public record Owner(Kind kind, String name) {
    /** Rules root made directly (the CLI's {@code allow}, or in the map with no agent's record). */
    public static final Owner USER = new Owner(Kind.USER, "");

    /** What holds a rule, and for how long. */
    public enum Kind {
        /** Root's rules: until denied. */
        USER("user"),
        /** A control socket connection's OPTIN: while it is open. */
        CONNECTION("conn"),
        /** A process whose connection ended with an earlier agent: while it lives. */
        PROCESS("pid"),
        /** A pod of this node, by its annotation: while it asks ({@code NAMESPACE/NAME}). */
        POD("pod"),
        /** A Service, by its annotation or its pods': while it asks ({@code NAMESPACE/NAME}). */
        SERVICE("svc"),
        /** Any other holder an embedding program names ({@link NodeAgent#hold}). */
        NAMED("");

        final String prefix;

        Kind(String prefix) {
            this.prefix = prefix;
        }
    }

    public Owner {
        Objects.requireNonNull(kind, "kind");
        Objects.requireNonNull(name, "name");
        if (name.indexOf('\t') >= 0 || name.indexOf('\n') >= 0) {
            throw new IllegalArgumentException("an owner's name has no tab or newline: '" + name + "'");
        }
        if (kind == Kind.NAMED && (name.isEmpty() || name.equals(Kind.USER.prefix) || kindOf(name) != null)) {
            throw new IllegalArgumentException("'" + name + "' is not a name of its own (empty, 'user', or it starts "
                    + "with a kind's prefix such as 'pod:'): use the kind's owner");
        }
    }

    public static Owner pod(String namespace, String name) {
        return new Owner(Kind.POD, namespace + "/" + name);
    }

    public static Owner service(String namespaceAndName) {
        return new Owner(Kind.SERVICE, namespaceAndName);
    }

    public static Owner connection(long id) {
        return new Owner(Kind.CONNECTION, Long.toString(id));
    }

    public static Owner process(long pid) {
        return new Owner(Kind.PROCESS, Long.toString(pid));
    }

    /** An owner of the embedding program's naming (not a kind's prefix). */
    public static Owner named(String name) {
        return new Owner(Kind.NAMED, name);
    }

    /** The owner {@link #toString()} wrote. */
    public static Owner parse(String text) {
        if (text.equals(Kind.USER.prefix)) {
            return USER;
        }
        Kind k = kindOf(text);
        return k == null ? named(text) : new Owner(k, text.substring(k.prefix.length() + 1));
    }

    private static Kind kindOf(String text) {
        for (Kind k : Kind.values()) {
            if (!k.prefix.isEmpty() && k != Kind.USER && text.startsWith(k.prefix + ":")) {
                return k;
            }
        }
        return null;
    }

    @Override
    public String toString() {
        return switch (kind) {
            case USER -> kind.prefix;
            case NAMED -> name;
            default -> kind.prefix + ":" + name;
        };
    }
}
