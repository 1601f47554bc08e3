package io.github.sockmap4j.agent.control;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.InputStream;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
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
     * listeners found are exactly the LISTEN lines of the port before the first socket in another
     * state (the kernel prints its listening sockets first), in order.
     */
    @Property(tries = 200)
    void everyListenerOfThePortAndNothingElse(@ForAll @Size(max = 60) List<@IntRange(min = 0, max = 31) Integer> seeds,
                                              @ForAll @IntRange(min = 1, max = 4) int port) throws Exception {
        StringBuilder text = new StringBuilder(
                "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n");
        List<Listeners.Listener> expected = new java.util.ArrayList<>();
        int sl = 0;
        boolean listenersEnded = false;
        for (int seed : seeds) {
            int p = 1 + (seed & 3);
            boolean listening = (seed & 4) != 0;
            int uid = (seed >> 3) * 1000;
            String addr = (seed & 8) != 0 ? "0100007F" : "00000000";
            text.append(String.format(java.util.Locale.ROOT, "%4d: %s:%04X 00000000:0000 %s 00000000:00000000 "
                    + "00:00000000 00000000 %5d        0 %d 1 0 100 0 0 10 0%n", sl++, addr, p, listening ? "0A" : "01",
                    uid, 1000 + sl));
            listenersEnded |= !listening;
            if (listening && p == port && !listenersEnded) {
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
        String text = TCP.lines().findFirst().orElseThrow() + "\n" + listener + " " + "0".repeat(600) + "\n"
                + listener + "\n";
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

    static String listenerLine(int sl, int port, int uid) {
        return String.format(Locale.ROOT, "%4d: 0100007F:%04X 00000000:0000 0A 00000000:00000000 00:00000000 00000000 "
                + "%5d        0 %d 1 0 100 0 0 10 0%n", sl, port, uid, 5000 + sl);
    }

    static String listenersText(int count, int port) {
        StringBuilder b = new StringBuilder(TCP.lines().findFirst().orElseThrow()).append('\n');
        for (int i = 0; i < count; i++) {
            b.append(listenerLine(i, port + i % 7, 1000));
        }
        return b.toString();
    }

    /** Trust III, row 8: a file of more listeners than are read says so; one of as many is read whole. */
    @Test
    void moreListenersThanAreReadAreTooMany() {
        assertEquals(Listeners.MAX_PER_FILE / 7 + 1, Listeners.parse(listenersText(Listeners.MAX_PER_FILE, 2000),
                2000).size());
        Listeners.NotRead e = assertThrows(Listeners.NotRead.class,
                () -> Listeners.parse(listenersText(Listeners.MAX_PER_FILE + 1, 2000), 2000));
        assertTrue(e.getMessage().contains("more than " + Listeners.MAX_PER_FILE + " listening sockets"), e.getMessage());
    }

    /**
     * Trust III, row 8: the sockets after the listeners (connections, as many as a user makes)
     * are not read: a file whose listeners are followed by an endless run of other sockets is
     * read to the first of them and a chunk past it.
     */
    @Test
    void theSocketsAfterTheListenersAreNotRead() throws Exception {
        byte[] head = (listenersText(3, 7050) + TCP.lines().skip(3).findFirst().orElseThrow() + "\n")
                .getBytes(StandardCharsets.US_ASCII);
        byte[] other = (TCP.lines().skip(3).findFirst().orElseThrow() + "\n").getBytes(StandardCharsets.US_ASCII);
        long[] served = {0};
        InputStream endless = new InputStream() {
            @Override
            public int read() {
                byte[] one = new byte[1];
                return read(one, 0, 1) < 0 ? -1 : one[0] & 0xff;
            }

            @Override
            public int read(byte[] b, int off, int len) {
                int n = 0;
                for (; n < len; n++, served[0]++) {
                    b[off + n] = served[0] < head.length ? head[(int) served[0]]
                            : other[(int) ((served[0] - head.length) % other.length)];
                }
                return n;
            }
        };
        Listeners l = new Listeners((pid, file) -> file.equals("tcp") ? endless : InputStream.nullInputStream(),
                () -> 0);
        assertEquals(1, l.on(7050, Map.of(1L, 1L), -1).size());
        assertTrue(served[0] < 1 << 20, "read to the listeners' end and a chunk past it: " + served[0] + " bytes");
    }

    /**
     * Trust III, row 8: requests for any ports within a second read each namespace once, the
     * requester's own at each request (where its new server is); a namespace of too many
     * listeners refuses every request, and is read once a second too.
     */
    @Test
    void eachNamespaceIsReadOnceASecondButTheRequesters() {
        Map<Long, Integer> opened = new java.util.HashMap<>();
        long[] now = {0};
        Listeners l = new Listeners((pid, file) -> {
            opened.merge(pid, 1, Integer::sum);
            String text = pid == 3 ? listenersText(Listeners.MAX_PER_FILE + 1, 2000) : listenersText(10, 7000 + (int) pid);
            return new java.io.ByteArrayInputStream((file.equals("tcp") ? text : "").getBytes(StandardCharsets.US_ASCII));
        }, () -> now[0]);
        Map<Long, Long> namespaces = new java.util.LinkedHashMap<>(Map.of(11L, 1L, 12L, 2L));
        for (int port = 7000; port < 7100; port++) {
            List<Listeners.Listener> found = l.on(port, namespaces, 11L);
            int p = port;
            assertTrue(found.stream().allMatch(x -> x.port() == p && x.uid() == 1000), found.toString());
            now[0] += 5_000_000; // 100 requests in half a second
        }
        assertEquals(200, opened.get(1L), "the requester's namespace, at each request (tcp and tcp6)");
        assertEquals(2, opened.get(2L), "another namespace, once");
        assertEquals(4, l.on(7002, namespaces, -1).size(), "two listeners on 7002 in each namespace");
        now[0] += TimeUnit.MILLISECONDS.toNanos(Listeners.FRESH_MILLIS) + 1;
        l.on(7002, namespaces, -1);
        assertEquals(4, opened.get(2L), "read again after a second");
        namespaces.put(13L, 3L);
        for (int i = 0; i < 10; i++) {
            assertThrows(Listeners.NotRead.class, () -> l.on(7002, namespaces, -1));
        }
        assertEquals(1, opened.get(3L), "too many: read once (and its tcp6 not at all)");
    }

    /** A source of {@code listeners} listeners (ports from 7000) in tcp and nothing in tcp6, counting the reads. */
    static final class Namespaces implements Listeners.Source {
        final Map<Long, Integer> reads = new java.util.HashMap<>();
        final Map<Long, byte[]> text = new java.util.HashMap<>();

        Namespaces with(long pid, int listeners) {
            text.put(pid, listenersText(listeners, 7000).getBytes(StandardCharsets.US_ASCII));
            return this;
        }

        @Override
        public InputStream open(long pid, String file) {
            if (!file.equals("tcp")) {
                return InputStream.nullInputStream();
            }
            reads.merge(pid, 1, Integer::sum);
            return new java.io.ByteArrayInputStream(text.get(pid));
        }

        int total() {
            return reads.values().stream().mapToInt(Integer::intValue).sum();
        }
    }

    /**
     * Trust III, row 8: reads take at most their shares of a CPU however often one asks (16
     * namespaces of 2,000 listeners, a read charged some 6 ms; a request every millisecond for
     * 20 s, from each namespace in turn), and what a namespace holds is never used older than
     * {@value Listeners#STALE_MILLIS} ms.
     */
    @Test
    void readsTakeTheirShareOfACpuAndNothingIsUsedStale() {
        long ms = TimeUnit.MILLISECONDS.toNanos(1);
        long[] now = {0};
        Namespaces source = new Namespaces();
        Map<Long, Long> namespaces = new java.util.LinkedHashMap<>();
        for (long ns = 1; ns <= 16; ns++) {
            namespaces.put(100 + ns, ns);
            source.with(ns, 2000);
        }
        Listeners l = new Listeners(source, () -> now[0]);
        long end = TimeUnit.SECONDS.toNanos(20);
        for (int i = 0; now[0] < end; i++) {
            assertEquals(16 * (2000 / 7 + 1), l.on(7000, namespaces, 100 + 1 + i % 16).size());
            now[0] += ms;
        }
        long charged = source.total() * Listeners.costNanos(2, 2001);
        double share = 100.0 * charged / now[0];
        System.out.printf("%d reads charged %.1f%% of the clock (a share for the requesters' own, one for the rest)%n",
                source.total(), share);
        // Two shares, and what is owed besides: the 16 first reads, and the last reads of each
        // share, charged once made (one of the requester's, at most 16 of the others').
        long cost = Listeners.costNanos(2, 2001);
        long allowed = now[0] * 2 * Listeners.CPU_PERCENT / 100 + (16 + 1 + 16) * cost;
        assertTrue(charged <= allowed, "a tenth of a CPU at most: " + share + "%, charged " + charged + " ns, "
                + allowed + " allowed");
        assertTrue(source.reads.values().stream().allMatch(n -> n >= 20 / (Listeners.STALE_MILLIS / 1000)),
                "each namespace read at least every " + Listeners.STALE_MILLIS + " ms: " + source.reads);
    }

    /**
     * Trust III, row 8: where reads have used their share of a CPU, what a namespace holds is
     * used up to {@value Listeners#STALE_MILLIS} ms old and not past it: the request is refused
     * until the share allows reads. 20 namespaces of 16,000 listeners: their first reads are
     * charged 961 ms, so the next may come 18.3 s later, and that request reads them all.
     */
    @Test
    void whatIsTooOldToUseRefusesUntilItCanBeRead() {
        long[] now = {0};
        Namespaces source = new Namespaces();
        Map<Long, Long> namespaces = new java.util.LinkedHashMap<>();
        byte[] big = listenersText(16_000, 7000).getBytes(StandardCharsets.US_ASCII);
        for (long ns = 1; ns <= 20; ns++) {
            namespaces.put(100 + ns, ns);
            source.text.put(ns, big);
        }
        Listeners l = new Listeners(source, () -> now[0], 20 * 16_000);
        int each = 16_000 / 7 + 1;
        assertEquals(20 * each, l.on(7000, namespaces, -1).size(), "first reads are owed");
        assertEquals(20, source.total());
        now[0] = TimeUnit.MILLISECONDS.toNanos(3000);
        assertEquals(20 * each, l.on(7000, namespaces, -1).size(), "3 s old, the share spent: used as they are");
        assertEquals(20, source.total(), "not read");
        now[0] = TimeUnit.MILLISECONDS.toNanos(5500);
        Listeners.NotRead busy = assertThrows(Listeners.NotRead.class, () -> l.on(7000, namespaces, -1));
        assertTrue(busy.getMessage().contains("pid 1 were not read") && busy.getMessage().contains("ask again"),
                busy.getMessage());
        assertEquals(20, source.total());
        now[0] = TimeUnit.MILLISECONDS.toNanos(18_000);
        assertThrows(Listeners.NotRead.class, () -> l.on(7000, namespaces, -1));
        assertEquals(20, source.total());
        now[0] = TimeUnit.MILLISECONDS.toNanos(18_300);
        assertEquals(20 * each, l.on(7000, namespaces, -1).size(), "all read once the share allows");
        assertEquals(40, source.total());
    }

    /**
     * A server started just before its owner's request is seen whatever others' reads cost: the
     * requester's own namespace is read from a share of its own (the other share is spent here by
     * a namespace of 16,000 listeners), and a flood of its requests leaves the others' share alone.
     */
    @Test
    void aServerStartedJustBeforeItsOwnersRequestIsSeen() {
        long[] now = {0};
        Namespaces source = new Namespaces().with(1, 0).with(2, 16_000);
        Listeners l = new Listeners(source, () -> now[0]);
        Map<Long, Long> namespaces = new java.util.LinkedHashMap<>(Map.of(11L, 1L));
        namespaces.put(12L, 2L);
        assertEquals(16_000 / 7 + 1, l.on(7000, namespaces, 11L).size(), "pid 2's, none of pid 1's yet");
        source.with(1, 1); // a server on 7000 in pid 1's namespace now listens
        now[0] += TimeUnit.MILLISECONDS.toNanos(10);
        assertEquals(16_000 / 7 + 2, l.on(7000, namespaces, 11L).size(), "seen at once, the other share spent");
        for (int i = 0; i < 9_000; i++) {
            now[0] += TimeUnit.MICROSECONDS.toNanos(100);
            l.on(7000, namespaces, 11L);
        }
        assertEquals(1, source.reads.get(2L), "pid 2's namespace, fresh for the 0.9 s of the flood, read once: " + source.reads);
    }

    /**
     * A namespace read before and no longer kept (more listeners than are kept in all) is not
     * owed a read: it waits for the share, as one kept would, and no request reads past it.
     */
    @Test
    void aNamespaceNoLongerKeptWaitsForTheShare() {
        long[] now = {0};
        Namespaces source = new Namespaces().with(1, 16_000).with(2, 16_000);
        Listeners l = new Listeners(source, () -> now[0], 20_000);
        Map<Long, Long> namespaces = new java.util.LinkedHashMap<>(Map.of(11L, 1L));
        namespaces.put(12L, 2L);
        l.on(7000, namespaces, -1); // pid 2's kept, pid 1's not: 32,000 listeners, 20,000 kept
        assertEquals(2, source.total());
        for (int i = 0; i < 100; i++) {
            now[0] += TimeUnit.MILLISECONDS.toNanos(1);
            assertThrows(Listeners.NotRead.class, () -> l.on(7000, namespaces, -1));
        }
        assertEquals(2, source.total(), "no read while the share is spent: " + source.reads);
    }

    /**
     * The namespaces looked into are listed once a fresh time (1,000 requests in half a second:
     * one listing), sooner for a requester not among them (a new pod's namespace is found at its
     * first request), and no more often than the listing's share of a CPU allows however many
     * requests come from a namespace never among them (each listing here takes 1 ms of the clock).
     */
    @Test
    void theNamespacesLookedIntoAreListedOnceASecondOrForANewPod() {
        long ms = TimeUnit.MILLISECONDS.toNanos(1);
        long[] now = {0};
        Map<Long, Long> present = new java.util.HashMap<>(Map.of(11L, 1L));
        Listeners l = new Listeners(new Namespaces(), () -> now[0]);
        java.util.function.Supplier<Map<Long, Long>> list = () -> {
            now[0] += ms;
            return Map.copyOf(present);
        };
        for (int i = 0; i < 1000; i++) {
            assertEquals(Map.of(11L, 1L), l.watched(list, 11L));
            now[0] += TimeUnit.MICROSECONDS.toNanos(500);
        }
        assertEquals(1, l.lists(), "listed once in half a second");
        present.put(12L, 2L); // a new pod
        now[0] += 50 * ms;
        assertEquals(Map.of(11L, 1L, 12L, 2L), l.watched(list, 12L), "found at its first request");
        assertEquals(2, l.lists());
        long from = now[0];
        for (int i = 0; i < 1000; i++) {
            l.watched(list, 99L); // a namespace never among those looked into
            now[0] += ms;
        }
        long listings = l.lists() - 2;
        long most = (now[0] - from) / ((100 / Listeners.CPU_PERCENT) * ms) + 1
                + (now[0] - from) / TimeUnit.MILLISECONDS.toNanos(Listeners.FRESH_MILLIS) + 1;
        assertTrue(listings <= most, listings + " listings in " + (now[0] - from) / ms + " ms, at most " + most);
    }
}
