package com.example.unchanged.helidon;

import io.helidon.webserver.WebServer;
import java.net.InetAddress;

/**
 * {@code Service ADDR PORT}: Helidon SE's web server serving POST /echo (the request body back);
 * prints "ready=1" once it listens.
 */
public final class Service {
    private Service() {
    }

    public static void main(String[] args) throws Exception {
        WebServer server = WebServer.builder()
                .address(InetAddress.getByName(args[0]))
                .port(Integer.parseInt(args[1]))
                .routing(r -> r.post("/echo", (req, res) -> res.send(req.content().as(byte[].class))))
                .build()
                .start();
        System.out.println("ready=" + (server.isRunning() ? 1 : 0));
        System.out.flush();
        Thread.currentThread().join();
    }
}
