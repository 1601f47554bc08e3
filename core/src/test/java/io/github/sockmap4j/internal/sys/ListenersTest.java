package io.github.sockmap4j.internal.sys;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.net.InetAddress;
import java.util.List;
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

    @Test
    void listenersOfAPortWithTheirOwnersAndAddresses() throws Exception {
        assertEquals(List.of(new Listeners.Listener(0, InetAddress.getByName("127.0.0.1"), 47341),
                        new Listeners.Listener(65534, InetAddress.getByName("0.0.0.0"), 47341)),
                Listeners.parse(TCP, 47341), "established sockets and other ports left out");
        assertEquals(List.of(new Listeners.Listener(4001, InetAddress.getByName("::1"), 47341)),
                Listeners.parse(TCP6, 47341));
    }
}
