/**
 * For operators, their tools and the node agent: a pin directory set up to outlive its
 * processes ({@link io.github.sockmap4j.admin.SockmapAdmin}), policy changed from outside a
 * service, also without privileges through an agent ({@link io.github.sockmap4j.admin.PolicyClient}).
 * The agent itself is the {@code sockmap4j-agent} module's. Applications do not need this package.
 */
package io.github.sockmap4j.admin;
