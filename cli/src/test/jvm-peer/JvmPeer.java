// SPDX-License-Identifier: Apache-2.0
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;

/**
 * A JVM service that knows nothing of sockmap4j (plain java.net sockets, no library on its class
 * path), for the agent's container run: what the node agent accelerates is any pod's TCP.
 *
 * <pre>
 * java JvmPeer serve ECHO_PORT STREAM_PORT
 * java JvmPeer stream ADDR PORT TOTAL
 * </pre>
 *
 * {@code serve}: ECHO_PORT echoes every connection until its EOF ("echo bytes=N" then);
 * STREAM_PORT reads big-endian 64-bit sequence numbers from 0 until EOF ("stream ok bytes=N", or
 * "stream bad at=N" at the first wrong one). Prints "listening" once both listen; runs until
 * killed. {@code stream}: connects and writes TOTAL bytes of those numbers in 64 KiB writes, as
 * fast as it can; prints "ok=1" when all are written.
 */
public final class JvmPeer {
    public static void main(String[] args) throws IOException {
        if (args[0].equals("stream")) {
            stream(args[1], Integer.parseInt(args[2]), Long.parseLong(args[3]));
            return;
        }
        ServerSocket echo = new ServerSocket(Integer.parseInt(args[1]));
        ServerSocket stream = new ServerSocket(Integer.parseInt(args[2]));
        accepting(echo, JvmPeer::echo);
        accepting(stream, JvmPeer::sink);
        System.out.println("listening echo=" + echo.getLocalPort() + " stream=" + stream.getLocalPort());
    }

    private static void stream(String host, int port, long total) throws IOException {
        try (Socket s = new Socket(host, port)) {
            OutputStream out = s.getOutputStream();
            ByteBuffer buf = ByteBuffer.allocate(64 << 10);
            long seq = 0;
            for (long left = total; left > 0; left -= buf.capacity()) {
                buf.clear();
                while (buf.hasRemaining()) {
                    buf.putLong(seq++);
                }
                out.write(buf.array(), 0, (int) Math.min(left, buf.capacity()));
            }
        }
        System.out.println("ok=1");
    }

    interface Serve {
        String serve(Socket s) throws IOException;
    }

    private static void accepting(ServerSocket server, Serve serve) {
        Thread.ofPlatform().start(() -> {
            while (true) {
                try {
                    Socket s = server.accept();
                    Thread.ofPlatform().start(() -> {
                        try (s) {
                            System.out.println(serve.serve(s));
                        } catch (IOException e) {
                            System.out.println("failed " + e);
                        }
                    });
                } catch (IOException e) {
                    System.out.println("accept failed " + e);
                    return;
                }
            }
        });
    }

    private static String echo(Socket s) throws IOException {
        InputStream in = s.getInputStream();
        OutputStream out = s.getOutputStream();
        byte[] buf = new byte[64 << 10];
        long total = 0;
        for (int n; (n = in.read(buf)) > 0; total += n) {
            out.write(buf, 0, n);
        }
        return "echo bytes=" + total;
    }

    private static String sink(Socket s) throws IOException {
        InputStream in = s.getInputStream();
        ByteBuffer buf = ByteBuffer.allocate(64 << 10);
        long total = 0;
        long expected = 0;
        for (int n; (n = in.read(buf.array(), buf.position(), buf.remaining())) > 0; ) {
            total += n;
            buf.position(buf.position() + n).flip();
            while (buf.remaining() >= Long.BYTES) {
                if (buf.getLong() != expected) {
                    return "stream bad at=" + expected * Long.BYTES;
                }
                expected++;
            }
            buf.compact();
        }
        return buf.position() == 0 ? "stream ok bytes=" + total : "stream bad at=" + expected * Long.BYTES;
    }
}
