package io.github.sockmap4j.testbed;

import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * Blocking C readers and writers ({@code testbed/src/main/c/blocking.c}) in one run: a server, a
 * client of many connections and, where asked, a relay between them that passes each end on as a
 * half-close; each counts the reads that failed with EAGAIN on its blocking sockets (and retries
 * them, so that every byte and every end is still checked) and the connections that saw something
 * else than they should.
 *
 * <p><b>Note:</b> not threadsafe; one run a call.
 */
public final class BlockingPeers {
    private BlockingPeers() {
    }

    /**
     * What one program counted: reads that failed with EAGAIN, connections done, those that went
     * wrong, and (a server's or relay's) those accepted and not yet done.
     */
    public record Counts(long eagain, long conns, long errors, long active) {
        static Counts parse(String afterEagain) {
            String[] f = ("eagain=" + afterEagain).split(" ");
            return new Counts(value(f[0]), value(f[1]), value(f[2]), f.length > 3 ? value(f[3]) : 0);
        }

        private static long value(String field) {
            return Long.parseLong(field.substring(field.indexOf('=') + 1));
        }
    }

    /** What the client, the server and the relay (null without one) counted. */
    public record Result(Counts client, Counts server, Counts relay) {
        /** EAGAIN of every program. */
        public long eagain() {
            return client.eagain() + server.eagain() + (relay == null ? 0 : relay.eagain());
        }

        @Override
        public String toString() {
            return "client " + client + ", server " + server + (relay == null ? "" : ", relay " + relay);
        }
    }

    /** How a program of the run is started (in a cgroup, a namespace, as a user). */
    @FunctionalInterface
    public interface Starter {
        ChildJvm start(List<String> command) throws IOException;
    }

    /** What makes a port's connections registered (an opt-in, an agent's rule), undone at close. */
    @FunctionalInterface
    public interface PortOptIn {
        AutoCloseable optIn(int port) throws Exception;
    }

    /**
     * One run: {@code conns} connections (8 at a time) to a server on {@code host}, each
     * {@code rounds} round trips of {@code size} bytes, ended as {@code end} says ("keep": the client
     * closes; "close": the server closes, the client reads its EOF; "reset": the server resets, the
     * client reads ECONNRESET); through a relay when {@code relayed}. Each port is opted in with
     * {@code optIn} before anything connects to it.
     */
    public static Result run(Path exe, String host, int conns, int rounds, int size, String end, boolean relayed,
                             Starter start, PortOptIn optIn) throws Exception {
        return run(exe, host, conns, rounds, size, end, relayed, start, start, optIn);
    }

    /** As {@link #run(Path, String, int, int, int, String, boolean, Starter, PortOptIn)}, the client started its own way. */
    public static Result run(Path exe, String host, int conns, int rounds, int size, String end, boolean relayed,
                             Starter start, Starter clientStart, PortOptIn optIn) throws Exception {
        List<AutoCloseable> open = new ArrayList<>();
        try {
            ChildJvm server = started(start, open, List.of(exe.toString(), "server", host, "0", Integer.toString(rounds),
                    Integer.toString(size), end));
            int port = Integer.parseInt(server.expect("port=", 30));
            server.expect("eagain=", 30);
            open.add(optIn.optIn(port));
            ChildJvm relay = null;
            int dial = port;
            if (relayed) {
                relay = started(start, open, List.of(exe.toString(), "relay", host, "0", host + ":" + port));
                dial = Integer.parseInt(relay.expect("port=", 30));
                relay.expect("eagain=", 30);
                open.add(optIn.optIn(dial));
            }
            Counts client;
            try (ChildJvm c = clientStart.start(List.of(exe.toString(), "client", host, Integer.toString(dial),
                    Integer.toString(conns), Integer.toString(rounds), Integer.toString(size), end, "8"))) {
                client = Counts.parse(c.expect("eagain=", 600));
            }
            boolean failed = client.errors() > 0;
            Counts relayCounts = relay == null ? null : doneWith(relay, client.conns(), failed);
            return new Result(client, doneWith(server, client.conns(), failed), relayCounts);
        } finally {
            java.util.Collections.reverse(open);
            for (AutoCloseable c : open) {
                c.close();
            }
        }
    }

    private static ChildJvm started(Starter start, List<AutoCloseable> open, List<String> command) throws IOException {
        ChildJvm p = start.start(command);
        open.add(p);
        return p;
    }

    /**
     * {@code p}'s counts (a server or relay of blocking.c) once it has done {@code conns}
     * connections: a relay finishes after its client. Fails naming where its active connections
     * wait if it has not within a minute.
     */
    public static Counts doneWith(ChildJvm p, long conns) throws InterruptedException {
        return doneWith(p, conns, false);
    }

    /**
     * As {@link #doneWith(ChildJvm, long)}; where {@code clientFailed} (some of the client's
     * connections went wrong, so some may never have reached {@code p}), also once {@code p} has
     * no connection left to finish.
     */
    static Counts doneWith(ChildJvm p, long conns, boolean clientFailed) throws InterruptedException {
        Counts[] last = new Counts[1];
        boolean done = Await.holdsWithin(Duration.ofSeconds(Await.scaled(60)), () -> {
            last[0] = counts(p);
            return last[0].conns() >= conns || clientFailed && last[0].active() == 0;
        });
        if (!done) {
            throw new AssertionError("not all of " + conns + " connections done within a minute: " + describe(p));
        }
        return last[0];
    }

    /** {@code p}'s counts and where its active connections wait (phase/TCP state/bytes queued). */
    public static String describe(ChildJvm p) {
        try {
            Counts c = counts(p);
            p.send("stuck");
            return c + ", waiting " + p.expect("stuck=", 30);
        } catch (Exception | AssertionError e) {
            return "(no answer: " + e.getMessage() + ")";
        }
    }

    private static Counts counts(ChildJvm p) throws InterruptedException {
        p.send("count");
        return Counts.parse(p.expect("eagain=", 30));
    }
}
