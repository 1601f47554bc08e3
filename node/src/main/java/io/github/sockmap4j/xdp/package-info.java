/**
 * The XDP ingress filter, for operators and services that drop unwanted traffic on an interface
 * they own before the stack sees it: {@link io.github.sockmap4j.xdp.XdpFilter} and its rules.
 */
package io.github.sockmap4j.xdp;
