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

    /** What one program counted: reads that failed with EAGAIN, connections done, and those that went wrong. */
    public record Counts(long eagain, long conns, long errors) {
        static Counts parse(String afterEagain) {
            String[] f = ("eagain=" + afterEagain).split(" ");
            return new Counts(value(f[0]), value(f[1]), value(f[2]));
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
            Counts relayCounts = relay == null ? null : doneWith(relay, client.conns());
            return new Result(client, doneWith(server, client.conns()), relayCounts);
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
     * connections: a relay finishes after its client.
     */
    public static Counts doneWith(ChildJvm p, long conns) throws InterruptedException {
        Counts[] last = new Counts[1];
        Await.until("the program's connections are done", Duration.ofSeconds(Await.scaled(60)), () -> {
            p.send("count");
            last[0] = Counts.parse(p.expect("eagain=", 30));
            return last[0].conns() >= conns;
        });
        return last[0];
    }
}
