package io.github.sockmap4j.internal.sys;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.net.InetAddress;
import java.util.List;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;
import org.junit.jupiter.api.Test;

/** The listeners in /proc/net/tcp and tcp6 text (as 6.18 prints it): no root needed. */
class ListenersTest {
    static final String TCP = """
              sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
               0: 0100007F:B8ED 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1234 1 0 100 0 0 10 0
               1: 00000000:B8ED 00000000:0000 0A 00000000:00000000 00:00000000 00000000 65534        0 1235 1 0 100 0 0 10 0
               2: 0100007F:B8ED 0100007F:D3A2 01 00000000:00000000 00:00000000 00000000     0        0 1236 1 0 20 4 30 10 -1
               3: 0100007F:B8EE 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1237 1 0 100 0 0 10 0
            """;
    static final String TCP6 = """
              sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
               0: 00000000000000000000000001000000:B8ED 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  4001        0 2234 1 0 100 0 0 10 0
            """;

    /**
     * Lines as the kernel prints them, any mix of states, ports, owners and addresses: the
     * listeners found are exactly the LISTEN lines of the port, in order.
     */
    @Property(tries = 200)
    void everyListenerOfThePortAndNothingElse(@ForAll @Size(max = 60) List<@IntRange(min = 0, max = 31) Integer> seeds,
                                              @ForAll @IntRange(min = 1, max = 4) int port) throws Exception {
        StringBuilder text = new StringBuilder(
                "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n");
        List<Listeners.Listener> expected = new java.util.ArrayList<>();
        int sl = 0;
        for (int seed : seeds) {
            int p = 1 + (seed & 3);
            boolean listening = (seed & 4) != 0;
            int uid = (seed >> 3) * 1000;
            String addr = (seed & 8) != 0 ? "0100007F" : "00000000";
            text.append(String.format(java.util.Locale.ROOT, "%4d: %s:%04X 00000000:0000 %s 00000000:00000000 "
                    + "00:00000000 00000000 %5d        0 %d 1 0 100 0 0 10 0%n", sl++, addr, p, listening ? "0A" : "01",
                    uid, 1000 + sl));
            if (listening && p == port) {
                expected.add(new Listeners.Listener(uid, InetAddress.getByName((seed & 8) != 0 ? "127.0.0.1"
                        : "0.0.0.0"), port));
            }
        }
        assertEquals(expected, Listeners.parse(text.toString(), port));
    }

    /** A line longer than any of the format is left out, and the next line read as usual. */
    @Test
    void aLineLongerThanTheFormatsIsSkipped() throws Exception {
        String listener = TCP.lines().skip(1).findFirst().orElseThrow();
        String text = listener + " " + "0".repeat(600) + "\n" + listener + "\n";
        assertEquals(List.of(new Listeners.Listener(0, InetAddress.getByName("127.0.0.1"), 47341)),
                Listeners.parse(text, 47341));
    }

    @Test
    void listenersOfAPortWithTheirOwnersAndAddresses() throws Exception {
        assertEquals(List.of(new Listeners.Listener(0, InetAddress.getByName("127.0.0.1"), 47341),
                        new Listeners.Listener(65534, InetAddress.getByName("0.0.0.0"), 47341)),
                Listeners.parse(TCP, 47341), "established sockets and other ports left out");
        assertEquals(List.of(new Listeners.Listener(4001, InetAddress.getByName("::1"), 47341)),
                Listeners.parse(TCP6, 47341));
    }
}
