#!/usr/bin/env python3
"""The agent's DaemonSet pod template as the arguments of one 'podman run' on this host.

Podman 4.3's 'kube play' takes no DaemonSet, ignores hostPID (the agent must see the pods'
processes) and refuses a fieldRef to spec.nodeName, so the pod template is turned into 'podman run'
arguments here instead, field by field. Every field of the template is either translated, replaced
for a run on a machine that is not a cluster node (said, with what that changes), or ignored (said,
with what that changes); a field this script does not know stops it, so a manifest change cannot
pass unnoticed.

Usage: podman-args.py DAEMONSET POLICY_CONFIGMAP WORK IMAGE PIN_DIR CGROUP METRICS_PORT CGROUP_PARENT
Prints the arguments after 'podman run', one per line (the image, then the container's
arguments, last); what was replaced or ignored goes to stderr. The ConfigMap's files are written
under WORK/configmap-NAME and mounted from there.
"""
import os
import sys

import yaml


def main(argv):
    if len(argv) != 9:
        sys.exit(__doc__)
    daemonset, policy, work, image, pin_dir, cgroup, metrics_port, cgroup_parent = argv[1:]
    with open(daemonset) as f:
        ds = yaml.safe_load(f)
    if ds.get("kind") != "DaemonSet":
        sys.exit(f"{daemonset}: not a DaemonSet (kind {ds.get('kind')})")
    configmaps = {}
    with open(policy) as f:
        for doc in yaml.safe_load_all(f):
            if doc and doc.get("kind") == "ConfigMap":
                configmaps[doc["metadata"]["name"]] = doc.get("data", {})

    args, notes = [], []

    def note(field, what):
        notes.append(f"{field}: {what}")

    spec = ds["spec"]["template"]["spec"]
    handled = {
        "serviceAccountName": "ignored: no API server here, so no token is mounted; the agent runs without "
                              "--kubernetes (below)",
        "priorityClassName": "ignored: no scheduler or eviction on this host",
        "tolerations": "ignored: no scheduler on this host",
        "dnsPolicy": "ignored: the host's resolver (host network)",
    }
    for key, value in spec.items():
        if key in handled:
            note(key, handled[key])
        elif key == "hostPID":
            if value:
                args += ["--pid", "host"]
        elif key == "hostNetwork":
            if value:
                args += ["--network", "host"]
        elif key == "terminationGracePeriodSeconds":
            args += ["--stop-timeout", str(value)]
        elif key in ("containers", "volumes"):
            pass
        else:
            sys.exit(f"spec.template.spec.{key}: not known to {argv[0]}: translate it or say why it is ignored")

    if len(spec["containers"]) != 1:
        sys.exit("one container expected in the agent's pod")
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    c = spec["containers"][0]
    container_args = None
    for key, value in c.items():
        if key == "name":
            pass
        elif key == "image":
            note("image", f"{value} replaced by {image}, the image scripts/image.sh built and podman loaded")
        elif key == "args":
            container_args = value
        elif key == "env":
            for e in value:
                if "value" in e:
                    args += ["--env", f"{e['name']}={e['value']}"]
                elif e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName":
                    node = os.uname().nodename
                    args += ["--env", f"{e['name']}={node}"]
                    note(f"env {e['name']}", f"fieldRef spec.nodeName (which podman refuses) set to this host's "
                                             f"name, {node}")
                else:
                    sys.exit(f"env {e['name']}: only values and the spec.nodeName fieldRef are translated")
        elif key == "securityContext":
            for k, v in value.items():
                if k == "privileged" and v:
                    args.append("--privileged")
                else:
                    sys.exit(f"securityContext.{k}: not known to {argv[0]}")
        elif key == "ports":
            note("ports", "ignored: on the host's network the agent's port is the host's already")
        elif key in ("livenessProbe", "readinessProbe"):
            note(key, "not run by podman: the script runs its exec command in the agent's container as the "
                      "kubelet would")
        elif key == "resources":
            limit = value.get("limits", {}).get("memory")
            if limit:
                args += ["--memory", limit.replace("Mi", "m").replace("Gi", "g")]
            if "requests" in value:
                note("resources.requests", "ignored: they only place the pod on a node")
        elif key == "volumeMounts":
            for m in value:
                v = volumes[m["name"]]
                opts = []
                if m.get("readOnly"):
                    opts.append("ro")
                if m.get("mountPropagation") == "Bidirectional":
                    opts.append("rshared")
                elif m.get("mountPropagation") not in (None, "None"):
                    sys.exit(f"volumeMount {m['name']}: propagation {m['mountPropagation']} not translated")
                if "hostPath" in v:
                    source = v["hostPath"]["path"]
                    if v["hostPath"].get("type") == "DirectoryOrCreate":
                        os.makedirs(source, exist_ok=True)
                elif "configMap" in v:
                    name = v["configMap"]["name"]
                    if name not in configmaps:
                        sys.exit(f"volume {m['name']}: no ConfigMap {name} in {policy}")
                    source = os.path.join(work, "configmap-" + name)
                    os.makedirs(source, exist_ok=True)
                    for file, text in configmaps[name].items():
                        with open(os.path.join(source, file), "w") as f:
                            f.write(text)
                    note(f"volume {m['name']}", f"ConfigMap {name} from {policy}, written to {source}")
                else:
                    sys.exit(f"volume {m['name']}: only hostPath and configMap volumes are translated")
                args += ["-v", f"{source}:{m['mountPath']}" + (":" + ",".join(opts) if opts else "")]
        else:
            sys.exit(f"containers[0].{key}: not known to {argv[0]}: translate it or say why it is ignored")

    args += ["--cgroup-parent", cgroup_parent]
    note("cgroup", f"the container's own cgroup under {cgroup_parent}, made for the run")
    replaced = {
        "--pin-dir": (pin_dir, "a pin directory of the run's, not a node agent's"),
        "--cgroup": (cgroup, "the cgroup the run's pods live under (on a node: the kubelet's pods cgroup)"),
        "--metrics-port": (metrics_port, "a free port of the host's network"),
    }
    out = []
    for a in container_args or []:
        name = a.split("=", 1)[0]
        if name in replaced:
            new, why = replaced[name]
            note(a, f"{name}={new}: {why}")
            out.append(f"{name}={new}")
        elif a == "--kubernetes":
            note(a, "dropped: no API server here; rules come through the control socket ('allow'), as the pod "
                    "reconciler makes them from the sockmap4j.io/ports annotation")
        else:
            out.append(a)
    for n in notes:
        print("podman-args: " + n, file=sys.stderr)
    print("\n".join(args + [image] + out))


if __name__ == "__main__":
    main(sys.argv)
