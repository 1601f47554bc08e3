package io.github.sockmap4j.arrow.shared;

import jdk.jfr.Category;
import jdk.jfr.Description;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;

/** One end's outcome of an agreement to lend Arrow batches (JFR: io.github.sockmap4j.ArrowLending). */
@Name("io.github.sockmap4j.ArrowLending")
@Label("sockmap4j Arrow Lending")
@Category("sockmap4j")
@Description("Two ends of an Arrow connection agreed to lend batches by reference, or did not and why")
final class LendingEvent extends Event {
    @Label("Outcome")
    @Description("LENT, or the reason nothing is lent (PROXIED, NO_BROKER, NOT_ALLOWED, TOO_LARGE, ...)")
    String outcome;

    @Label("Details")
    String details;

    /** Commits one event when a recording wants it. */
    static void emit(String outcome, String details) {
        LendingEvent e = new LendingEvent();
        if (e.shouldCommit()) {
            e.outcome = outcome;
            e.details = details;
            e.commit();
        }
    }
}
