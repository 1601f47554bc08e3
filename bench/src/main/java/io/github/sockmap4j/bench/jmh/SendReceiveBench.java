package io.github.sockmap4j.bench.jmh;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapChannel;
import io.github.sockmap4j.SockmapConfig;
import io.github.sockmap4j.SockmapServerChannel;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The kernel path's own cost per message, without wake-ups: one thread sends {@code size}
 * bytes on one end of a loopback connection and reads them from the other, over plain TCP
 * (a Sockmap that is off) or the redirect. What remains is syscalls, copies and the path
 * between the sockets: the TCP/IP stack and loopback, or the verdict and the peer's queue.
 * {@code gather16} sends sixteen {@code size}-byte buffers as one gathering write.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
public class SendReceiveBench {
    /** tcp: the fast path off; redirect: with the in-flight bound and credit; unbounded: the bound off. */
    @Param({"tcp", "redirect", "unbounded"})
    public String path;

    @Param({"64", "4096", "65536"})
    public int size;

    /** true: blocking channels (the write waits for credit, the read for bytes); false: both spin. */
    @Param({"true", "false"})
    public boolean blocking;

    private Sockmap sockmap;
    private SockmapServerChannel server;
    private SockmapChannel client;
    private SocketChannel side;
    private ByteBuffer out;
    private ByteBuffer in;
    private ByteBuffer[] outs;
    private io.github.sockmap4j.OptIn lift;

    @Setup(Level.Trial)
    public void open() throws IOException {
        SockmapConfig config = SockmapConfig.fromSystemProperties();
        sockmap = Sockmap.open(path.equals("tcp") ? config.withDisabled(true).withRequired(false) : config);
        if (!path.equals("tcp") && !sockmap.isActive()) {
            throw new IllegalStateException("the fast path is off: " + sockmap.unavailabilityCause());
        }
        server = sockmap.openServerChannel();
        // A port-wide rule (the wildcard bind), which the unbounded path lifts; a rule for the loopback
        // address alone would be the more specific one and keep the bound.
        server.bind(new InetSocketAddress(0));
        if (path.equals("unbounded")) {
            lift = sockmap.optIn(((InetSocketAddress) server.getLocalAddress()).getPort(), null, 0, Sockmap.UNBOUNDED);
        }
        client = sockmap.openChannel();
        client.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(),
                ((InetSocketAddress) server.getLocalAddress()).getPort()));
        side = server.accept();
        client.configureBlocking(blocking);
        side.configureBlocking(blocking);
        if (!path.equals("tcp") && !client.isAccelerated()) {
            throw new IllegalStateException("the connection is not accelerated: " + client);
        }
        out = ByteBuffer.allocateDirect(size);
        in = ByteBuffer.allocateDirect(size * 16);
        outs = new ByteBuffer[16];
        for (int i = 0; i < outs.length; i++) {
            outs[i] = ByteBuffer.allocateDirect(size);
        }
    }

    @TearDown(Level.Trial)
    public void close() throws IOException {
        side.close();
        client.close();
        server.close();
        if (lift != null) {
            lift.close();
        }
        sockmap.close();
    }

    @Benchmark
    public int single() throws IOException {
        out.clear();
        while (out.hasRemaining()) {
            client.write(out);
        }
        in.clear().limit(size);
        while (in.hasRemaining()) {
            side.read(in);
        }
        return in.get(0);
    }

    @Benchmark
    public int gather16() throws IOException {
        for (ByteBuffer b : outs) {
            b.clear();
        }
        long left = 16L * size;
        while (left > 0) {
            left -= client.write(outs);
        }
        in.clear();
        while (in.hasRemaining()) {
            side.read(in);
        }
        return in.get(0);
    }
}
