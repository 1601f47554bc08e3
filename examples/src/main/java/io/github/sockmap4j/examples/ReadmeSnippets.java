package io.github.sockmap4j.examples;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapChannel;
import io.github.sockmap4j.SockmapServerChannel;
import io.github.sockmap4j.SockmapStats;
import io.github.sockmap4j.netty.grpc.SockmapGrpc;
import io.grpc.BindableService;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import java.io.IOException;
import java.net.InetSocketAddress;

/**
 * The Java snippets of the project's README.md, compiled: ReadmeSnippetsTest checks that every
 * line of every {@code java} block there is here. Not meant to be run.
 */
final class ReadmeSnippets {
    private ReadmeSnippets() {
    }

    static void channels() throws IOException {
        Sockmap sockmap = Sockmap.global();                  // one line in the log says active or why not
        try (SockmapServerChannel server = sockmap.openServerChannel()) {
            server.bind(new InetSocketAddress(9000));        // port 9000 is opted in until close()
            SockmapChannel ch = (SockmapChannel) server.accept();
            ch.isAccelerated();                              // checked against the kernel's map
        }
    }

    static void grpc(int port, BindableService myService) throws IOException {
        Server server = SockmapGrpc.configure(NettyServerBuilder.forPort(port))
                .addService(myService).build().start();   // the port is opted in when start() returns
        ManagedChannel channel = SockmapGrpc.configure(NettyChannelBuilder.forAddress("localhost", port))
                .usePlaintext().build();
        channel.shutdownNow();
        server.shutdownNow();
    }

    static void state() {
        Sockmap sockmap = Sockmap.global();
        boolean active = sockmap.isActive();                 // false: plain TCP, and...
        String why = sockmap.unavailabilityCause();          // ...why, with what to do (null when active)
        String outside = sockmap.coverageProblem();          // set up, but this process is outside its cgroup
        SockmapStats stats = sockmap.stats();                // the kernel's counters
        System.out.println(active + " " + why + " " + outside + " " + stats);
    }
}
