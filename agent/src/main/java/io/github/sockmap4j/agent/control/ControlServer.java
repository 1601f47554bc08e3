package io.github.sockmap4j.agent.control;

import io.github.sockmap4j.agent.Owner;
import io.github.sockmap4j.control.AgentRequest;
import io.github.sockmap4j.linux.ffi.Errno;
import io.github.sockmap4j.linux.net.UnixListener;
import java.io.IOException;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BiFunction;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The agent's control socket: accepts connections ({@link Admission} decides which are served),
 * reads {@link AgentRequest} lines, and hands each parsed request, with the requester's
 * kernel-given credentials (recorded when it connected), to its handler in one switch: rules to
 * the {@link RuleBook} after the policy file's check, Services to the {@link ServiceBook}. One
 * thread accepts, one thread serves each connection (a connection is one process's client).
 *
 * <p>What one user can do to it is bounded, and every refusal says why: a uid other than root has
 * at most {@link Limits#connectionsPerUid} connections open and all of them together
 * {@link Limits#connections} (root's are not counted), sends at most {@link Limits#requestsPerSecond}
 * requests a second (a burst of {@link Limits#burst}), holds at most its quota of rules, and sends
 * lines of at most {@link AgentRequest#MAX_LINE} bytes. A failing accept(2) (out of descriptors)
 * backs off and tries again, and {@link #isServing()} is false until it works again.
 *
 * <p><b>Note:</b> {@link #start} and {@link #close} are threadsafe.
 */
public final class ControlServer implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(ControlServer.class);
    private static final long BACKOFF_MIN_NANOS = TimeUnit.MILLISECONDS.toNanos(10);
    private static final long BACKOFF_MAX_NANOS = TimeUnit.SECONDS.toNanos(1);

    /**
     * What users other than root may use of the agent. A connection is a process's lease on its
     * {@code OPTIN} rules (they go when it closes), so a library holds one for its process's life:
     * connections are counted per process first, then per uid with room for a node's every pod
     * running as one uid (Kubernetes' default limit is 110 pods a node), then all together. A
     * connection that holds no rule and sends nothing for {@code idleSeconds} is closed, and so is
     * one that leaves half a line for {@code lineSeconds}: holding connections open costs a user
     * nothing it can keep.
     *
     * @param connectionsPerProcess open connections of one process
     * @param connectionsPerUid     open connections of one uid's processes together
     * @param connections           open connections of all uids but root together
     * @param requestsPerSecond     requests a second one uid may send, on average
     * @param burst                 requests one uid may send at once
     * @param idleSeconds           how long a connection holding no rule may send nothing
     * @param lineSeconds           how long a line may take from its first byte to its newline
     */
    public record Limits(int connectionsPerProcess, int connectionsPerUid, int connections, int requestsPerSecond,
                         int burst, int idleSeconds, int lineSeconds) {
        public static final Limits DEFAULT = new Limits(8, 128, 1024, 200, 400, 30, 10);

        public Limits {
            if (connectionsPerProcess < 1 || connectionsPerUid < connectionsPerProcess
                    || connections < connectionsPerUid || requestsPerSecond < 1 || burst < 1 || idleSeconds < 1
                    || lineSeconds < 1) {
                throw new IllegalArgumentException("limits must be positive, connections >= connectionsPerUid >= "
                        + "connectionsPerProcess: " + this);
            }
        }

        /** The same with other idle and line times (for tests that wait them out). */
        public Limits withTimes(int idle, int line) {
            return new Limits(connectionsPerProcess, connectionsPerUid, connections, requestsPerSecond, burst, idle,
                    line);
        }
    }

    private final UnixListener listener;
    private final RuleBook book;
    /** The Services put through this socket. */
    private final ServiceBook services;
    /** Why SERVICE and UNSERVICE are refused to everyone now (another writer owns the map), or null. */
    private volatile String servicesOwnedBy;
    private final AgentPolicy policy;
    private final Limits limits;
    private final AtomicLong ids = new AtomicLong();
    /** Requests answered OK. */
    private final AtomicLong done = new AtomicLong();
    /** Refusals by reason, each counted once: connections, lines and requests. */
    private final java.util.EnumMap<Refusal, AtomicLong> refused = new java.util.EnumMap<>(Refusal.class);

    {
        for (Refusal r : Refusal.values()) {
            refused.put(r, new AtomicLong());
        }
    }

    /** Why the control socket refused something: one counter each ({@link #refusals}). */
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
            return name().toLowerCase(java.util.Locale.ROOT);
        }
    }
    /**
     * What users' requests are told in the log: at most 20 refusals and 100 changes one by one
     * each 10 s, the rest summed by uid (a loop past a limit logged 52,956 lines in 5 s).
     */
    private final BoundedLog refusals = new BoundedLog("refusals", 20, TimeUnit.SECONDS.toNanos(10), System::nanoTime,
            LOG::info);
    private final BoundedLog changes = new BoundedLog("changes", 100, TimeUnit.SECONDS.toNanos(10), System::nanoTime,
            LOG::info);
    private final Set<UnixListener.Connection> open = ConcurrentHashMap.newKeySet();
    private final Admission admission;
    private final RequestRate rate;
    private Thread acceptor;
    private volatile boolean stopping;
    private volatile boolean acceptFailing;

    public ControlServer(UnixListener listener, RuleBook book, ServiceBook services, AgentPolicy policy, Limits limits) {
        this.listener = listener;
        this.book = book;
        this.services = java.util.Objects.requireNonNull(services, "services");
        this.policy = policy;
        this.limits = limits;
        this.admission = new Admission(limits);
        this.rate = new RequestRate(limits.requestsPerSecond(), limits.burst());
    }

    public synchronized ControlServer start() {
        // What the loop's error path needs, loaded now: out of descriptors, a class file could not be opened then.
        Errno.error("accept", -Errno.EMFILE, listener.path().toString()).getMessage();
        acceptor = new Thread(this::acceptLoop, "sockmap4j-agent-control");
        acceptor.setDaemon(true);
        acceptor.start();
        return this;
    }

    public boolean isRunning() {
        Thread t = acceptor;
        return t != null && t.isAlive();
    }

    /** Whether a client connecting now is served: accepting, and accept(2) not failing. */
    public boolean isServing() {
        return isRunning() && !acceptFailing;
    }

    /**
     * From now on SERVICE and UNSERVICE are refused, to root too, saying {@code why}: another
     * writer owns the Service map (the Kubernetes feed), and would undo them.
     */
    public void refuseServices(String why) {
        servicesOwnedBy = why;
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
        return refusedFor(Refusal.RATE) + refusedFor(Refusal.MALFORMED) + refusedFor(Refusal.POLICY) + refusedFor(Refusal.BOOK);
    }

    private void refuse(Refusal why) {
        refused.get(why).incrementAndGet();
    }

    /** Tells in the log what the last window held back of refusals and changes; each second. */
    public void flushLogs() {
        refusals.flush();
        changes.flush();
    }

    private void acceptLoop() {
        long backoff = BACKOFF_MIN_NANOS;
        while (!stopping) {
            UnixListener.Connection c;
            try {
                c = listener.accept();
            } catch (IOException | RuntimeException | LinkageError | OutOfMemoryError e) {
                // Out of descriptors, threads or memory for a moment: nothing here ends the loop
                // for good, or the socket would die while /healthz still said the agent lives.
                if (stopping) {
                    return;
                }
                if (!acceptFailing) {
                    LOG.error("The agent's control socket {} cannot accept ({}): not ready, retrying; opt-ins "
                            + "through it wait until it can (a client holding many connections, or a low fd limit: "
                            + "ulimit -n)", listener.path(), e.getMessage());
                    acceptFailing = true;
                }
                LockSupport.parkNanos(backoff);
                backoff = Math.min(backoff * 2, BACKOFF_MAX_NANOS);
                continue;
            }
            if (c == null) {
                return;
            }
            if (acceptFailing) {
                LOG.info("The agent's control socket {} accepts again", listener.path());
                acceptFailing = false;
            }
            backoff = BACKOFF_MIN_NANOS;
            admit(c);
        }
    }

    /** What is left of {@code idle} since {@code lastUse} (at least a nanosecond), or forever. */
    private static long left(long idle, long lastUse) {
        return idle == Long.MAX_VALUE ? idle : Math.max(1, lastUse + idle - System.nanoTime());
    }

    /** Serves {@code conn} on a thread of its own, or refuses it with the reason when {@link Admission} does. */
    private void admit(UnixListener.Connection conn) {
        int uid = conn.peer().uid();
        String no = admission.admit(conn);
        if (no != null) {
            refuse(Refusal.CONNECTION);
            refusals.log(uid, "Refused a connection of uid {} (pid {}): {}", uid, conn.peer().pid(), no);
            try {
                conn.writeLine("ERR " + no);
            } catch (IOException ignored) {
                // It hung up already.
            }
            conn.close();
            return;
        }
        Owner id = Owner.connection(ids.incrementAndGet());
        open.add(conn);
        try {
            Thread t = new Thread(() -> serve(conn, id), "sockmap4j-agent-" + id);
            t.setDaemon(true);
            t.start();
        } catch (OutOfMemoryError | RuntimeException e) {
            LOG.error("No thread for agent connection {} of uid {}: {}", id, uid, e.toString());
            release(conn);
            conn.close();
        }
    }

    private void release(UnixListener.Connection conn) {
        open.remove(conn);
        admission.release(conn);
    }

    private void serve(UnixListener.Connection conn, Owner id) {
        UnixListener.Credentials who = conn.peer();
        try {
            String line;
            // Root's connections are not timed: its own tools, trusted like the rest of its requests.
            long idle = who.uid() == 0 ? Long.MAX_VALUE : TimeUnit.SECONDS.toNanos(limits.idleSeconds());
            long lineTime = who.uid() == 0 ? Long.MAX_VALUE : TimeUnit.SECONDS.toNanos(limits.lineSeconds());
            // The idle time runs from the last request that got something done: a PING, LIST or
            // SERVICES now and then (a keep-alive), or a request refused, does not hold an idle slot.
            long lastUse = System.nanoTime();
            while ((line = conn.readLine(AgentRequest.MAX_LINE, lineTime, left(idle, lastUse),
                    () -> book.holds(id))) != null) {
                Answer answer = answer(who, id, line);
                conn.writeLine(answer.text());
                if (answer.changed()) {
                    lastUse = System.nanoTime();
                }
            }
        } catch (UnixListener.LineTooLongException e) {
            refuse(Refusal.LINE);
            refusals.log(who.uid(), "Closed agent connection {} of uid {} (pid {}): {}", id, who.uid(), who.pid(),
                    e.getMessage());
            try {
                conn.writeLine("ERR " + e.getMessage() + ": a request is one line of at most "
                        + AgentRequest.MAX_LINE + " bytes; closing this connection");
            } catch (IOException ignored) {
                // It hung up already.
            }
        } catch (UnixListener.IdleException e) {
            String why = "no request that changed anything for " + limits.idleSeconds() + " s (PING, LIST, SERVICES "
                    + "and refused requests do not count), holding no rule";
            LOG.debug("Closed agent connection {} of uid {} (pid {}): {}", id, who.uid(), who.pid(), why);
            try {
                conn.writeLine(AgentRequest.IDLE_CLOSED + " " + why + ": closing this connection (connect "
                        + "again when there is something to ask)");
            } catch (IOException ignored) {
                // It hung up already, or takes nothing.
            }
        } catch (UnixListener.TimedOutException e) {
            refuse(Refusal.LINE);
            refusals.log(who.uid(), "Closed agent connection {} of uid {} (pid {}): {}", id, who.uid(), who.pid(),
                    e.getMessage());
            try {
                conn.writeLine("ERR " + e.getMessage() + ": closing this connection");
            } catch (IOException ignored) {
                // It hung up already, or takes nothing.
            }
        } catch (IOException | RuntimeException e) {
            LOG.debug("Agent connection {} of pid {} ended: {}", id, who.pid(), e.toString());
        } finally {
            release(conn);
            if (!stopping) {
                // When the agent stops instead, the rules stay, held for the next agent (RuleBook.load).
                book.connectionClosed(id);
            }
            conn.close();
        }
    }

    /**
     * What a request was answered: {@code text} (one line, or for LIST and SERVICES a count and
     * that many lines), and whether it changed anything (an OK to a request other than PING, LIST
     * and SERVICES): only such a request keeps an idle connection open.
     */
    record Answer(String text, boolean changed) {
    }

    /**
     * The answer to one request line. The line is parsed once, into an {@link AgentRequest}; one
     * switch hands it on.
     */
    Answer answer(UnixListener.Credentials who, Owner id, String line) {
        if (!rate.take(who.uid())) {
            refuse(Refusal.RATE);
            return new Answer("ERR uid " + who.uid() + " sends more than " + limits.requestsPerSecond()
                    + " requests a second: slow down and send it again", false);
        }
        AgentRequest req;
        try {
            req = AgentRequest.parse(line);
        } catch (IllegalArgumentException e) {
            refuse(Refusal.MALFORMED);
            return new Answer("ERR " + e.getMessage(), false);
        }
        String text = switch (req.verb()) {
            case PING -> {
                done.incrementAndGet();
                yield "OK agent";
            }
            case LIST -> {
                done.incrementAndGet();
                yield counted(book.describeFor(who.uid()));
            }
            case SERVICES -> servicesAnswer(who.uid());
            case SERVICE, UNSERVICE -> serviceAnswer(who, line, req);
            case ALLOW, OPTIN, BOUND, DENY -> ruleAnswer(who, id, line, req);
        };
        boolean query = switch (req.verb()) {
            case PING, LIST, SERVICES -> true;
            case SERVICE, UNSERVICE, ALLOW, OPTIN, BOUND, DENY -> false;
        };
        return new Answer(text, !query && text.startsWith("OK"));
    }

    /** ALLOW, OPTIN, BOUND (checked against the policy file and other users' servers) and DENY. */
    private String ruleAnswer(UnixListener.Credentials who, Owner id, String line, AgentRequest req) {
        if (req.verb() != AgentRequest.Verb.DENY) {
            String no = policy.refusal(who.uid(), who.groups(), req);
            if (no == null) {
                no = foreignListener(who, req);
            }
            if (no != null) {
                refuse(Refusal.POLICY);
                refusals.log(who.uid(), "Refused '{}' of uid {} (pid {}): {}", line, who.uid(), who.pid(), no);
                return "ERR " + no;
            }
        }
        try {
            String done = book.apply(who.uid(), who.pid(), id, req, policy.quota(who.uid()));
            changes.log(who.uid(), "{} for uid {} (pid {})", done, who.uid(), who.pid());
            this.done.incrementAndGet();
            return "OK " + done;
        } catch (RuleBook.Refused | IOException e) {
            refuse(Refusal.BOOK);
            return "ERR " + e.getMessage();
        }
    }

    /** The bound rule for users' servers (see {@link ForeignServers}); null: not checked. */
    private volatile ForeignServers foreignServers;

    /**
     * From now on, a user's bound on a port another uid listens on is refused; {@code listeners}
     * gives who listens on a port, in the namespace of a requester's pid and those the agent watches.
     */
    public void checkListeners(BiFunction<Integer, Long, List<Listeners.Listener>> listeners) {
        foreignServers = new ForeignServers(listeners);
    }

    private String foreignListener(UnixListener.Credentials who, AgentRequest req) {
        ForeignServers f = foreignServers;
        return f == null ? null : f.refusal(who.uid(), who.pid(), req);
    }

    /** The answer to LIST and SERVICES: {@code OK N}, then the N lines. */
    private static String counted(List<String> lines) {
        StringBuilder b = new StringBuilder("OK ").append(lines.size());
        for (String l : lines) {
            b.append('\n').append(l);
        }
        return b.toString();
    }

    /** SERVICES: the Services {@code uid} may see ({@link ServiceBook#describeFor}). */
    private String servicesAnswer(int uid) {
        try {
            String answer = counted(services.describeFor(uid));
            done.incrementAndGet();
            return answer;
        } catch (IOException e) {
            refuse(Refusal.BOOK);
            return "ERR " + e.getMessage();
        }
    }

    /** SERVICE (checked against the policy file) and UNSERVICE, through the {@link ServiceBook}. */
    private String serviceAnswer(UnixListener.Credentials who, String line, AgentRequest req) {
        try {
            String owned = servicesOwnedBy;
            if (owned != null) {
                throw new RuleBook.Refused(owned);
            }
            String done;
            if (req.verb() == AgentRequest.Verb.SERVICE) {
                String no = policy.serviceRefusal(who.uid(), who.groups(), req.service());
                if (no != null) {
                    refuse(Refusal.POLICY);
                    refusals.log(who.uid(), "Refused '{}' of uid {} (pid {}): {}", line, who.uid(), who.pid(), no);
                    return "ERR " + no;
                }
                done = services.put(who.uid(), who.pid(), req.service(), policy.quota(who.uid()));
            } else {
                done = services.remove(who.uid(), who.pid(), req.service().vip());
            }
            changes.log(who.uid(), "{} for uid {} (pid {})", done, who.uid(), who.pid());
            this.done.incrementAndGet();
            return "OK " + done;
        } catch (RuleBook.Refused | IOException e) {
            refuse(Refusal.BOOK);
            return "ERR " + e.getMessage();
        }
    }

    /** Stops accepting; open connections end and their OPTIN holders are kept on file for the next agent. */
    @Override
    public void close() {
        stopping = true;
        listener.close();
        for (UnixListener.Connection c : open) {
            c.stop();
        }
        Thread t;
        synchronized (this) {
            t = acceptor;
        }
        if (t != null) {
            try {
                t.join(2000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
