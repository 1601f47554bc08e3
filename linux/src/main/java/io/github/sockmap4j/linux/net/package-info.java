/**
 * Not an API: sockets by fd (addresses, options, one identity per connection, close-once fds,
 * reads and writes of buffers), literal-only address parsing, the control socket's listener.
 */
package io.github.sockmap4j.linux.net;
