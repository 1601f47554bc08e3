package io.github.sockmap4j.control;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** What a client says when the agent turned its connection away: the agent's reason, not "Broken pipe". */
class AgentClientTest {
    @TempDir
    Path dir;

    @Test
    void aConnectionTheAgentClosedSaysTheAgentsReason() throws Exception {
        Path path = dir.resolve("agent.sock");
        try (ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
            server.bind(UnixDomainSocketAddress.of(path));
            try (AgentClient client = AgentClient.connectIfRunning(path)) {
                try (SocketChannel agent = server.accept()) {
                    agent.write(ByteBuffer.wrap("ERR process 42 (uid 7) has 8 connections to the agent open\n"
                            .getBytes(StandardCharsets.US_ASCII)));
                }
                // Refused at once, as the agent does: the client's first write meets a closed socket.
                IOException e = assertThrows(IOException.class, () -> {
                    for (int i = 0; i < 100; i++) {
                        client.call(AgentRequest.ping());
                    }
                });
                assertTrue(e instanceof AgentClient.AgentRefusedException, e.toString());
                assertTrue(e.getMessage().contains("has 8 connections to the agent open"), e.getMessage());
            }
        } finally {
            Files.deleteIfExists(path);
        }
    }

    @Test
    void aRefusalAnsweredToARequestNamesTheRequest() throws Exception {
        Path path = dir.resolve("agent2.sock");
        try (ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
            server.bind(UnixDomainSocketAddress.of(path));
            try (AgentClient client = AgentClient.connectIfRunning(path);
                 SocketChannel agent = server.accept()) {
                agent.write(ByteBuffer.wrap("ERR no\n".getBytes(StandardCharsets.US_ASCII)));
                IOException e = assertThrows(AgentClient.AgentRefusedException.class,
                        () -> client.call(AgentRequest.ping()));
                assertEquals("the sockmap4j agent refused 'PING': no", e.getMessage());
            }
        } finally {
            Files.deleteIfExists(path);
        }
    }

    /**
     * An agent closes a connection that held nothing and sent nothing for its idle time: the
     * client's next request connects again and is answered (a library that opted in nothing for a
     * while still can).
     */
    @Test
    void aConnectionClosedIdleIsMadeAgainForTheNextRequest() throws Exception {
        Path path = dir.resolve("agent3.sock");
        try (ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
            server.bind(UnixDomainSocketAddress.of(path));
            try (AgentClient client = AgentClient.connectIfRunning(path)) {
                try (SocketChannel idle = server.accept()) {
                    idle.write(ByteBuffer.wrap((AgentRequest.IDLE_CLOSED + " nothing sent for 30 s, holding no rule\n")
                            .getBytes(StandardCharsets.US_ASCII)));
                }
                Thread agent = Thread.ofPlatform().start(() -> {
                    try (SocketChannel again = server.accept()) {
                        ByteBuffer b = ByteBuffer.allocate(64);
                        while (b.position() == 0 || b.get(b.position() - 1) != '\n') {
                            again.read(b);
                        }
                        again.write(ByteBuffer.wrap("OK agent\n".getBytes(StandardCharsets.US_ASCII)));
                    } catch (IOException e) {
                        throw new java.io.UncheckedIOException(e);
                    }
                });
                assertEquals("agent", client.call(AgentRequest.ping()));
                agent.join();
            }
        } finally {
            Files.deleteIfExists(path);
        }
    }
}
