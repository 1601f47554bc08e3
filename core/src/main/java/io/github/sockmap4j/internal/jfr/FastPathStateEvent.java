package io.github.sockmap4j.internal.jfr;

import jdk.jfr.Category;
import jdk.jfr.Description;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;

/** The fast path of a pin directory turned on or off, with why (JFR: io.github.sockmap4j.FastPathState). */
@Name("io.github.sockmap4j.FastPathState")
@Label("sockmap4j Fast Path State")
@Category("sockmap4j")
@Description("The sockmap fast path was opened or closed: its mode and, when off, the reason")
public final class FastPathStateEvent extends Event {
    @Label("Active")
    public boolean active;

    @Label("Reason")
    @Description("Why the fast path is off; empty when active")
    public String reason;

    @Label("Pin Directory")
    public String pinDirectory;

    @Label("Cgroup")
    public String cgroup;

    /** Commits one event when a recording wants it. */
    public static void emit(boolean active, String reason, String pinDirectory, String cgroup) {
        FastPathStateEvent e = new FastPathStateEvent();
        if (e.shouldCommit()) {
            e.active = active;
            e.reason = reason;
            e.pinDirectory = pinDirectory;
            e.cgroup = cgroup;
            e.commit();
        }
    }
}
