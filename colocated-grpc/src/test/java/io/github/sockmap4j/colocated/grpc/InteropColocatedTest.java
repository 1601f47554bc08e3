package io.github.sockmap4j.colocated.grpc;

/** gRPC's interop cases over an agreed co-located connection: every call after the agreement goes co-located. */
class InteropColocatedTest extends InteropCases {
    @Override
    boolean colocated() {
        return true;
    }
}
