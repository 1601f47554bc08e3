/**
 * For measuring: JMH micro-benchmarks of one thread's sends and receives.
 */
package io.github.sockmap4j.bench.jmh;
