package io.github.sockmap4j;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Arrays;

/** Programs the tests run in a second process. Each prints key=value lines. */
final class PeerMains {
    private PeerMains() {
    }

    static void echo(SocketChannel ch) throws Exception {
        ByteBuffer buf = ByteBuffer.allocateDirect(65536);
        while (ch.read(buf) >= 0) {
            buf.flip();
            while (buf.hasRemaining()) {
                ch.write(buf);
            }
            buf.clear();
        }
        ch.shutdownOutput();
    }

    /** A plain JDK echo server on 127.0.0.1, for one connection. */
    static final class EchoServer {
        public static void main(String[] args) throws Exception {
            try (ServerSocketChannel server = ServerSocketChannel.open()) {
                server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0));
                System.out.println("port=" + ((InetSocketAddress) server.getLocalAddress()).getPort());
                try (SocketChannel ch = server.accept()) {
                    echo(ch);
                }
                System.out.println("done=1");
            }
        }
    }

    /** A plain JDK client: connects, sends n bytes, reads them back, prints ok. */
    static final class EchoClient {
        public static void main(String[] args) throws Exception {
            int port = Integer.parseInt(args[0]);
            int n = Integer.parseInt(args[1]);
            byte[] data = new byte[n];
            new java.util.Random(n).nextBytes(data);
            try (SocketChannel ch = SocketChannel.open(new InetSocketAddress("127.0.0.1", port))) {
                ch.write(ByteBuffer.wrap(data));
                ByteBuffer back = ByteBuffer.allocate(n);
                while (back.hasRemaining() && ch.read(back) >= 0) {
                    // keep reading
                }
                System.out.println("ok=" + Arrays.equals(data, back.array()));
            }
        }
    }

    /** Opens the pin directory and cgroup of args, serves one echo, closes when told. */
    static final class SharedPins {
        public static void main(String[] args) throws Exception {
            SockmapConfig config = SockmapConfig.fromSystemProperties().withPinDirectory(Path.of(args[0]))
                    .withCgroup(Path.of(args[1])).withRequired(true);
            try (Sockmap sockmap = Sockmap.open(config);
                 SockmapServerChannel server = sockmap.openServerChannel()) {
                server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0));
                System.out.println("port=" + ((InetSocketAddress) server.getLocalAddress()).getPort());
                try (SocketChannel ch = server.accept()) {
                    System.out.println("accelerated=" + ((SockmapChannel) ch).isAccelerated());
                    echo(ch);
                }
                BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
                in.readLine();
            }
            System.out.println("closed=1");
        }
    }

    /** The whole library where the fast path cannot be had: prints why, and still echoes. */
    static final class Fallback {
        public static void main(String[] args) throws Exception {
            Sockmap sockmap = Sockmap.global();
            System.out.println("active=" + sockmap.isActive());
            System.out.println("cause=" + sockmap.unavailabilityCause());
            try (SockmapServerChannel server = SockmapServerChannel.open()) {
                server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0));
                byte[] data = new byte[100_000];
                new java.util.Random(7).nextBytes(data);
                try (SockmapChannel client = SockmapChannel.open(server.getLocalAddress());
                     SocketChannel side = server.accept()) {
                    Thread t = new Thread(() -> {
                        try {
                            echo(side);
                        } catch (Exception e) {
                            throw new IllegalStateException(e);
                        }
                    });
                    t.start();
                    client.write(ByteBuffer.wrap(data));
                    ByteBuffer back = ByteBuffer.allocate(data.length);
                    while (back.hasRemaining() && client.read(back) >= 0) {
                        // keep reading
                    }
                    System.out.println("accelerated=" + client.isAccelerated());
                    System.out.println("echo=" + Arrays.equals(data, back.array()));
                    client.shutdownOutput();
                    t.join();
                }
            }
        }
    }
}
