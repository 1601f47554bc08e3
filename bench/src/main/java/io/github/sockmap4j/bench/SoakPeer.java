package io.github.sockmap4j.bench;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapChannel;
import io.github.sockmap4j.SockmapServerChannel;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.util.ArrayList;
import java.util.List;

/**
 * The chaos soak's JVM peers (scripts/agent.sh chaos), speaking what testbed/src/main/c/peer.c speaks,
 * over {@link SockmapChannel}s of {@link Sockmap#global()} (pins and cgroup from the usual
 * {@code sockmap4j.*} properties, as the agent's):
 *
 * <pre>
 * SoakPeer stream-server PORT TOTAL   accept one, read TOTAL bytes of big-endian 64-bit sequence numbers
 * SoakPeer stream-client PORT TOTAL   write them in 64 KiB writes
 * SoakPeer pp-server PORT             accept one, echo until EOF
 * SoakPeer pp-client PORT COUNT SIZE  COUNT round trips of SIZE bytes, each checked
 * SoakPeer hold PORT PAIRS SECONDS    PAIRS idle connections to itself, for SECONDS
 * </pre>
 *
 * Servers print port=N once listening; all print ok=1 when done, bad=OFFSET at a byte out of
 * place, or error=WHAT.
 */
public final class SoakPeer {
    private SoakPeer() {
    }

    public static void main(String[] args) throws Exception {
        try {
            run(args);
        } catch (IOException e) {
            System.out.println("error=" + e);
            System.exit(1);
        }
    }

    private static void run(String[] args) throws Exception {
        Sockmap sockmap = Sockmap.global();
        InetAddress lo = InetAddress.getByName("127.0.0.1");
        int port = Integer.parseInt(args[1]);
        switch (args[0]) {
            case "stream-server", "pp-server" -> {
                try (SockmapServerChannel server = sockmap.openServerChannel()) {
                    server.bind(new InetSocketAddress(lo, port));
                    System.out.println("port=" + ((InetSocketAddress) server.getLocalAddress()).getPort());
                    try (SocketChannel ch = server.accept()) {
                        if (args[0].equals("pp-server")) {
                            echo(ch);
                        } else if (!readSequence(ch, Long.parseLong(args[2]))) {
                            System.exit(1);
                        }
                    }
                }
            }
            case "stream-client" -> {
                try (SockmapChannel ch = sockmap.openChannel()) {
                    ch.connect(new InetSocketAddress(lo, port));
                    writeSequence(ch, Long.parseLong(args[2]));
                    ch.shutdownOutput();
                    ch.read(ByteBuffer.allocate(1)); // until the reader closes: every byte was taken
                }
            }
            case "pp-client" -> {
                try (SockmapChannel ch = sockmap.openChannel()) {
                    ch.connect(new InetSocketAddress(lo, port));
                    pingPong(ch, Integer.parseInt(args[2]), Integer.parseInt(args[3]));
                }
            }
            case "hold" -> hold(sockmap, lo, port, Integer.parseInt(args[2]), Long.parseLong(args[3]));
            default -> throw new IllegalArgumentException("unknown mode " + args[0]);
        }
        System.out.println("ok=1");
    }

    static void echo(SocketChannel ch) throws IOException {
        ByteBuffer b = ByteBuffer.allocateDirect(65536);
        while (ch.read(b) >= 0) {
            b.flip();
            while (b.hasRemaining()) {
                ch.write(b);
            }
            b.clear();
        }
    }

    static boolean readSequence(SocketChannel ch, long total) throws IOException {
        ByteBuffer b = ByteBuffer.allocateDirect(65536 + 8);
        long got = 0;
        long expected = 0;
        while (got < total) {
            int n = ch.read(b);
            if (n < 0) {
                throw new IOException("EOF after " + got + " of " + total + " bytes");
            }
            got += n;
            b.flip();
            while (b.remaining() >= 8) {
                long v = b.getLong();
                if (v != expected) {
                    System.out.println("bad=" + expected * 8);
                    return false;
                }
                expected++;
            }
            b.compact();
        }
        return true;
    }

    static void writeSequence(SocketChannel ch, long total) throws IOException {
        ByteBuffer b = ByteBuffer.allocateDirect(65536);
        long seq = 0;
        for (long sent = 0; sent < total; sent += b.capacity()) {
            b.clear();
            int chunk = (int) Math.min(b.capacity(), total - sent);
            for (int i = 0; i < chunk; i += 8) {
                b.putLong(seq++);
            }
            b.flip();
            while (b.hasRemaining()) {
                ch.write(b);
            }
        }
    }

    static void pingPong(SocketChannel ch, int count, int size) throws IOException {
        ByteBuffer out = ByteBuffer.allocateDirect(size);
        ByteBuffer in = ByteBuffer.allocateDirect(size);
        for (int i = 0; i < count; i++) {
            out.clear();
            while (out.hasRemaining()) {
                out.put((byte) i);
            }
            out.flip();
            while (out.hasRemaining()) {
                ch.write(out);
            }
            in.clear();
            while (in.hasRemaining()) {
                if (ch.read(in) < 0) {
                    throw new IOException("EOF at round trip " + i);
                }
            }
            if (in.get(size - 1) != (byte) i || in.get(0) != (byte) i) {
                throw new IOException("echo mismatch at round trip " + i);
            }
        }
    }

    static void hold(Sockmap sockmap, InetAddress lo, int port, int pairs, long seconds) throws Exception {
        List<SocketChannel> open = new ArrayList<>();
        try (SockmapServerChannel server = sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(lo, port));
            for (int i = 0; i < pairs; i++) {
                SockmapChannel c = sockmap.openChannel();
                open.add(c);
                c.connect(server.getLocalAddress());
                open.add(server.accept());
            }
            System.out.println("held=" + open.size());
            Thread.sleep(seconds * 1000); // the soak's middle third: nothing to wait for but time
        } finally {
            for (SocketChannel c : open) {
                c.close();
            }
        }
    }
}
