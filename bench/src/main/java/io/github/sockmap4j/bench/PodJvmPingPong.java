package io.github.sockmap4j.bench;

import io.github.sockmap4j.Sockmap;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.Arrays;

/**
 * The JVM ends of {@link NodeRttBench}'s round trips, as podpingpong.c's, one per process in a
 * pod: blocking {@link io.github.sockmap4j.SockmapChannel}s of {@link Sockmap#global()} (pins
 * and cgroup from the {@code sockmap4j.*} properties, the agent's) or plain java.nio channels.
 *
 * <pre>
 * PodJvmPingPong server sockmap|nio ADDR PORT CPU                   listen, print port=N, echo one connection
 * PodJvmPingPong client sockmap|nio ADDR PORT SIZE WARMUP ITER CPU [samples]
 *                                      prints "p50=NS p99=NS p999=NS", with samples also "samples=NS,NS,..."
 * </pre>
 */
public final class PodJvmPingPong {
    private PodJvmPingPong() {
    }

    public static void main(String[] args) throws IOException {
        boolean sockmap = args[1].equals("sockmap");
        InetSocketAddress at = new InetSocketAddress(InetAddress.ofLiteral(args[2]), Integer.parseInt(args[3]));
        if (args[0].equals("server")) {
            Affinity.pin(Integer.parseInt(args[4]));
            try (ServerSocketChannel server = sockmap ? Sockmap.global().openServerChannel() : ServerSocketChannel.open()) {
                server.bind(at);
                System.out.println("port=" + ((InetSocketAddress) server.getLocalAddress()).getPort());
                System.out.flush();
                try (SocketChannel ch = server.accept()) {
                    ch.setOption(StandardSocketOptions.TCP_NODELAY, true);
                    ByteBuffer b = ByteBuffer.allocateDirect(1 << 20);
                    while (ch.read(b) >= 0) {
                        b.flip();
                        while (b.hasRemaining()) {
                            ch.write(b);
                        }
                        b.clear();
                    }
                }
            }
            return;
        }
        int size = Integer.parseInt(args[4]);
        int warmup = Integer.parseInt(args[5]);
        int iter = Integer.parseInt(args[6]);
        Affinity.pin(Integer.parseInt(args[7]));
        long[] rtt = new long[iter];
        try (SocketChannel ch = sockmap ? Sockmap.global().openChannel() : SocketChannel.open()) {
            ch.setOption(StandardSocketOptions.TCP_NODELAY, true);
            ch.connect(at);
            ByteBuffer out = ByteBuffer.allocateDirect(size);
            ByteBuffer in = ByteBuffer.allocateDirect(size);
            for (int i = 0; i < warmup + iter; i++) {
                long t0 = System.nanoTime();
                out.clear();
                out.put(0, (byte) i);
                while (out.hasRemaining()) {
                    ch.write(out);
                }
                in.clear();
                while (in.hasRemaining()) {
                    if (ch.read(in) < 0) {
                        throw new IOException("end of stream after " + i + " round trips");
                    }
                }
                if (in.get(0) != (byte) i) {
                    throw new IOException("echo mismatch at round trip " + i);
                }
                if (i >= warmup) {
                    rtt[i - warmup] = System.nanoTime() - t0;
                }
            }
        }
        Arrays.sort(rtt);
        System.out.println("p50=" + rtt[iter / 2] + " p99=" + rtt[iter * 99 / 100] + " p999=" + rtt[iter * 999 / 1000]);
        if (args.length > 8 && args[8].equals("samples")) {
            StringBuilder b = new StringBuilder("samples=");
            for (int i = 0; i < iter; i++) {
                b.append(i == 0 ? "" : ",").append(rtt[i]);
            }
            System.out.println(b);
        }
    }
}
