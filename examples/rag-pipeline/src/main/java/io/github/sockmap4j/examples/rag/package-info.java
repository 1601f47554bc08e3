/**
 * For new users: the RAG pipeline demo, stages as services over gRPC and Arrow on the fast path.
 */
package io.github.sockmap4j.examples.rag;
