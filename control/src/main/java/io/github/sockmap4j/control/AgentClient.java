package io.github.sockmap4j.control;

import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * A connection to a node agent's control socket: one request, one answer at a time. Rules
 * made with {@link AgentRequest.Verb#OPTIN} last as long as this connection.
 *
 * <p><b>Note:</b> this class is threadsafe (requests are serialised).
 */
public final class AgentClient implements AutoCloseable {
    private final Path socket;
    private SocketChannel channel;
    private ByteBuffer in = ByteBuffer.allocate(AgentRequest.MAX_LINE * 4);

    private AgentClient(Path socket, SocketChannel channel) {
        this.socket = socket;
        this.channel = channel;
    }

    /**
     * Connects to the agent listening at {@code socket}; null when no agent listens there (no
     * socket file, or nobody accepting on it: an agent that stopped).
     */
    public static AgentClient connectIfRunning(Path socket) throws IOException {
        if (!Files.exists(socket)) {
            return null;
        }
        SocketChannel ch = SocketChannel.open(StandardProtocolFamily.UNIX);
        try {
            ch.connect(UnixDomainSocketAddress.of(socket));
        } catch (java.net.ConnectException e) {
            ch.close();
            return null; // a socket file left by an agent that died
        } catch (IOException e) {
            ch.close();
            throw new IOException("cannot reach the sockmap4j agent at " + socket + ": " + e.getMessage(), e);
        }
        return new AgentClient(socket, ch);
    }

    /**
     * Sends a request and returns the agent's answer text.
     *
     * @throws IOException with the agent's reason when it refused, or when the connection broke
     */
    public synchronized String call(AgentRequest request) throws IOException {
        return answer(request, exchange(request));
    }

    /**
     * Sends {@code request} and reads the first line back. An agent closes a connection that held
     * no rule and sent nothing for a while ({@link AgentRequest#IDLE_CLOSED} first): this client
     * then held nothing to lose, so it connects again and sends the request once more.
     */
    private String exchange(AgentRequest request) throws IOException {
        for (int attempt = 0; ; attempt++) {
            String line;
            try {
                send(request);
                line = readLine(AgentRequest.MAX_LINE * 4);
            } catch (ClosedByAgent e) {
                line = e.line;
            }
            if (attempt == 0 && line.startsWith(AgentRequest.IDLE_CLOSED)) {
                reconnect();
                continue;
            }
            return line;
        }
    }

    private void reconnect() throws IOException {
        channel.close();
        in.clear();
        SocketChannel ch = SocketChannel.open(StandardProtocolFamily.UNIX);
        try {
            ch.connect(UnixDomainSocketAddress.of(socket));
        } catch (IOException e) {
            ch.close();
            throw new IOException("cannot reach the sockmap4j agent at " + socket + " again: " + e.getMessage(), e);
        }
        channel = ch;
    }

    /**
     * Sends a LIST request and returns its lines, one a rule.
     *
     * @throws IOException with the agent's reason when it refused, or when the connection broke
     */
    public synchronized java.util.List<String> list() throws IOException {
        return lines(AgentRequest.list());
    }

    /**
     * Sends a request answered by a count and that many lines (LIST, SERVICES); returns the lines.
     *
     * @throws IOException with the agent's reason when it refused, or when the connection broke
     */
    public synchronized java.util.List<String> lines(AgentRequest request) throws IOException {
        String head = answer(request, exchange(request)).trim();
        int n;
        try {
            n = Integer.parseInt(head);
        } catch (NumberFormatException e) {
            throw new IOException("unexpected answer to " + request.verb() + " from the sockmap4j agent at " + socket + ": 'OK " + head
                    + "' (an agent of another version?)");
        }
        java.util.List<String> lines = new java.util.ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            lines.add(readLine(AgentRequest.MAX_LIST_LINE));
        }
        return lines;
    }

    private void send(AgentRequest request) throws IOException {
        ByteBuffer out = ByteBuffer.wrap((request.format() + "\n").getBytes(StandardCharsets.UTF_8));
        try {
            while (out.hasRemaining()) {
                channel.write(out);
            }
        } catch (IOException e) {
            // The agent closed the connection (a limit, a timeout): it said why first.
            String why;
            try {
                why = readLine(AgentRequest.MAX_LINE * 4);
            } catch (IOException none) {
                throw new IOException("cannot send to the sockmap4j agent at " + socket + " (" + e.getMessage()
                        + "): it closed the connection", e);
            }
            throw new ClosedByAgent(why);
        }
    }

    /** The agent closed the connection before this request, saying {@code line}. */
    private static final class ClosedByAgent extends IOException {
        private static final long serialVersionUID = 1L;
        final String line;

        ClosedByAgent(String line) {
            super(line);
            this.line = line;
        }
    }

    private String answer(AgentRequest request, String line) throws IOException {
        if (line.startsWith("OK")) {
            return line.length() > 3 ? line.substring(3) : "";
        }
        if (line.startsWith("ERR ")) {
            throw new AgentRefusedException("the sockmap4j agent refused '" + request.format() + "': "
                    + line.substring(4));
        }
        throw new IOException("unexpected answer from the sockmap4j agent at " + socket + ": " + line);
    }

    private String readLine(int max) throws IOException {
        while (true) {
            for (int i = 0; i < in.position(); i++) {
                if (in.get(i) == '\n') {
                    String line = new String(in.array(), 0, i, StandardCharsets.UTF_8);
                    in.flip().position(i + 1);
                    in.compact();
                    return line;
                }
            }
            if (!in.hasRemaining()) {
                if (in.capacity() >= max) {
                    throw new IOException("the sockmap4j agent at " + socket + " sent a line over " + max + " bytes");
                }
                ByteBuffer bigger = ByteBuffer.allocate(Math.min(max, in.capacity() * 2));
                in.flip();
                bigger.put(in);
                in = bigger;
            }
            if (channel.read(in) < 0) {
                throw new IOException("the sockmap4j agent at " + socket + " closed the connection (stopped?)");
            }
        }
    }

    public Path socket() {
        return socket;
    }

    @Override
    public void close() throws IOException {
        channel.close();
    }

    /** The agent answered, and its answer is no. */
    public static final class AgentRefusedException extends IOException {
        private static final long serialVersionUID = 1L;

        AgentRefusedException(String message) {
            super(message);
        }
    }
}
