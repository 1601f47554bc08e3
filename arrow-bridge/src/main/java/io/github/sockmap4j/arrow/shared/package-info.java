/**
 * Arrow batches lent by reference between the two ends of a co-located connection: the sender
 * builds a batch in the heap of the connection's shared region ({@link
 * io.github.sockmap4j.arrow.shared.BatchSender}), the receiver reads it where it is and gives it
 * back when it closes it ({@link io.github.sockmap4j.arrow.shared.BatchReceiver}). How the region
 * reaches the receiver is {@link io.github.sockmap4j.colocated.Handover}'s.
 */
package io.github.sockmap4j.arrow.shared;
