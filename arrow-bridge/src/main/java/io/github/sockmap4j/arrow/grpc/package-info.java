/** Arrow record batches as gRPC messages, lent by reference over a co-located connection ({@link io.github.sockmap4j.arrow.grpc.ArrowGrpc}). */
package io.github.sockmap4j.arrow.grpc;
