package com.example.sockmap;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapStats;
import io.micronaut.context.ApplicationContext;
import io.micronaut.http.HttpRequest;
import io.micronaut.http.MediaType;
import io.micronaut.http.annotation.Body;
import io.micronaut.http.annotation.Controller;
import io.micronaut.http.annotation.Post;
import io.micronaut.http.client.BlockingHttpClient;
import io.micronaut.http.client.HttpClient;
import io.micronaut.runtime.server.EmbeddedServer;

/**
 * A Micronaut controller and a client calling it, on the sockmap transport (two lines of
 * application.properties). Run with a call count; prints what the kernel redirected and exits.
 */
@Controller("/")
public class Service {
    @Post(uri = "/echo", consumes = MediaType.APPLICATION_OCTET_STREAM, produces = MediaType.APPLICATION_OCTET_STREAM)
    public byte[] echo(@Body byte[] body) {
        return body;
    }

    public static void main(String[] args) throws Exception {
        int calls = args.length > 0 ? Integer.parseInt(args[0]) : 1000;
        try (EmbeddedServer server = ApplicationContext.run(EmbeddedServer.class);
             HttpClient client = server.getApplicationContext().createBean(HttpClient.class, server.getURL())) {
            BlockingHttpClient blocking = client.toBlocking();
            Sockmap sockmap = Sockmap.global();
            SockmapStats before = sockmap.stats();
            byte[] body = new byte[4096];
            for (int i = 0; i < calls; i++) {
                blocking.retrieve(HttpRequest.POST("/echo", body).contentType(MediaType.APPLICATION_OCTET_STREAM_TYPE)
                        .accept(MediaType.APPLICATION_OCTET_STREAM_TYPE), byte[].class);
            }
            SockmapStats after = sockmap.stats();
            System.out.printf("%d calls of %d bytes%n", calls, body.length);
            System.out.printf("example=micronaut active=%s redirected=%d tcp=%d%n", sockmap.isActive(),
                    after.bytesRedirected() - before.bytesRedirected(), after.bytesPassed() - before.bytesPassed());
        }
    }
}
