package io.github.sockmap4j.micronaut;

import io.micronaut.http.MediaType;
import io.micronaut.http.annotation.Body;
import io.micronaut.http.annotation.Controller;
import io.micronaut.http.annotation.Post;

/** A Micronaut service as its authors would write it, with nothing of sockmap4j in it. */
@Controller("/")
public class EchoController {
    @Post(uri = "/echo", consumes = MediaType.APPLICATION_OCTET_STREAM, produces = MediaType.APPLICATION_OCTET_STREAM)
    public byte[] echo(@Body byte[] body) {
        return body;
    }
}
