package io.github.sockmap4j.bench;

import io.github.sockmap4j.testbed.Sh;
import io.github.sockmap4j.xdp.XdpFilter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.concurrent.TimeUnit;

/**
 * Packets per second an XDP drop rule disposes of, against the same UDP traffic refused by the
 * kernel stack (no socket on the port: counted in /proc/net/snmp Udp NoPorts), and CPU time per
 * packet from /proc/stat. The sender runs on the same 2 vCPUs, in a network namespace the
 * benchmark makes, through a veth pair it makes; both go away at the end.
 *
 * <p>Usage: {@code XdpBench FLOOD-BINARY [rounds] [seconds]} (defaults 5 and 3).
 */
public final class XdpBench {
    private XdpBench() {
    }

    static long udpNoPorts() throws IOException {
        String[] lines = new String(Files.newInputStream(Path.of("/proc/net/snmp")).readAllBytes(),
                StandardCharsets.US_ASCII).split("\n");
        for (int i = 0; i + 1 < lines.length; i++) {
            if (lines[i].startsWith("Udp:") && lines[i + 1].startsWith("Udp:")) {
                String[] names = lines[i].trim().split("\\s+");
                String[] values = lines[i + 1].trim().split("\\s+");
                for (int j = 0; j < names.length; j++) {
                    if (names[j].equals("NoPorts")) {
                        return Long.parseLong(values[j]);
                    }
                }
            }
        }
        throw new IOException("no Udp NoPorts in /proc/net/snmp");
    }

    /** Busy jiffies of all CPUs (user + nice + system + irq + softirq + steal). */
    static long busyJiffies() throws IOException {
        String first = new String(Files.newInputStream(Path.of("/proc/stat")).readAllBytes(),
                StandardCharsets.US_ASCII).split("\n")[0];
        String[] f = first.trim().split("\\s+");
        long busy = 0;
        for (int i : new int[] {1, 2, 3, 6, 7, 8}) {
            busy += Long.parseLong(f[i]);
        }
        return busy;
    }

    public static void main(String[] args) throws Exception {
        BenchRun run = BenchRun.of("XdpBench FLOOD-BINARY [rounds] [seconds]", args);
        String flood = args[0];
        int rounds = run.intArg(1, 5);
        int seconds = run.intArg(2, 3);
        String id = Long.toString(ProcessHandle.current().pid() % 100000);
        String ns = "sm4j-xb-" + id;
        String here = "xb" + id + "a";
        String there = "xb" + id + "b";
        String hereIp = "10.251.7.1";
        String thereIp = "10.251.7.2";
        int port = 45999;
        long hz = 100; // USER_HZ
        Sh.run("ip", "netns", "add", ns);
        try {
            Sh.run("ip", "link", "add", here, "type", "veth", "peer", "name", there);
            Sh.run("ip", "link", "set", there, "netns", ns);
            Sh.run("ip", "addr", "add", hereIp + "/24", "dev", here);
            Sh.run("ip", "-n", ns, "addr", "add", thereIp + "/24", "dev", there);
            Sh.run("ip", "link", "set", here, "up");
            Sh.run("ip", "-n", ns, "link", "set", there, "up");
            double[][] pps = new double[2][rounds];
            double[][] nsPerPacket = new double[2][rounds];
            String mode = "?";
            for (int r = 0; r < rounds; r++) {
                for (int xdp = 0; xdp < 2; xdp++) {
                    XdpFilter f = xdp == 1 ? XdpFilter.attach(here, XdpFilter.Action.PASS) : null;
                    try {
                        if (f != null) {
                            f.addPortRule(port, XdpFilter.Protocol.UDP, XdpFilter.Action.DROP);
                            mode = f.mode().name();
                        }
                        long before = f != null ? f.counters().dropped() : udpNoPorts();
                        long cpu0 = busyJiffies();
                        Sh.run("ip", "netns", "exec", ns, flood, thereIp, hereIp, Integer.toString(port),
                                Integer.toString(seconds));
                        long cpu1 = busyJiffies();
                        long handled = (f != null ? f.counters().dropped() : udpNoPorts()) - before;
                        pps[xdp][r] = handled / (double) seconds;
                        nsPerPacket[xdp][r] = (cpu1 - cpu0) * (1e9 / hz) / Math.max(1, handled);
                    } finally {
                        if (f != null) {
                            f.close();
                        }
                    }
                }
            }
            System.out.printf(Locale.ROOT, "sockmap4j XDP benchmark: %d rounds of %d s, 64-byte UDP from a test "
                    + "namespace over a veth pair, XDP in %s mode, %s%n", rounds, seconds, mode,
                    BenchRun.machine());
            System.out.printf(Locale.ROOT, "%-34s %14s %22s%n", "path", "packets/s", "CPU ns/packet (all)");
            System.out.printf(Locale.ROOT, "%-34s %14.0f %22.0f%n", "kernel stack refuses (UdpNoPorts)",
                    Medians.of(pps[0]), Medians.of(nsPerPacket[0]));
            System.out.printf(Locale.ROOT, "%-34s %14.0f %22.0f%n", "XDP drop rule", Medians.of(pps[1]),
                    Medians.of(nsPerPacket[1]));
            System.out.printf(Locale.ROOT, "ratio XDP / stack: packets/s %.2f, CPU per packet %.2f (medians over "
                    + "rounds; the CPU includes the sender's)%n", Medians.of(pps[1]) / Medians.of(pps[0]),
                    Medians.of(nsPerPacket[1]) / Medians.of(nsPerPacket[0]));
        } finally {
            try {
                Sh.run("ip", "link", "del", here);
            } catch (IOException ignored) {
                // already gone with a failed setup
            }
            Sh.run("ip", "netns", "delete", ns);
        }
    }

}
