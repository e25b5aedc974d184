"""The Helm chart (ops/helm/freshet), offline: `helm lint`, and `helm template` piped into the same
Kubernetes schema validation as the kustomize manifests (tests/test_deploy.py).

helm is built from the Go module proxy into ~/.cache/freshet/helm by scripts/fetch_helm.sh (run by
`make test`, beside the venv); a missing binary fails these tests, naming that script.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.test_deploy import SERVICEMONITOR_SCHEMA, render_kustomization
from warehouse.config import parse_config

ROOT = Path(__file__).resolve().parents[1]
OPS = ROOT / "ops"
CHART = OPS / "helm" / "freshet"
KUBE = "1.30"  # the schemas test_deploy.py validates the kustomize manifests against

# monitoring.coreos.com/v1 PrometheusRule: the fields the chart uses, unknown ones rejected (a subset
# of the operator's published CRD schema, like SERVICEMONITOR_SCHEMA)
PROMETHEUSRULE_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "PrometheusRule"},
        "metadata": {"type": "object", "required": ["name"]},
        "spec": {"type": "object", "additionalProperties": False, "properties": {
            "groups": {"type": "array", "minItems": 1, "items": {
                "type": "object", "required": ["name", "rules"], "additionalProperties": False,
                "properties": {
                    "name": {"type": "string", "minLength": 1},
                    "interval": {"type": "string"},
                    "rules": {"type": "array", "items": {
                        "type": "object", "required": ["expr"], "additionalProperties": False,
                        "oneOf": [{"required": ["alert"]}, {"required": ["record"]}],
                        "properties": {
                            "alert": {"type": "string"}, "record": {"type": "string"},
                            "expr": {"type": "string", "minLength": 1},
                            "for": {"type": "string", "pattern": "^(0|(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?)$"},
                            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                            "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
                        }}},
                }}},
        }},
    },
}


def helm_binary() -> str:
    path = subprocess.run(["bash", str(ROOT / "scripts" / "fetch_helm.sh"), "--path"], capture_output=True,
                          text=True, check=True, timeout=30).stdout.strip()
    if not Path(path).is_file():
        pytest.fail(f"helm not found at {path}: run `bash scripts/fetch_helm.sh` (builds it from the Go module "
                    "proxy; `make test` does it)")
    return path


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([helm_binary(), *args], capture_output=True, text=True, timeout=120)


def template(*sets: str, release: str = "freshet", raw: bool = False) -> dict[tuple[str, str], dict]:
    """`helm template` of the chart with `--set`s (`raw`: arguments as they are), as {(kind, name): object}."""
    args = ["template", release, str(CHART), "--namespace", "freshet", "--kube-version", f"{KUBE}.0"]
    for s in sets:
        args += [s] if raw else ["--set", s]
    r = helm(*args)
    assert r.returncode == 0, r.stderr
    docs = [d for d in yaml.safe_load_all(r.stdout) if d]
    out = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    assert len(out) == len(docs), "two objects with one kind and name"
    return out


def validate(objects: dict[tuple[str, str], dict]) -> None:
    for (kind, _), doc in objects.items():
        if kind == "ServiceMonitor":
            jsonschema.validate(doc, SERVICEMONITOR_SCHEMA)
        elif kind == "PrometheusRule":
            jsonschema.validate(doc, PROMETHEUSRULE_SCHEMA)
        else:
            kubernetes_validate.validate(doc, KUBE, strict=True)


def daemon_config(objects: dict[tuple[str, str], dict], name: str = "freshet"):
    cm = objects[("ConfigMap", f"{name}-config")]
    return parse_config(yaml.safe_load(cm["data"]["freshet.yaml"]), source=f"helm {name}-config")


@pytest.fixture(scope="module")
def chart() -> dict[tuple[str, str], dict]:
    return template()


def test_helm_lint_is_clean():
    for sets in ((), ("sparkConnect.enabled=true", "grafanaDashboard.enabled=true")):
        args = ["lint", str(CHART), "--strict", "--kube-version", f"{KUBE}.0"]
        for s in sets:
            args += ["--set", s]
        r = helm(*args)
        assert r.returncode == 0 and "0 chart(s) failed" in r.stdout, r.stdout + r.stderr
        assert "[ERROR]" not in r.stdout and "[WARNING]" not in r.stdout, r.stdout


def test_helm_template_validates_against_the_kubernetes_schemas(chart):
    assert set(chart) == {("ConfigMap", "freshet-config"), ("PersistentVolumeClaim", "freshet-data"),
                          ("Deployment", "freshet"), ("Service", "freshet"), ("ServiceMonitor", "freshet"),
                          ("PrometheusRule", "freshet")}
    validate(chart)
    everything = template("sparkConnect.enabled=true", "grafanaDashboard.enabled=true", release="wh1")
    assert {("Deployment", "wh1-freshet-spark-connect"), ("Service", "wh1-freshet-spark-connect"),
            ("NetworkPolicy", "wh1-freshet-spark-connect"), ("ConfigMap", "wh1-freshet-dashboard")} <= set(everything)
    validate(everything)


def test_helm_validation_can_fail(chart):
    bad = json.loads(json.dumps(chart[("Deployment", "freshet")]))
    bad["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "http"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, KUBE, strict=True)
    rule = json.loads(json.dumps(chart[("PrometheusRule", "freshet")]))
    rule["spec"]["groups"][1]["rules"][0]["fore"] = "5m"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(rule, PROMETHEUSRULE_SCHEMA)


def test_prometheusrule_is_the_rules_file(chart):
    """The PrometheusRule is ops/prometheus/rules.yml itself — the file promtool checks and tests —
    through a link in the chart, not a copy."""
    link = CHART / "files" / "rules.yml"
    assert link.is_symlink() and link.resolve() == (OPS / "prometheus" / "rules.yml").resolve()
    rules = yaml.safe_load((OPS / "prometheus" / "rules.yml").read_text())
    assert chart[("PrometheusRule", "freshet")]["spec"] == rules
    dash = CHART / "files" / "freshet-dashboard.json"
    assert dash.is_symlink() and dash.resolve() == (OPS / "grafana" / "freshet-dashboard.json").resolve()
    cm = template("grafanaDashboard.enabled=true")[("ConfigMap", "freshet-dashboard")]
    assert json.loads(cm["data"]["freshet-dashboard.json"]) == json.loads(dash.read_text())
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"


def test_packaged_chart_carries_the_rules(chart, tmp_path):
    """`helm package` stores the linked files' contents: the chart installed from a repository
    renders the same PrometheusRule as the chart in this directory."""
    r = helm("package", str(CHART), "--destination", str(tmp_path))
    assert r.returncode == 0, r.stderr
    (tgz,) = tmp_path.glob("freshet-*.tgz")
    r = helm("template", "freshet", str(tgz), "--namespace", "freshet", "--kube-version", f"{KUBE}.0",
             "--show-only", "templates/prometheusrule.yaml")
    assert r.returncode == 0, r.stderr
    assert yaml.safe_load(r.stdout) == chart[("PrometheusRule", "freshet")]


def test_helm_objects_fit_together(chart):
    dep, svc, sm = chart[("Deployment", "freshet")], chart[("Service", "freshet")], chart[("ServiceMonitor", "freshet")]
    spec = dep["spec"]
    assert spec["replicas"] == 1 and spec["strategy"]["type"] == "Recreate"  # one writer per table
    pod = spec["template"]
    assert spec["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert svc["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert sm["spec"]["endpoints"][0]["port"] in {p["name"] for p in svc["spec"]["ports"]}
    # the rules select job="freshet": the ServiceMonitor's job comes from a label that says so
    assert svc["metadata"]["labels"][sm["spec"]["jobLabel"]] == "freshet"
    (c,) = pod["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz" and c["livenessProbe"]["httpGet"]["port"] in ports
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["config"]["configMap"]["name"] == "freshet-config"
    assert volumes["data"]["persistentVolumeClaim"]["claimName"] == "freshet-data"
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    cfg = daemon_config(chart)
    assert int(cfg.listen.rsplit(":", 1)[1]) == ports["http"] == svc["spec"]["ports"][0]["port"]
    assert f"--config={mounts['config']}/freshet.yaml" in c["args"]
    assert cfg.warehouse.root.startswith(mounts["data"]) and cfg.warehouse.landing.startswith(mounts["data"])
    assert cfg.spark.master == "local[*]" and cfg.spark.remote is None
    grace = int(next(a for a in c["args"] if a.startswith("--grace=")).split("=")[1])
    assert pod["spec"]["terminationGracePeriodSeconds"] > grace
    # a changed config rolls the pod
    other = template("service.port=9500")[("Deployment", "freshet")]["spec"]["template"]["metadata"]["annotations"]
    assert other["checksum/config"] != pod["metadata"]["annotations"]["checksum/config"]
    assert chart[("PersistentVolumeClaim", "freshet-data")]["metadata"]["annotations"] == {
        "helm.sh/resource-policy": "keep"}


def test_helm_runs_the_daemon_as_kustomize_does(chart):
    """ops/k8s and the chart's defaults deploy the same daemon: image, arguments, probes, resources,
    security, the same config (the chart fills in `listen`)."""
    k8s = {(d["kind"], d["metadata"]["name"]): d for d in render_kustomization(OPS / "k8s")}
    kpod, hpod = (x[("Deployment", "freshet")]["spec"]["template"]["spec"] for x in (k8s, chart))
    (kc,), (hc,) = kpod["containers"], hpod["containers"]
    for key in ("image", "args", "env", "ports", "startupProbe", "livenessProbe", "readinessProbe", "resources",
                "securityContext", "volumeMounts"):
        assert hc[key] == kc[key], key
    for key in ("securityContext", "terminationGracePeriodSeconds"):
        assert hpod[key] == kpod[key], key
    kcfg = yaml.safe_load(k8s[("ConfigMap", "freshet-config")]["data"]["freshet.yaml"])
    hcfg = yaml.safe_load(chart[("ConfigMap", "freshet-config")]["data"]["freshet.yaml"])
    assert hcfg == kcfg
    assert chart[("PersistentVolumeClaim", "freshet-data")]["spec"] == k8s[("PersistentVolumeClaim", "freshet-data")]["spec"]


def test_helm_spark_connect_server(chart):
    """sparkConnect.enabled: the daemon's config points at the Connect server's Service, both pods
    share one ReadWriteMany volume at the same path, only the daemon may reach the server."""
    objs = template("sparkConnect.enabled=true", release="wh1")
    name = "wh1-freshet-spark-connect"
    cfg = daemon_config(objs, "wh1-freshet")
    assert cfg.spark.remote == f"sc://{name}:15002" and cfg.spark.master is None
    assert cfg.spark.conf == {"spark.sql.shuffle.partitions": "8"}  # runtime settings only
    svc, server = objs[("Service", name)], objs[("Deployment", name)]
    (sport,) = svc["spec"]["ports"]
    pod = server["spec"]["template"]
    assert svc["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    (c,) = pod["spec"]["containers"]
    assert {p["name"]: p["containerPort"] for p in c["ports"]}[sport["targetPort"]] == sport["port"] == 15002
    assert "--port=15002" in c["args"] and "--host=0.0.0.0" in c["args"]
    assert c["command"][-1].endswith("scripts/connect_server.py")
    daemon = objs[("Deployment", "wh1-freshet")]["spec"]["template"]
    (dc,) = daemon["spec"]["containers"]
    assert c["image"] == dc["image"]  # the same Spark and Delta as the daemon's client
    assert objs[("PersistentVolumeClaim", "wh1-freshet-data")]["spec"]["accessModes"] == ["ReadWriteMany"]

    def data_mount(p: dict, container: dict) -> str:
        (vol,) = [v for v in p["spec"]["volumes"] if v.get("persistentVolumeClaim", {}).get("claimName") == "wh1-freshet-data"]
        (m,) = [m for m in container["volumeMounts"] if m["name"] == vol["name"]]
        return m["mountPath"]

    assert data_mount(pod, c) == data_mount(daemon, dc)
    assert cfg.warehouse.root.startswith(data_mount(pod, c))
    assert dc["resources"]["requests"]["cpu"] == "500m"  # no Spark driver in the daemon's pod
    (rule,) = objs[("NetworkPolicy", name)]["spec"]["ingress"]
    (peer,) = rule["from"]
    assert peer["podSelector"]["matchLabels"].items() <= daemon["metadata"]["labels"].items()
    assert not peer["podSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    # the same as ops/k8s-connect, but for the names
    kc = {(d["kind"], d["metadata"]["name"]): d for d in render_kustomization(OPS / "k8s-connect")}
    (kcc,) = kc[("Deployment", "spark-connect")]["spec"]["template"]["spec"]["containers"]
    for key in ("command", "args", "resources", "securityContext", "startupProbe", "readinessProbe"):
        assert c[key] == kcc[key], key


@pytest.mark.parametrize(("sets", "message"), [
    (("service.port=http",), "/service/port"),
    (("serviceMonitr.enabled=false",), "serviceMonitr"),
    (("persistence.accessModes={ReadWriteSometimes}",), "/persistence/accessModes/0"),
    (("config.listen=0.0.0.0:80",), "config.listen is set by the chart"),
    (("sparkConnect.enabled=true", "persistence.enabled=false"), "needs persistence.enabled"),
    # a standby needs the lease where both pods see it, and a landing zone both read
    (("replicas=2",), "replicas > 1 needs config.warehouse.root in a bucket"),
    (("replicas=2", "config.warehouse.root=s3a://lake/wh", "persistence.enabled=false"),
     "replicas > 1 needs persistence.enabled"),
    (("replicas=7",), "/replicas"),
])
def test_bad_values_are_refused_naming_the_value(sets, message):
    args = ["template", "freshet", str(CHART), "--kube-version", f"{KUBE}.0"]
    for s in sets:
        args += ["--set", s]
    r = helm(*args)
    assert r.returncode != 0 and message in r.stderr, r.stderr


def test_an_invalid_warehouse_config_is_caught_before_it_reaches_a_cluster():
    """The chart passes values.config through; the daemon's own validation (the one `freshet
    validate` runs) rejects a bad one from the rendered ConfigMap."""
    objs = template("config.tables[0].priority=-1")
    with pytest.raises(Exception, match="priority"):
        daemon_config(objs)


STANDBY_VALUES = {
    "replicas": 2,
    "s3Credentials": {"secretName": "freshet-s3"},
    "serviceAccount": {"annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/freshet"}},
    "config": {
        "version": 1,
        "warehouse": {"root": "s3a://lake/warehouse", "landing": "/var/lib/freshet/landing",
                      "s3": {"endpoint": "http://minio.minio:9000", "path_style": True, "credentials": "env"}},
        "streams": [{"name": "s", "period": "5m", "time_column": "ts", "format": "parquet",
                     "schema": {"ts": "timestamp", "v": "double"}}],
        "tables": [{"name": "s_raw", "stream": "s", "priority": 5}],
    },
}


def test_helm_two_replicas_on_object_storage_stand_by_for_each_other(tmp_path):
    """replicas: 2 with the warehouse in a bucket: both pods run `--standby`; the Service selects the
    pod that labels itself leader (ops/podrole.py, allowed by the Role), both count as ready for
    rollouts and the PodDisruptionBudget, the landing zone is on a ReadWriteMany volume, S3
    credentials come from a Secret; everything valid against the Kubernetes schemas."""
    from ops.podrole import LABEL

    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(STANDBY_VALUES))
    objs = template(f"--values={values}", raw=True)
    validate(objs)
    dep, svc = objs[("Deployment", "freshet")], objs[("Service", "freshet")]
    spec = dep["spec"]
    assert spec["replicas"] == 2
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    pod = spec["template"]
    (c,) = pod["spec"]["containers"]
    assert "--standby" in c["args"]
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz?standby=ok"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    env = {e["name"]: e for e in c["env"]}
    assert env["FRESHET_POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["FRESHET_POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    for var, key in (("AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY_ID"), ("AWS_SECRET_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY")):
        assert env[var]["valueFrom"]["secretKeyRef"] == {"name": "freshet-s3", "key": key}
    # the Service sends traffic to the leader only; the Deployment's selector does not pin a role
    assert svc["spec"]["selector"] == {**spec["selector"]["matchLabels"], LABEL: "leader"}
    assert LABEL not in pod["metadata"]["labels"]
    # the pods may label themselves: ServiceAccount → RoleBinding → Role(get, patch pods)
    sa = pod["spec"]["serviceAccountName"]
    assert objs[("ServiceAccount", sa)]["metadata"]["annotations"] == STANDBY_VALUES["serviceAccount"]["annotations"]
    binding = objs[("RoleBinding", "freshet-pod-role")]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa, "namespace": "freshet"}]
    (rule,) = objs[("Role", binding["roleRef"]["name"])]["rules"]
    assert rule["resources"] == ["pods"] and set(rule["verbs"]) == {"get", "patch"}
    pdb = objs[("PodDisruptionBudget", "freshet")]["spec"]
    assert pdb["maxUnavailable"] == 1 and pdb["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert objs[("PersistentVolumeClaim", "freshet-data")]["spec"]["accessModes"] == ["ReadWriteMany"]
    cfg = daemon_config(objs)
    assert cfg.warehouse.root == "s3a://lake/warehouse" and cfg.warehouse.s3.credentials == "env"
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert cfg.warehouse.landing.startswith(mounts["data"])
    lint = helm("lint", str(CHART), "--strict", "--kube-version", f"{KUBE}.0", f"--values={values}")
    assert lint.returncode == 0 and "[WARNING]" not in lint.stdout, lint.stdout + lint.stderr
    # one replica stays as it was: Recreate, no role, no RBAC, no budget
    assert not {k for k in template() if k[0] in ("Role", "RoleBinding", "ServiceAccount", "PodDisruptionBudget")}
