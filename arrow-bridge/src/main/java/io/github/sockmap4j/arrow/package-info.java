/**
 * For Apache Arrow applications: record batches between processes over the fast path, their
 * buffers sent from and received into Arrow's own memory.
 */
package io.github.sockmap4j.arrow;
