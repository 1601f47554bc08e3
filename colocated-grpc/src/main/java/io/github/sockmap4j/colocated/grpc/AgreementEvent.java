package io.github.sockmap4j.colocated.grpc;

import jdk.jfr.Category;
import jdk.jfr.Description;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;

/** One end's outcome of a co-located agreement (JFR: io.github.sockmap4j.ColocatedAgreement). */
@Name("io.github.sockmap4j.ColocatedAgreement")
@Label("sockmap4j Co-located Agreement")
@Category("sockmap4j")
@Description("A channel and a server agreed on a co-located connection, or stayed on HTTP/2 and why")
final class AgreementEvent extends Event {
    @Label("Outcome")
    @Description("UPGRADED, or the fallback's reason (NOT_OURS, PROXIED, NO_BROKER, ...)")
    String outcome;

    @Label("Details")
    String details;

    /** Commits one event when a recording wants it. */
    static void emit(String outcome, String details) {
        AgreementEvent e = new AgreementEvent();
        if (e.shouldCommit()) {
            e.outcome = outcome;
            e.details = details;
            e.commit();
        }
    }
}
