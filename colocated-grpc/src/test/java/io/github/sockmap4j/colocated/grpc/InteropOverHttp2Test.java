package io.github.sockmap4j.colocated.grpc;

/** gRPC's interop cases over HTTP/2 (Netty, TCP loopback): the cases checked against gRPC's own transport. */
class InteropOverHttp2Test extends InteropCases {
    @Override
    boolean colocated() {
        return false;
    }
}
