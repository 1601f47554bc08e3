package com.example.unchanged.quarkus;

import jakarta.ws.rs.POST;
import jakarta.ws.rs.Path;

/** POST /echo: the request body back. */
@Path("/echo")
public class Echo {
    @POST
    public byte[] echo(byte[] body) {
        return body;
    }
}
