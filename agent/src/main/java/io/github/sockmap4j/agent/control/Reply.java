package io.github.sockmap4j.agent.control;

/**
 * A handler's answer to one {@link Request}: the text the client reads ({@code OK ...} or
 * {@code ERR ...}: one line, or for a list {@code OK N} and N lines), what it changed (then the
 * change is logged and the connection counts as used), or why it was refused (counted by reason;
 * a policy refusal is logged).
 *
 * @param text    what the client reads
 * @param change  what changed, for the log; null when nothing did (a query, or a refusal)
 * @param refusal why it was refused; null when it was not
 */
record Reply(String text, String change, ControlCounts.Refusal refusal) {
    /** A query answered: nothing changed. */
    static Reply answer(String text) {
        return new Reply("OK " + text, null, null);
    }

    /** Something changed; {@code what} says what, to the client and the log. */
    static Reply changed(String what) {
        return new Reply("OK " + what, what, null);
    }

    /** Refused for {@code why}, saying {@code reason} to the client. */
    static Reply refused(ControlCounts.Refusal why, String reason) {
        return new Reply("ERR " + reason, null, why);
    }

    /** A list's answer: {@code OK N}, then the N lines. */
    static Reply counted(java.util.List<String> lines) {
        StringBuilder b = new StringBuilder().append(lines.size());
        for (String l : lines) {
            b.append('\n').append(l);
        }
        return answer(b.toString());
    }
}
