package io.github.sockmap4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.testsupport.TestKernel;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/**
 * The counters against what the sockets sent: a writer that does not hold back for credit (a
 * JDK socket on an opted-in port, as an unchanged service's) goes past the in-flight bound to
 * TCP (and back, when its reader happens to drain everything at a send: not in every run, as
 * docs/in-flight-bound.md says); afterwards the bytes the counters say went by TCP are what the writing socket's
 * TCP sent and had acknowledged ({@code ss -ti}'s {@code bytes_acked}), and redirected plus by
 * TCP is what the application wrote.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 300, unit = TimeUnit.SECONDS)
@Tag("kernel")
class TcpBytesCountedTest {
    private static final Pattern ACKED = Pattern.compile("bytes_acked:(\\d+)");
    private static final Pattern SENT = Pattern.compile("bytes_sent:(\\d+)");
    private static final Pattern RETRANS = Pattern.compile("bytes_retrans:(\\d+)");

    TestKernel kernel;
    Sockmap sockmap;

    @BeforeAll
    void start() throws IOException {
        kernel = TestKernel.start("tcpbytes", c -> c.toBuilder().credit(false).build());
        sockmap = kernel.sockmap;
    }

    @AfterAll
    void stop() throws IOException {
        if (kernel != null) {
            kernel.close();
        }
    }

    /**
     * What TCP of the established socket with local port {@code port} (the server's end) says it
     * sent: bytes_acked, bytes_sent (which counts a retransmitted byte again) and bytes_retrans.
     */
    static long[] tcpBytes(int port) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(io.github.sockmap4j.testbed.Sh.tool("ss"), "-tinH", "state", "established",
                "( sport = :" + port + " )").redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        p.waitFor(10, TimeUnit.SECONDS);
        // A socket that sent nothing by TCP shows none of them.
        return new long[] {field(out, ACKED), field(out, SENT), field(out, RETRANS)};
    }

    private static long field(String out, Pattern p) {
        Matcher m = p.matcher(out);
        return m.find() ? Long.parseLong(m.group(1)) : 0;
    }

    interface Writer {
        void write(Socket accepted, SocketChannel acceptedChannel, long total) throws Exception;
    }

    @Test
    void aBlockingJdkWriterPastTheBound() throws Exception {
        check("blocking java.net.Socket", false, (s, ch, total) -> {
            OutputStream out = s.getOutputStream();
            byte[] chunk = new byte[256 << 10];
            for (long sent = 0; sent < total; sent += chunk.length) {
                InFlightBoundTest.fill(ByteBuffer.wrap(chunk), sent / 8);
                out.write(chunk);
            }
            out.flush();
        });
    }

    @Test
    void aNonBlockingJdkWriterPastTheBound() throws Exception {
        check("non-blocking SocketChannel", true, (s, ch, total) -> {
            ch.configureBlocking(false);
            try (Selector sel = Selector.open()) {
                ch.register(sel, SelectionKey.OP_WRITE);
                ByteBuffer b = ByteBuffer.allocateDirect(64 << 10);
                for (long sent = 0; sent < total; sent += b.capacity()) {
                    InFlightBoundTest.fill(b, sent / 8);
                    while (b.hasRemaining()) {
                        if (ch.write(b) == 0) {
                            sel.select(1000);
                            sel.selectedKeys().clear();
                        }
                    }
                }
            }
        });
    }

    @Test
    void sendfileFromAFilePastTheBound() throws Exception {
        java.nio.file.Path file = java.nio.file.Files.createTempFile("sm4j-sendfile", ".bin");
        try {
            long total = 256L << 20;
            try (java.nio.channels.FileChannel f = java.nio.channels.FileChannel.open(file,
                    java.nio.file.StandardOpenOption.WRITE)) {
                ByteBuffer b = ByteBuffer.allocateDirect(1 << 20);
                for (long sent = 0; sent < total; sent += b.capacity()) {
                    InFlightBoundTest.fill(b, sent / 8);
                    while (b.hasRemaining()) {
                        f.write(b);
                    }
                }
            }
            check("sendfile (FileChannel.transferTo)", true, (s, ch, n) -> {
                try (java.nio.channels.FileChannel f = java.nio.channels.FileChannel.open(file)) {
                    long pos = 0;
                    while (pos < n) {
                        pos += f.transferTo(pos, n - pos, ch);
                    }
                }
            });
        } finally {
            java.nio.file.Files.deleteIfExists(file);
        }
    }

    private void check(String what, boolean channel, Writer writer) throws Exception {
        long total = 256L << 20;
        InetAddress lo = InetAddress.getByName("127.0.0.1");
        try (ServerSocketChannel server = ServerSocketChannel.open()) {
            server.bind(new InetSocketAddress(lo, 0));
            int port = ((InetSocketAddress) server.getLocalAddress()).getPort();
            try (OptIn optIn = sockmap.optIn(port);
                 Socket reader = new Socket(lo, port);
                 SocketChannel accepted = server.accept()) {
                SockmapStats before = sockmap.stats();
                CompletableFuture<Void> write = CompletableFuture.runAsync(() -> {
                    try {
                        writer.write(channel ? null : accepted.socket(), accepted, total);
                    } catch (Exception e) {
                        throw new IllegalStateException(e);
                    }
                }, TestThreads.POOL);
                // A reader slow at first (past the bound), then fast (back on the redirect).
                InputStream in = reader.getInputStream();
                byte[] buf = new byte[16 << 10];
                ByteBuffer check = ByteBuffer.allocate(buf.length + 8);
                long got = 0;
                long expected = 0;
                long badAt = -1;
                while (got < total) {
                    int n = in.read(buf);
                    assertTrue(n > 0, "early end of stream at " + got);
                    got += n;
                    check.put(buf, 0, n).flip();
                    while (check.remaining() >= 8) {
                        if (check.getLong() != expected && badAt < 0) {
                            badAt = expected * 8;
                        }
                        expected++;
                    }
                    check.compact();
                    if (got < total / 4 && (got & ((256 << 10) - 1)) < n) {
                        Thread.sleep(2);
                    }
                }
                write.get(60, TimeUnit.SECONDS);
                assertEquals(-1, badAt, "bytes out of order or lost");
                SockmapStats after = sockmap.stats();
                long redirected = after.bytesRedirected() - before.bytesRedirected();
                long tcp = after.bytesPassed() - before.bytesPassed();
                // The reader's last ACK may still be on its way (delayed ACKs).
                io.github.sockmap4j.testbed.Await.holdsWithin(java.time.Duration.ofSeconds(5),
                        () -> tcpBytes(port)[0] >= tcp);
                long[] sockets = tcpBytes(port);
                System.out.printf("%s: wrote %d B, redirected %d B, by TCP %d B (counters); the socket's TCP: "
                                + "acked %d B, sent %d B of which retransmitted %d B; %d bound hits, %d resumes%n",
                        what, total, redirected, tcp, sockets[0], sockets[1], sockets[2],
                        after.boundHits() - before.boundHits(), after.resumes() - before.resumes());
                assertTrue(optIn.active(), "opted in");
                assertTrue(after.boundHits() > before.boundHits(), "the reader was slow enough to hit the bound");
                assertEquals(sockets[0], tcp, "bytes by TCP: the counters against what the socket's TCP had acked");
                assertEquals(sockets[1] - sockets[2], tcp, "and against what it sent, less its retransmissions");
                assertEquals(total, redirected + tcp, "redirected and by TCP: what was written");
            }
        }
    }
}
