package io.github.sockmap4j.colocated.grpc;

import io.grpc.MethodDescriptor;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;

/**
 * The agreement, one unary call on the channel's own TCP connection before its calls move:
 *
 * <pre>
 * client -> server   SM4J-AGREE 1
 * server -> client   ACCEPT 1 IP PORT SOCKET NONCE CAPACITY
 *                    (IP PORT: the client as the server sees it; SOCKET: where the server's hand-over
 *                    listens; NONCE: 32 bytes in hex; CAPACITY: each ring's bytes)
 *                  | DECLINE FALLBACK words
 * client -> server   SM4J-WITHDRAW 1 NONCE   (after an ACCEPT, where it will not hand a region over)
 * server -> client   WITHDRAWN | UNKNOWN
 * </pre>
 *
 * Lending ({@link ColocatedGrpc#LEND_BYTES}) is agreed in the call's headers, which an end of an
 * earlier version ignores: the client's request carries {@code sm4j-lend: BYTES} (the heap it
 * would give each end), the server's response headers {@code sm4j-lend: BYTES} (the smaller of
 * the two, where it lends too); the region then carries a heap of twice that, and none where the
 * server did not say it.
 *
 * <p>The nonce travels only over the TCP connection, so whoever proves it at the hand-over saw that
 * connection's bytes; the client moves only when the server saw it at its own local address and
 * port (no proxy between). Lines of printable ASCII, at most {@link #MAX} bytes; anything else is
 * a malformed answer.
 */
final class Agreement {
    static final int VERSION = 1;
    static final int MAX = 512;
    static final String SERVICE = "sockmap4j.colocated.v1.Agreement";
    private static final HexFormat HEX = HexFormat.of();

    /** Each end's heap for lent bodies: the client's offer, the server's agreed size. */
    static final io.grpc.Metadata.Key<String> LEND = io.grpc.Metadata.Key.of("sm4j-lend",
            io.grpc.Metadata.ASCII_STRING_MARSHALLER);

    /**
     * The heap each end lends from, as a header of the other end says it: 0 where absent or not
     * a multiple of 4096 up to {@code most} (a header out of bounds lends nothing, it fails nothing).
     */
    static long lendBytes(io.grpc.Metadata headers, long most) {
        String v = headers == null ? null : headers.get(LEND);
        if (v == null || !v.matches("[0-9]{1,12}")) {
            return 0;
        }
        long b = Long.parseLong(v);
        return b % 4096 == 0 && b <= most ? b : 0;
    }

    static final MethodDescriptor<byte[], byte[]> METHOD = MethodDescriptor.<byte[], byte[]>newBuilder()
            .setType(MethodDescriptor.MethodType.UNARY)
            .setFullMethodName(MethodDescriptor.generateFullMethodName(SERVICE, "Agree"))
            .setRequestMarshaller(Lines.INSTANCE)
            .setResponseMarshaller(Lines.INSTANCE)
            .setIdempotent(true)
            .build();

    private Agreement() {
    }

    static byte[] offer() {
        return ("SM4J-AGREE " + VERSION).getBytes(StandardCharsets.US_ASCII);
    }

    /** A client's word that it will not hand a region over for {@code nonce}: its server stops waiting for one. */
    static byte[] withdrawal(byte[] nonce) {
        return ("SM4J-WITHDRAW " + VERSION + " " + HEX.formatHex(nonce)).getBytes(StandardCharsets.US_ASCII);
    }

    /** The nonce a withdrawal names (32 bytes); null where {@code line} is not a withdrawal of this version. */
    static byte[] withdrawn(byte[] line) {
        String[] f = text(line).split(" ");
        if (f.length != 3 || !f[0].equals("SM4J-WITHDRAW") || !f[1].equals(Integer.toString(VERSION))
                || !f[2].matches("[0-9a-f]{64}")) {
            return null;
        }
        return HEX.parseHex(f[2]);
    }

