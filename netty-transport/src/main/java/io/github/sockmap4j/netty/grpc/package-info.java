/**
 * For gRPC-Java services and clients: channel and server builders over the Netty transport.
 */
package io.github.sockmap4j.netty.grpc;
