package io.github.sockmap4j.agent.control;

import java.util.EnumMap;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What the control socket did, for the agent's meters and log: requests answered OK, refusals by
 * reason (each counted once, at the connection, the line or the request), and the log of both,
 * bounded so that a user's loop cannot flood it.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
public final class ControlCounts {
    private static final Logger LOG = LoggerFactory.getLogger(ControlServer.class);

    /** Why the control socket refused something: one counter each. */
    public enum Refusal {
        /** A connection past a limit at admission (it made no request). */
        CONNECTION,
        /** A line over the limit, or half a line past the line time (the connection closes). */
        LINE,
        /** A request past the uid's rate. */
        RATE,
        /** A request that does not parse. */
        MALFORMED,
        /** A request the policy (or another user's listener) does not allow. */
        POLICY,
        /** A request the rule or Service books refused (quota, ownership, the map). */
        BOOK;

        /** The metric's tag value. */
        public String tag() {
            return name().toLowerCase(Locale.ROOT);
        }
    }

    private final AtomicLong done = new AtomicLong();
    private final EnumMap<Refusal, AtomicLong> refused = new EnumMap<>(Refusal.class);
    /**
     * What users' requests are told in the log: at most 20 refusals and 100 changes one by one
     * each 10 s, the rest summed by uid (a loop past a limit logged 52,956 lines in 5 s).
     */
    private final BoundedLog refusals = new BoundedLog("refusals", 20, TimeUnit.SECONDS.toNanos(10), System::nanoTime,
            LOG::info);
    private final BoundedLog changes = new BoundedLog("changes", 100, TimeUnit.SECONDS.toNanos(10), System::nanoTime,
            LOG::info);

    public ControlCounts() {
        for (Refusal r : Refusal.values()) {
            refused.put(r, new AtomicLong());
        }
    }

    /** Requests answered OK. */
    public long done() {
        return done.get();
    }

    /** What was refused for {@code why} so far. */
    public long refusedFor(Refusal why) {
        return refused.get(why).get();
    }

    /** Requests answered ERR (every refusal but of a connection or a line). */
    public long refusedRequests() {
        return refusedFor(Refusal.RATE) + refusedFor(Refusal.MALFORMED) + refusedFor(Refusal.POLICY)
                + refusedFor(Refusal.BOOK);
    }

    /** Tells in the log what the last window held back of refusals and changes; each second. */
    public void flushLogs() {
        refusals.flush();
        changes.flush();
    }

    void countDone() {
        done.incrementAndGet();
    }

    void count(Refusal why) {
        refused.get(why).incrementAndGet();
    }

    /** A refusal of {@code uid}'s, in the bounded log. */
    void logRefusal(int uid, String format, Object... args) {
        refusals.log(uid, format, args);
    }

    /** A change {@code uid} made, in the bounded log. */
    void logChange(int uid, String format, Object... args) {
        changes.log(uid, format, args);
    }
}
