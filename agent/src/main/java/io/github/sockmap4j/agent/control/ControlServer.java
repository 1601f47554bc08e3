package io.github.sockmap4j.agent.control;

import io.github.sockmap4j.agent.Owner;
import io.github.sockmap4j.control.AgentRequest;
import io.github.sockmap4j.linux.ffi.Errno;
import io.github.sockmap4j.linux.net.UnixListener;
import java.io.IOException;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The agent's control socket as a transport: accepts connections ({@link Admission} decides which
 * are served), reads request lines within the line and idle times, and hands each line, with the
 * requester's kernel-given credentials (recorded when it connected), to the {@link Dispatcher},
 * which parses it and answers it through its verb's handler. One thread accepts, one thread
 * serves each connection (a connection is one process's client, and the lease of its
 * {@code OPTIN} rules in the {@link RuleBook}: they go when it closes).
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
    public record Limits(int connectionsPerProcess, int connectionsPerUid, int connections, int reserve,
                         int requestsPerSecond, int burst, int idleSeconds, int lineSeconds) {
        /**
         * 8 a process, 128 a user's share (a node's every pod under one runAsUser), 1,024 in all,
         * the last 128 of them kept for shares holding fewer than 8: whatever any number of users
         * hold, the next 16 users to come are served.
         */
        public static final Limits DEFAULT = new Limits(8, 128, 1024, 128, 200, 400, 30, 10);

        public Limits {
            if (connectionsPerProcess < 1 || connectionsPerUid < connectionsPerProcess
                    || connections < connectionsPerUid || reserve < 0 || reserve >= connections
                    || requestsPerSecond < 1 || burst < 1 || idleSeconds < 1 || lineSeconds < 1) {
                throw new IllegalArgumentException("limits must be positive, connections >= connectionsPerUid >= "
                        + "connectionsPerProcess, 0 <= reserve < connections: " + this);
            }
        }

        /** The same with other idle and line times (for tests that wait them out). */
        public Limits withTimes(int idle, int line) {
            return new Limits(connectionsPerProcess, connectionsPerUid, connections, reserve, requestsPerSecond, burst,
                    idle, line);
        }
    }

    private final UnixListener listener;
    private final Dispatcher dispatcher;
    private final ControlCounts counts;
    /** The connections' leases: the OPTIN rules each holds. */
    private final RuleBook leases;
    private final Limits limits;
    private final Admission admission;
    private final AtomicLong ids = new AtomicLong();
    private final Set<UnixListener.Connection> open = ConcurrentHashMap.newKeySet();
    private Thread acceptor;
    private volatile boolean stopping;
    private volatile boolean acceptFailing;

    /**
     * @param listener   the bound socket
     * @param dispatcher what answers each line
     * @param leases     the rule book whose OPTIN rules a connection holds
     * @param limits     what users other than root may use
     */
    public ControlServer(UnixListener listener, Dispatcher dispatcher, RuleBook leases, Limits limits) {
        this.listener = listener;
        this.dispatcher = dispatcher;
        this.counts = dispatcher.counts();
        this.leases = leases;
        this.limits = limits;
        this.admission = new Admission(limits);
    }

    public synchronized ControlServer start() {
        // What the loop's error path needs, loaded now: out of descriptors, a class file could not be opened then.
        Errno.error("accept", -Errno.EMFILE, listener.path().toString()).getMessage();
        acceptor = new Thread(this::acceptLoop, "sockmap4j-agent-control");
        acceptor.setDaemon(true);
        acceptor.start();
        return this;
    }

    /** What was done and refused. */
    public ControlCounts counts() {
        return counts;
    }

    public boolean isRunning() {
        Thread t = acceptor;
        return t != null && t.isAlive();
    }

    /** Whether a client connecting now is served: accepting, and accept(2) not failing. */
    public boolean isServing() {
        return isRunning() && !acceptFailing;
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
            counts.count(ControlCounts.Refusal.CONNECTION);
            counts.logRefusal(uid, "Refused a connection of uid {} (pid {}): {}", uid, conn.peer().pid(), no);
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
                    () -> leases.holds(id))) != null) {
                Dispatcher.Answer answer = dispatcher.answer(who, id, line);
                conn.writeLine(answer.text());
                if (answer.changed()) {
                    lastUse = System.nanoTime();
                }
            }
        } catch (UnixListener.LineTooLongException e) {
            counts.count(ControlCounts.Refusal.LINE);
            counts.logRefusal(who.uid(), "Closed agent connection {} of uid {} (pid {}): {}", id, who.uid(), who.pid(),
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
            counts.count(ControlCounts.Refusal.LINE);
            counts.logRefusal(who.uid(), "Closed agent connection {} of uid {} (pid {}): {}", id, who.uid(), who.pid(),
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
                leases.connectionClosed(id);
            }
            conn.close();
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
