package io.github.sockmap4j.internal.agent;

import io.github.sockmap4j.internal.net.UnixListener;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The agent's control socket: reads {@link AgentRequest} lines, checks each against the policy
 * file with the requester's kernel-given credentials, and applies it through the {@link RuleBook}.
 * One thread accepts, one thread serves each connection (a connection is one process's client).
 *
 * <p><b>Note:</b> {@link #start} and {@link #close} are threadsafe.
 */
public final class ControlServer implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(ControlServer.class);

    private final UnixListener listener;
    private final RuleBook book;
    private final AgentPolicy policy;
    private final AtomicLong ids = new AtomicLong();
    private final AtomicLong requests = new AtomicLong();
    private final AtomicLong refused = new AtomicLong();
    private final Set<UnixListener.Connection> open = ConcurrentHashMap.newKeySet();
    private Thread acceptor;
    private volatile boolean stopping;

    public ControlServer(UnixListener listener, RuleBook book, AgentPolicy policy) {
        this.listener = listener;
        this.book = book;
        this.policy = policy;
    }

    public synchronized ControlServer start() {
        acceptor = new Thread(this::acceptLoop, "sockmap4j-agent-control");
        acceptor.setDaemon(true);
        acceptor.start();
        return this;
    }

    public boolean isRunning() {
        Thread t = acceptor;
        return t != null && t.isAlive();
    }

    public long requests() {
        return requests.get();
    }

    public long refused() {
        return refused.get();
    }

    private void acceptLoop() {
        try {
            UnixListener.Connection c;
            while ((c = listener.accept()) != null) {
                UnixListener.Connection conn = c;
                String id = "conn:" + ids.incrementAndGet();
                open.add(conn);
                Thread t = new Thread(() -> serve(conn, id), "sockmap4j-agent-" + id);
                t.setDaemon(true);
                t.start();
            }
        } catch (IOException | RuntimeException e) {
            LOG.error("The agent's control socket {} stopped: opt-ins through it fail until the agent restarts: {}",
                    listener.path(), e.toString());
        }
    }

    private void serve(UnixListener.Connection conn, String id) {
        UnixListener.Credentials who = conn.peer();
        try {
            String line;
            while ((line = conn.readLine(AgentRequest.MAX_LINE)) != null) {
                conn.writeLine(answer(who, id, line));
            }
        } catch (IOException | RuntimeException e) {
            LOG.debug("Agent connection {} of pid {} ended: {}", id, who.pid(), e.toString());
        } finally {
            open.remove(conn);
            if (!stopping) {
                // When the agent stops instead, the rules stay, held for the next agent (RuleBook.load).
                book.connectionClosed(id);
            }
            conn.close();
        }
    }

    /** The answer line to one request line. */
    String answer(UnixListener.Credentials who, String id, String line) {
        requests.incrementAndGet();
        AgentRequest req;
        try {
            req = AgentRequest.parse(line);
        } catch (IllegalArgumentException e) {
            refused.incrementAndGet();
            return "ERR " + e.getMessage();
        }
        if (req.verb() == AgentRequest.Verb.PING) {
            return "OK agent";
        }
        if (req.verb() == AgentRequest.Verb.LIST) {
            return "OK " + String.join("; ", book.describeAll());
        }
        if (req.verb() != AgentRequest.Verb.DENY) {
            String no = policy.refusal(who.uid(), groups(who), req);
            if (no != null) {
                refused.incrementAndGet();
                LOG.info("Refused '{}' of uid {} (pid {}): {}", line, who.uid(), who.pid(), no);
                return "ERR " + no;
            }
        }
        try {
            String done = book.apply(who.uid(), who.pid(), id, req);
            LOG.info("{} for uid {} (pid {})", done, who.uid(), who.pid());
            return "OK " + done;
        } catch (RuleBook.Refused e) {
            refused.incrementAndGet();
            return "ERR " + e.getMessage();
        } catch (IOException e) {
            refused.incrementAndGet();
            return "ERR " + e.getMessage();
        }
    }

    /** The requester's primary and supplementary groups (from /proc, as the process has them now). */
    private static Set<Integer> groups(UnixListener.Credentials who) {
        Set<Integer> g = new HashSet<>();
        g.add(who.gid());
        try {
            for (String l : Files.readAllLines(Path.of("/proc/" + who.pid() + "/status"))) {
                if (l.startsWith("Groups:")) {
                    for (String s : l.substring(7).trim().split("\\s+")) {
                        if (!s.isEmpty()) {
                            g.add(Integer.parseInt(s));
                        }
                    }
                }
            }
        } catch (IOException | NumberFormatException e) {
            // The process is gone; its primary group is what the kernel recorded.
        }
        return g;
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
