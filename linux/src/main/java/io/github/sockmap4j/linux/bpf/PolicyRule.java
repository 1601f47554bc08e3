package io.github.sockmap4j.linux.bpf;

import io.github.sockmap4j.linux.net.Cidr;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.UnknownHostException;

/**
 * One rule of the fast path's policy, in the one shape every way in uses (a service's opt-in, the
 * policy client, the agent's control socket, its policy file, the map): connections to a server on
 * {@link #port} at an address in {@link #network} are redirected. Its values are checked here and
 * nowhere else, when it is made; a rule that exists is one the policy map can key.
 *
 * <p>The network is kept as the policy map keys it: its bits past the prefix zeroed, "any
 * address" always as a null network with 0 bits, a v4-mapped IPv6 network as IPv4; so two rules
 * are equal exactly when they are the same entry of the map.
 *
 * @param port    the server port, 1 to 65535
 * @param network the servers' network, or null for any address
 * @param keyBits how many leading bits of the policy key's 16-byte address the rule fixes: 0 for
 *                any address, 96 + n for an IPv4 prefix of n bits (the key holds IPv4 v4-mapped),
 *                n for an IPv6 prefix
 */
public record PolicyRule(int port, InetAddress network, int keyBits) {
    /** @throws IllegalArgumentException saying which value is out of range */
    public PolicyRule {
        if (port < 1 || port > 65535) {
            throw new IllegalArgumentException("port must be 1..65535: port=" + port);
        }
        if (network == null) {
            if (keyBits != 0) {
                throw new IllegalArgumentException("address bits must be 0 for any address: " + keyBits);
            }
        } else {
            boolean v4 = network instanceof Inet4Address;
            if (keyBits < (v4 ? 96 : 0) || keyBits > 128) {
                throw new IllegalArgumentException("address bits must be " + (v4 ? "96..128 for an IPv4 network"
                        : "0..128") + ": " + keyBits);
            }
            if (keyBits == 0) {
                network = null; // ::/0 is any address, as the map keys it
            } else {
                // An IPv6 network of v4-mapped bytes that fixes 96 bits or more becomes the IPv4 rule
                // it keys the same as.
                network = masked(network, v4 ? keyBits - 96 : keyBits);
            }
        }
    }

    /**
     * The rule for servers in {@code network}/{@code prefixBits}, a prefix of the address's own
     * length (up to 32 for IPv4, 128 for IPv6); a null network (any address) ignores the prefix.
     *
     * @throws IllegalArgumentException for a port out of range or a prefix longer than the address
     */
    public static PolicyRule of(int port, InetAddress network, int prefixBits) {
        if (network == null) {
            return new PolicyRule(port, null, 0);
        }
        new Cidr(network, prefixBits); // the prefix's check, as every network's
        return new PolicyRule(port, network, network instanceof Inet4Address ? 96 + prefixBits : prefixBits);
    }

    /** Any server address on {@code port}. */
    public static PolicyRule anyAddress(int port) {
        return new PolicyRule(port, null, 0);
    }

    /** How many leading bits of {@link #network} the rule fixes, in the address's own length (0: any address). */
    public int prefixBits() {
        return network instanceof Inet4Address ? keyBits - 96 : keyBits;
    }

    /** Whether a server at {@code address} is in this rule's network (any address: always), as the map matches it. */
    public boolean covers(InetAddress address) {
        if (network == null) {
            return true;
        }
        byte[] a = SockKeyLayout.mapped(address);
        byte[] n = SockKeyLayout.mapped(network);
        for (int bit = 0; bit < keyBits; bit++) {
            int mask = 0x80 >>> (bit % 8);
            if ((a[bit / 8] & mask) != (n[bit / 8] & mask)) {
                return false;
            }
        }
        return true;
    }

    /** {@code PORT} or {@code PORT/ADDRESS/PREFIX}. */
    public String target() {
        return network == null ? Integer.toString(port) : port + "/" + network.getHostAddress() + "/" + prefixBits();
    }

    /**
     * Checks an in-flight bound, the value a rule's entry holds.
     *
     * @throws IllegalArgumentException unless {@code bytes} is 0 (each receiver's), positive, or
     *                                  {@link PolicyKeyLayout#UNBOUNDED} (-1)
     */
    public static void checkBound(int bytes) {
        if (bytes < 0 && bytes != PolicyKeyLayout.UNBOUNDED) {
            throw new IllegalArgumentException("bound must be >= 0 bytes, or -1 (unbounded): bytes=" + bytes);
        }
    }

    /** The policy map's key of this rule (the LPM trie's, {@link PolicyKeyLayout}). */
    byte[] key() {
        try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofConfined()) {
            java.lang.foreign.MemorySegment key = arena.allocate(PolicyKeyLayout.LAYOUT);
            PolicyKeyLayout.fill(key, port, network == null ? new byte[16] : SockKeyLayout.mapped(network), keyBits);
            return key.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
        }
    }

    @Override
    public String toString() {
        return target();
    }

    private static InetAddress masked(InetAddress a, int bits) {
        byte[] b = a.getAddress();
        for (int i = 0; i < b.length; i++) {
            int keep = Math.max(0, Math.min(8, bits - i * 8));
            b[i] &= (byte) (keep == 0 ? 0 : 0xff << (8 - keep));
        }
        try {
            return InetAddress.getByAddress(b); // v4-mapped bytes (96 bits or more fixed) come back IPv4
        } catch (UnknownHostException e) {
            throw new IllegalStateException("4 or 16 bytes are an address", e);
        }
    }
}
