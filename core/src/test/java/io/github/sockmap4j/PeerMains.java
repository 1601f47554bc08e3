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
public final class PeerMains {
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

    /**
     * Opens {@link Sockmap#global()}, keeps two threads calling it (and opting a port in and out)
     * in a loop, and exits with {@code System.exit} while they run: the exit hook must close the
     * global for good.
     */
    static final class GlobalThenExit {
        public static void main(String[] args) throws Exception {
            System.out.println("active=" + Sockmap.global().isActive());
            for (int t = 0; t < 2; t++) {
                Thread busy = new Thread(() -> {
                    while (true) {
                        try {
                            OptIn o = Sockmap.global().optIn(40_000 + (int) (Thread.currentThread().threadId() % 1000));
                            Sockmap.global().stats();
                            o.close();
                        } catch (Exception e) {
                            // closed under us during exit: keep calling
                        }
                    }
                }, "busy-" + t);
                busy.setDaemon(true);
                busy.start();
            }
            Thread.sleep(200);
            System.exit(0);
        }
    }

    /** A plain JDK echo server on 127.0.0.1 (or args[0]), for one connection. */
    public static final class EchoServer {
        private EchoServer() {
        }

        public static void main(String[] args) throws Exception {
            String host = args.length > 0 ? args[0] : "127.0.0.1";
            try (ServerSocketChannel server = ServerSocketChannel.open()) {
                server.bind(new InetSocketAddress(InetAddress.getByName(host), 0));
                System.out.println("port=" + ((InetSocketAddress) server.getLocalAddress()).getPort());
                try (SocketChannel ch = server.accept()) {
                    echo(ch);
                }
                System.out.println("done=1");
            }
        }
    }

    /** A plain JDK client: connects to 127.0.0.1 (or args[2]), sends n bytes, reads them back, prints ok. */
    public static final class EchoClient {
        private EchoClient() {
        }

        public static void main(String[] args) throws Exception {
            int port = Integer.parseInt(args[0]);
            int n = Integer.parseInt(args[1]);
            String host = args.length > 2 ? args[2] : "127.0.0.1";
            byte[] data = new byte[n];
            new java.util.Random(n).nextBytes(data);
            try (SocketChannel ch = SocketChannel.open(new InetSocketAddress(host, port))) {
                ch.write(ByteBuffer.wrap(data));
                ByteBuffer back = ByteBuffer.allocate(n);
                while (back.hasRemaining() && ch.read(back) >= 0) {
                    // keep reading
                }
                System.out.println("ok=" + Arrays.equals(data, back.array()));
            }
        }
    }

    /**
     * A loopback connection with a fixed 4-tuple (127.0.0.1:args[1] -> 127.0.0.1:args[0]):
     * run in two network namespaces at once, both have the same tuple. Each side checks that
     * every message it receives carries this process's tag (args[2]).
     */
    public static final class LoopbackPair {
        private LoopbackPair() {
        }

        public static void main(String[] args) throws Exception {
            InetAddress lo = InetAddress.getByName("127.0.0.1");
            int port = Integer.parseInt(args[0]);
            int clientPort = Integer.parseInt(args[1]);
            int tag = Integer.parseInt(args[2]);
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            try (ServerSocketChannel server = ServerSocketChannel.open(); SocketChannel client = SocketChannel.open()) {
                server.bind(new InetSocketAddress(lo, port));
                client.setOption(java.net.StandardSocketOptions.SO_REUSEADDR, true);
                client.bind(new InetSocketAddress(lo, clientPort));
                client.connect(new InetSocketAddress(lo, port));
                try (SocketChannel side = server.accept()) {
                    System.out.println("connected=1");
                    in.readLine(); // both namespaces are connected: go
                    long foreign = 0;
                    ByteBuffer msg = ByteBuffer.allocate(8);
                    for (int i = 0; i < 2000; i++) {
                        SocketChannel from = i % 2 == 0 ? client : side;
                        SocketChannel to = i % 2 == 0 ? side : client;
                        msg.clear().putInt(tag).putInt(i).flip();
                        while (msg.hasRemaining()) {
                            from.write(msg);
                        }
                        msg.clear();
                        while (msg.hasRemaining() && to.read(msg) >= 0) {
                            // keep reading
                        }
                        msg.flip();
                        if (msg.getInt() != tag || msg.getInt() != i) {
                            foreign++;
                        }
                    }
                    System.out.println("foreign=" + foreign);
                    in.readLine(); // quit
                }
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

    /**
     * Opens the pin directory and cgroup of args[0], args[1], connects to 127.0.0.1:args[2] with a
     * SockmapChannel, reads args[3] bytes, prints read=, then reads no more until killed.
     */
    static final class StallingReader {
        public static void main(String[] args) throws Exception {
            SockmapConfig config = SockmapConfig.fromSystemProperties().withPinDirectory(Path.of(args[0]))
                    .withCgroup(Path.of(args[1])).withRequired(true);
            try (Sockmap sockmap = Sockmap.open(config); SockmapChannel ch = sockmap.openChannel()) {
                ch.connect(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), Integer.parseInt(args[2])));
                long want = Long.parseLong(args[3]);
                ByteBuffer b = ByteBuffer.allocateDirect(64 << 10);
                long got = 0;
                while (got < want) {
                    b.clear().limit((int) Math.min(b.capacity(), want - got));
                    int n = ch.read(b);
                    if (n < 0) {
                        break;
                    }
                    got += n;
                }
                System.out.println("bound=" + ch.inFlightBound());
                System.out.println("read=" + got);
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
            }
        }
    }
}
