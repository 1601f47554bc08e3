package io.github.sockmap4j.linux.bpf;

import java.net.Inet4Address;
import java.net.InetAddress;

/**
 * The checks every way of opting in shares (an application's opt-in, the policy client, the agent): a port,
 * a server prefix turned into the policy key's bit count, and an in-flight bound.
 */
public final class Rules {
    private Rules() {
    }

    public static void checkPort(int port) {
        if (port < 1 || port > 65535) {
            throw new IllegalArgumentException("port must be 1..65535: port=" + port);
        }
    }

    /**
     * How many bits of the policy key's 16-byte address a prefix matches: 0 for any address, an
     * IPv4 prefix counted after the 96 bits of its v4-mapped form.
     *
     * @throws IllegalArgumentException for a prefix longer than the address
     */
    public static int keyBits(InetAddress network, int prefixBits) {
        if (network == null) {
            return 0;
        }
        int max = network instanceof Inet4Address ? 32 : 128;
        if (prefixBits < 0 || prefixBits > max) {
            throw new IllegalArgumentException("prefix must be 0.." + max + " for " + network.getHostAddress()
                    + ": prefixBits=" + prefixBits);
        }
        return max == 32 ? 96 + prefixBits : prefixBits;
    }

    /** @throws IllegalArgumentException unless {@code bytes} is 0 (each receiver's), positive, or UNBOUNDED */
    public static void checkBound(int bytes) {
        if (bytes < 0 && bytes != PolicyKeyLayout.UNBOUNDED) {
            throw new IllegalArgumentException("bound must be >= 0 bytes (or UNBOUNDED): bytes=" + bytes);
        }
    }
}