    /** The version a client's offer names, or -1 when it is not an offer. */
    static int offeredVersion(byte[] line) {
        String[] f = text(line).split(" ");
        if (f.length != 2 || !f[0].equals("SM4J-AGREE")) {
            return -1;
        }
        try {
            return Integer.parseInt(f[1]);
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    sealed interface Answer permits Accept, Decline {
    }

    record Accept(InetSocketAddress clientAsSeen, String socket, byte[] nonce, long capacity) implements Answer {
        byte[] encode() {
            return ("ACCEPT " + VERSION + " " + clientAsSeen.getAddress().getHostAddress() + " " + clientAsSeen.getPort()
                    + " " + socket + " " + HEX.formatHex(nonce) + " " + capacity).getBytes(StandardCharsets.US_ASCII);
        }
    }

    record Decline(Fallback reason, String words) implements Answer {
        byte[] encode() {
            return ("DECLINE " + reason.name() + " " + words.replaceAll("[^\\x20-\\x7e]", "?"))
                    .getBytes(StandardCharsets.US_ASCII);
        }
    }

    /**
     * Reads a server's answer.
     *
     * @throws IllegalArgumentException naming what is wrong with it
     */
    static Answer parse(byte[] line) {
        String s = text(line);
        String[] f = s.split(" ", 3);
        if (f[0].equals("DECLINE") && f.length >= 2) {
            Fallback reason;
            try {
                reason = Fallback.valueOf(f[1]);
            } catch (IllegalArgumentException e) {
                reason = Fallback.FAILED;
            }
            return new Decline(reason, f.length == 3 ? f[2] : "");
        }
        String[] a = s.split(" "); // none at all where the line is only spaces
        if (a.length < 2 || !a[0].equals("ACCEPT")) {
            throw new IllegalArgumentException("not an answer to an agreement: '" + clip(s) + "'");
        }
        if (!a[1].equals(Integer.toString(VERSION))) {
            return new Decline(Fallback.OTHER_VERSION, "the server answered version " + clip(a[1]));
        }
        if (a.length != 7) {
            throw new IllegalArgumentException("an ACCEPT of " + a.length + " fields, not 7");
        }
        InetAddress ip;
        try {
            if (!a[2].matches("[0-9a-fA-F:.]{2,45}")) {
                throw new UnknownHostException(a[2]);
            }
            ip = InetAddress.getByName(a[2]); // a literal: no lookup
        } catch (UnknownHostException e) {
            throw new IllegalArgumentException("not an IP address: '" + clip(a[2]) + "'");
        }
        int port = Integer.parseInt(a[3]);
        if (port < 1 || port > 65535) {
            throw new IllegalArgumentException("not a port: " + port);
        }
        if (!a[4].matches("@[A-Za-z0-9._-]{1,100}")) {
            throw new IllegalArgumentException("not a hand-over's name: '" + clip(a[4]) + "'");
        }
        byte[] nonce;
        try {
            nonce = HEX.parseHex(a[5]);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("a nonce that is not hex");
        }
        if (nonce.length != 32) {
            throw new IllegalArgumentException("a nonce of " + nonce.length + " bytes, not 32");
        }
        long capacity = Long.parseLong(a[6]);
        return new Accept(new InetSocketAddress(ip, port), a[4], nonce, capacity);
    }

    /** Whether {@code a} and {@code b} are one IP address and port (an IPv4 address and its IPv6-mapped form are one). */
    static boolean sameEnd(SocketAddress a, SocketAddress b) {
        if (!(a instanceof InetSocketAddress x) || !(b instanceof InetSocketAddress y) || x.getAddress() == null
                || y.getAddress() == null || x.getPort() != y.getPort()) {
            return false;
        }
        try {
            return InetAddress.getByAddress(x.getAddress().getAddress())
                    .equals(InetAddress.getByAddress(y.getAddress().getAddress()));
        } catch (UnknownHostException e) {
            return false;
        }
    }

    private static String text(byte[] line) {
        for (byte b : line) {
            if (b < 0x20 || b > 0x7e) {
                throw new IllegalArgumentException("an agreement line with a byte that is not printable ASCII");
            }
        }
        return new String(line, StandardCharsets.US_ASCII);
    }

    private static String clip(String s) {
        return s.length() > 60 ? s.substring(0, 60) + "..." : s;
    }

    /** Lines as bytes, at most {@link #MAX}. */
    private enum Lines implements MethodDescriptor.Marshaller<byte[]> {
        INSTANCE;

        @Override
        public InputStream stream(byte[] value) {
            return new ByteArrayInputStream(value);
        }

        @Override
        public byte[] parse(InputStream stream) {
            try {
                byte[] b = stream.readNBytes(MAX + 1);
                if (b.length > MAX) {
                    throw new IllegalArgumentException("an agreement line over " + MAX + " bytes");
                }
                return b;
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    }
}
