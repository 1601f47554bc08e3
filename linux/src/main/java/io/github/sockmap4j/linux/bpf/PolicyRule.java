package io.github.sockmap4j.linux.bpf;

/**
 * A policy rule: a server port, optionally limited to a server address prefix.
 *
 * @param port      the server port
 * @param prefixHex the LPM key ({@link PolicyKeyLayout}) in hex: one rule, one key
 * @param bits      how many address bits the key matches (0: any address)
 */
public record PolicyRule(int port, String prefixHex, int bits) {
}
