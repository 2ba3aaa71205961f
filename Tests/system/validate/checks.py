"""Cross-file checks for deploy/ that the schema validators cannot make (run by run.sh).

  python checks.py k8s-refs DIR          every manifest is in DIR/kustomization.yaml and the
                                         names the objects refer to each other by exist
  python checks.py nginx-agree A B       the compose nginx config and the test template carry the
                                         same proxy settings, and neither replays POSTs

Prints the problems found and exits 1, or exits 0 silently. Needs PyYAML.
"""

import re
import sys
from pathlib import Path

import yaml


def k8s_refs(directory: Path) -> list[str]:
    problems: list[str] = []
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    listed = list(kustomization.get("resources") or [])
    present = sorted(p.name for p in directory.glob("*.yaml") if p.name != "kustomization.yaml")
    for name in listed:
        if name not in present:
            problems.append(f"kustomization.yaml lists {name}, which does not exist")
    for name in present:
        if name not in listed:
            problems.append(f"{name} is not listed in kustomization.yaml (kubectl apply -k would skip it)")

    objects: dict[tuple[str, str], dict] = {}
    namespace = kustomization.get("namespace")
    for name in present:
        for doc in yaml.safe_load_all((directory / name).read_text()):
            if not doc:
                continue
            kind, meta = doc.get("kind"), doc.get("metadata") or {}
            objects[(kind, meta.get("name"))] = doc
            ns = meta.get("namespace")
            if kind != "Namespace" and namespace and ns not in (None, namespace):
                problems.append(f"{name}: {kind}/{meta.get('name')} is in namespace {ns}, not {namespace}")

    def exists(kind: str, name: str) -> bool:
        return (kind, name) in objects

    def pod_labels(workload: dict) -> dict:
        return ((workload["spec"]["template"].get("metadata") or {}).get("labels")) or {}

    def selects(selector: dict, labels: dict) -> bool:
        return bool(selector) and all(labels.get(k) == v for k, v in selector.items())

    deployments = {n: d for (k, n), d in objects.items() if k == "Deployment"}
    for (kind, name), doc in objects.items():
        if kind not in ("Deployment", "Job"):
            continue
        pod = doc["spec"]["template"]["spec"]
        if kind == "Deployment":
            selector = doc["spec"]["selector"].get("matchLabels") or {}
            if not selects(selector, pod_labels(doc)):
                problems.append(f"Deployment/{name}: spec.selector does not match the pod template labels")
        for container in pod.get("containers", []) + pod.get("initContainers", []):
            cname = container["name"]
            for source in container.get("envFrom", []):
                for ref_key, ref_kind in (("configMapRef", "ConfigMap"), ("secretRef", "Secret")):
                    ref = source.get(ref_key)
                    if ref and not ref.get("optional") and not exists(ref_kind, ref["name"]):
                        problems.append(f"{kind}/{name} container {cname}: envFrom {ref_kind} {ref['name']} is not defined")
            port_names = {p.get("name") for p in container.get("ports", [])}
            for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
                port = ((container.get(probe) or {}).get("httpGet") or {}).get("port")
                if isinstance(port, str) and port not in port_names:
                    problems.append(f"{kind}/{name} container {cname}: {probe} port {port} is not a named container port")
            mounts = {v["name"] for v in pod.get("volumes", [])}
            for mount in container.get("volumeMounts", []):
                if mount["name"] not in mounts:
                    problems.append(f"{kind}/{name} container {cname}: volumeMount {mount['name']} has no volume")

    def deployment_for(selector: dict) -> dict | None:
        return next((d for d in deployments.values() if selects(selector, pod_labels(d))), None)

    for (kind, name), doc in objects.items():
        if kind == "Service":
            target = deployment_for(doc["spec"].get("selector") or {})
            if target is None:
                problems.append(f"Service/{name}: its selector matches no Deployment's pods")
                continue
            port_names = {p.get("name") for c in target["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])}
            for port in doc["spec"].get("ports", []):
                if isinstance(port.get("targetPort"), str) and port["targetPort"] not in port_names:
                    problems.append(f"Service/{name}: targetPort {port['targetPort']} is not a container port name")
        elif kind == "PodDisruptionBudget":
            if deployment_for((doc["spec"].get("selector") or {}).get("matchLabels") or {}) is None:
                problems.append(f"PodDisruptionBudget/{name}: its selector matches no Deployment's pods")
        elif kind == "HorizontalPodAutoscaler":
            ref = doc["spec"]["scaleTargetRef"]
            if not exists(ref["kind"], ref["name"]):
                problems.append(f"HorizontalPodAutoscaler/{name}: target {ref['kind']}/{ref['name']} is not defined")
        elif kind == "Ingress":
            for rule in doc["spec"].get("rules", []):
                for path in (rule.get("http") or {}).get("paths", []):
                    service = path["backend"].get("service") or {}
                    svc = objects.get(("Service", service.get("name")))
                    if svc is None:
                        problems.append(f"Ingress/{name}: backend Service {service.get('name')} is not defined")
                        continue
                    port = service.get("port") or {}
                    names = {p.get("name") for p in svc["spec"]["ports"]}
                    numbers = {p.get("port") for p in svc["spec"]["ports"]}
                    if ("name" in port and port["name"] not in names) or ("number" in port and port["number"] not in numbers):
                        problems.append(f"Ingress/{name}: backend port {port} is not a port of Service {service.get('name')}")
    return problems


# The directives both nginx configs must carry identically (compared as normalised lines);
# proxy_temp_path is the test template's own (it keeps temp files in the test's folder).
SHARED = re.compile(r"^(proxy_(?!temp_path)\w+|client_max_body_size|keepalive|server_tokens|location|return)\b")


def nginx_directives(path: Path) -> tuple[list[str], list[str]]:
    lines, replays = [], []
    for raw in path.read_text().splitlines():
        line = " ".join(raw.split("#", 1)[0].split())
        if "non_idempotent" in line:
            replays.append(f"{path.name}: `{line}` would replay POSTs on another node")
        if SHARED.match(line):
            lines.append(line)
    return lines, replays


def nginx_agree(a: Path, b: Path) -> list[str]:
    (la, ra), (lb, rb) = nginx_directives(a), nginx_directives(b)
    problems = ra + rb
    if sorted(la) != sorted(lb):
        only_a = sorted(set(la) - set(lb))
        only_b = sorted(set(lb) - set(la))
        problems.append(f"the proxy settings differ: only in {a.name}: {only_a}; only in {b.name}: {only_b}")
    if not any(line.startswith("proxy_next_upstream ") for line in la):
        problems.append(f"{a.name}: no proxy_next_upstream")
    return problems


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "k8s-refs":
        problems = k8s_refs(Path(argv[1]))
    elif len(argv) == 3 and argv[0] == "nginx-agree":
        problems = nginx_agree(Path(argv[1]), Path(argv[2]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
