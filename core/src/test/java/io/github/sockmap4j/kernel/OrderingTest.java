package io.github.sockmap4j.kernel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapServerChannel;
import io.github.sockmap4j.SockmapStats;
import io.github.sockmap4j.testsupport.TestKernel;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * docs/kernel.md "Registration window and ordering": 1,000 connections that write sequence-numbered messages right after
 * connect(), to a server that accepts only after all of them wrote. Not one message may be
 * reordered or lost, and the bytes must have gone through the redirect.
 */
@Tag("kernel")
class OrderingTest {
    static final int CONNECTIONS = 1000;
    static final int MESSAGES = 200;

    @Test
    @Timeout(value = 180, unit = TimeUnit.SECONDS)
    void writesRightAfterConnectToALateAcceptorStayInOrder() throws Exception {
        java.io.Closeable runStats = TestKernel.runStats();
        try (runStats; TestKernel kernel = TestKernel.start("ordering")) {
            Sockmap sockmap = kernel.sockmap;
            SockmapStats before = sockmap.stats();
            // The kernel's own count of sk_msg runs (bpf_prog_info.run_cnt), independent of ours:
            // counted while the run statistics are on, as they are from here on.
            long runsBefore = sockmap.verdictRunCount();
            List<SocketChannel> clients = new ArrayList<>();
            try (SockmapServerChannel server = sockmap.openServerChannel()) {
                server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0), CONNECTIONS + 24);
                InetSocketAddress addr = (InetSocketAddress) server.getLocalAddress();
                ByteBuffer msg = ByteBuffer.allocateDirect(8);
                for (int c = 0; c < CONNECTIONS; c++) {
                    SocketChannel ch = SocketChannel.open(addr); // a default JDK socket, dual-stack
                    clients.add(ch);
                    for (int m = 0; m < MESSAGES; m++) {
                        msg.clear().putInt(c).putInt(m).flip();
                        while (msg.hasRemaining()) {
                            ch.write(msg);
                        }
                    }
                }
                long reordered = 0;
                long lost = 0;
                ByteBuffer in = ByteBuffer.allocateDirect(8 * MESSAGES);
                for (int c = 0; c < CONNECTIONS; c++) {
                    try (SocketChannel side = server.accept()) {
                        in.clear();
                        while (in.hasRemaining()) {
                            if (side.read(in) < 0) {
                                break;
                            }
                        }
                        in.flip();
                        int expected = 0;
                        int conn = -1;
                        while (in.remaining() >= 8) {
                            int id = in.getInt();
                            int seq = in.getInt();
                            if (conn < 0) {
                                conn = id;
                            }
                            if (id != conn || seq != expected) {
                                reordered++;
                            }
                            expected = seq + 1;
                        }
                        lost += MESSAGES - (in.limit() / 8);
                    }
                }
                assertEquals(0, reordered, "messages out of order");
                assertEquals(0, lost, "messages lost");
            } finally {
                for (SocketChannel ch : clients) {
                    ch.close();
                }
            }
            SockmapStats after = sockmap.stats();
            long bytes = (long) CONNECTIONS * MESSAGES * 8;
            long redirected = after.bytesRedirected() - before.bytesRedirected();
            long passed = after.bytesPassed() - before.bytesPassed();
            System.out.printf("ordering: %d bytes redirected, %d passed to TCP, %d sockets tainted%n",
                    redirected, passed, after.socketsTainted() - before.socketsTainted());
            assertEquals(bytes, redirected + passed, "every byte went through the verdict program");
            assertTrue(redirected > 0, "nothing was redirected");
            long runs = sockmap.verdictRunCount() - runsBefore;
            System.out.printf("ordering: sk_msg run_cnt %d%n", runs);
            assertTrue(runsBefore >= 0 && runs >= (long) CONNECTIONS * MESSAGES, "run_cnt " + runs);
        }
    }
}
