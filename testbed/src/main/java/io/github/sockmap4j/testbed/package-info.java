/**
 * The test bed: what tests, benchmarks and the demo build in the kernel to run in, and take down
 * again: {@link io.github.sockmap4j.testbed.Cgroup2} (a child cgroup), {@link
 * io.github.sockmap4j.testbed.NodeBed} and {@link io.github.sockmap4j.testbed.VethPods} (network
 * namespaces as pods), {@link io.github.sockmap4j.testbed.Sh} (the one way a command is run) and
 * {@link io.github.sockmap4j.testbed.Await} (the one polling wait), {@link
 * io.github.sockmap4j.testbed.ChildJvm} (a second process talked to over stdio). It depends on nothing of
 * sockmap4j, so core's own tests can use it as well as main code (benchmarks, the demo).
 */
package io.github.sockmap4j.testbed;
