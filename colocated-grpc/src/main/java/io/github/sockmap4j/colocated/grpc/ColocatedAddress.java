package io.github.sockmap4j.colocated.grpc;

import java.net.SocketAddress;

/** The address of a co-located connection: its name, as the channel and its logs show it. */
public final class ColocatedAddress extends SocketAddress {
    private static final long serialVersionUID = 1L;
    private final String name;

    public ColocatedAddress(String name) {
        this.name = name;
    }

    public String name() {
        return name;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof ColocatedAddress a && a.name.equals(name);
    }

    @Override
    public int hashCode() {
        return name.hashCode();
    }

    @Override
    public String toString() {
        return "colocated:" + name;
    }
}
