package io.github.sockmap4j.agent.control;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Consumer;
import java.util.function.LongSupplier;
import org.slf4j.helpers.MessageFormatter;

/**
 * Log lines about what users ask of the agent, at a bounded rate whatever they send: the first
 * {@code perWindow} of each window go out one by one, the rest are counted by uid and told in one
 * summary line once the window has passed (at the next line, or at {@link #flush}, which the
 * agent calls each second). A user looping connect and close past a limit, or allow and deny,
 * costs the log at most {@code perWindow + 1} lines a window, not one a request.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
final class BoundedLog {
    /** Uids counted one by one in a window; the rest together (a user may hold 65,536 subordinate uids). */
    static final int MAX_UIDS = 1024;
    private static final int SHOWN_UIDS = 5;

    private final String what;
    private final int perWindow;
    private final long windowNanos;
    private final LongSupplier clock;
    private final Consumer<String> sink;
    private long windowStart;
    private int logged;
    private long held;
    private long heldOthers;
    private final Map<Integer, Long> heldByUid = new TreeMap<>();

    /**
     * @param what      what the lines tell, plural ("refusals"), for the summary
     * @param perWindow lines logged one by one in a window
     * @param window    the window, in nanoseconds of {@code clock}
     * @param clock     the time now, in nanoseconds
     * @param sink      where a line goes (a logger's info)
     */
    BoundedLog(String what, int perWindow, long window, LongSupplier clock, Consumer<String> sink) {
        this.what = what;
        this.perWindow = perWindow;
        this.windowNanos = window;
        this.clock = clock;
        this.sink = sink;
        this.windowStart = clock.getAsLong();
    }

    /** One line about {@code uid}'s request, in SLF4J's {@code {}} format. */
    synchronized void log(int uid, String format, Object... args) {
        roll(clock.getAsLong());
        if (logged < perWindow) {
            logged++;
            sink.accept(MessageFormatter.arrayFormat(format, args).getMessage());
            return;
        }
        held++;
        if (heldByUid.containsKey(uid) || heldByUid.size() < MAX_UIDS) {
            heldByUid.merge(uid, 1L, Long::sum);
        } else {
            heldOthers++;
        }
    }

    /** Tells what a window that has passed held back. */
    synchronized void flush() {
        roll(clock.getAsLong());
    }

    private void roll(long now) {
        if (now - windowStart < windowNanos) {
            return;
        }
        if (held > 0) {
            List<Map.Entry<Integer, Long>> top = new ArrayList<>(heldByUid.entrySet());
            top.sort(Map.Entry.<Integer, Long>comparingByValue().reversed());
            StringBuilder by = new StringBuilder();
            for (int i = 0; i < Math.min(SHOWN_UIDS, top.size()); i++) {
                by.append(i == 0 ? "" : ", ").append("uid ").append(top.get(i).getKey()).append(": ")
                        .append(top.get(i).getValue());
            }
            int uids = heldByUid.size() + (heldOthers > 0 ? 1 : 0);
            if (uids > SHOWN_UIDS) {
                by.append(", and ").append(uids - SHOWN_UIDS).append(heldOthers > 0 ? "+" : "").append(" other uid(s)");
            }
            sink.accept(String.format(Locale.ROOT, "%d more %s in %.0f s than the %d logged one by one (%s)", held, what,
                    (now - windowStart) / 1e9, perWindow, by));
        }
        windowStart = now;
        logged = 0;
        held = 0;
        heldOthers = 0;
        heldByUid.clear();
    }
}
