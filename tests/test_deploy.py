"""Deployment files: systemd unit, Kubernetes manifests, Prometheus rules, Grafana dashboard.

Each check runs the real tool (systemd-analyze, promtool, kubernetes-validate's schemas); a missing
tool fails the test with the package to install rather than skipping it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ops.autotune import AutoTuner
from ops.lineage import LineageEmitter
from ops.metrics import register_metrics
from tests.helpers_ops import make_stats, make_table
from warehouse.config import parse_config

ROOT = Path(__file__).resolve().parents[1]
OPS = ROOT / "ops"


def tool(name: str, package: str) -> str:
    path = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None)
    if path is None:
        pytest.fail(f"{name} not found: install Debian's {package!r} package (apt-get install {package})")
    return path


# ---------------------------------------------------------------- systemd
def _verify_unit(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "freshet"
    unit = tmp_path / "freshet.service"
    # verify checks that ExecStart exists: point it at this checkout's console script
    unit.write_text(text.replace("/opt/freshet/.venv/bin/freshet", str(exe)))
    return subprocess.run([tool("systemd-analyze", "systemd"), "verify", str(unit)],
                          capture_output=True, text=True, timeout=60)


def test_systemd_unit_verifies_cleanly(tmp_path):
    text = (OPS / "systemd" / "freshet.service").read_text()
    r = _verify_unit(tmp_path, text)
    assert r.returncode == 0 and "freshet.service" not in r.stderr, r.stderr
    keys = dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))
    assert keys["Type"] == "notify" and keys["Restart"] == "on-failure" and keys["StateDirectory"] == "freshet"
    assert keys["KillMode"] == "mixed"  # SIGTERM to freshet only; Spark's JVM is its child
    assert int(keys["WatchdogSec"].rstrip("s")) > 0
    assert "--grace" in keys["ExecStart"]
    grace = int(re.search(r"--grace (\d+)", keys["ExecStart"]).group(1))
    assert int(keys["TimeoutStopSec"].rstrip("s")) > grace
    for sandbox in ("NoNewPrivileges", "ProtectSystem", "ProtectHome", "PrivateTmp"):
        assert sandbox in keys


def test_systemd_verify_catches_mistakes(tmp_path):
    """The check above can fail: a typo'd key and a bad Restart= value are reported."""
    text = (OPS / "systemd" / "freshet.service").read_text()
    bad = text.replace("Restart=on-failure", "Restart=sometimes").replace("ProtectHome=", "ProtectHme=")
    r = _verify_unit(tmp_path, bad)
    assert "sometimes" in r.stderr and "ProtectHme" in r.stderr


# ---------------------------------------------------------------- Kubernetes
# kubernetes-validate ships schemas for built-in kinds only. The ServiceMonitor is a
# prometheus-operator CRD, so it is checked against this subset of its published CRD schema
# (monitoring.coreos.com/v1 ServiceMonitor: the fields Freshet uses, unknown fields rejected).
SERVICEMONITOR_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": {"type": "object", "required": ["name"]},
        "spec": {
            "type": "object", "required": ["selector", "endpoints"], "additionalProperties": False,
            "properties": {
                "selector": {"type": "object", "properties": {
                    "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}}}},
                "namespaceSelector": {"type": "object"},
                "jobLabel": {"type": "string"},
                "endpoints": {"type": "array", "minItems": 1, "items": {
                    "type": "object", "additionalProperties": False,
                    "properties": {
                        "port": {"type": "string"}, "path": {"type": "string"},
                        "scheme": {"enum": ["http", "https"]},
                        "interval": {"type": "string", "pattern": "^(0|(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?)$"},
                        "scrapeTimeout": {"type": "string", "pattern": "^(0|(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?)$"},
                        "bearerTokenSecret": {"type": "object"},
                    }}},
            }},
    },
}


def render_kustomization(directory: Path, *, python: bool = False) -> list[dict]:
    """What `kubectl kustomize` produces for this kustomization.

    Uses kubectl when it is installed (unless `python`); otherwise applies the features these
    kustomizations use in Python — resources (files, and directories that are kustomizations),
    strategic-merge patches, namespace, labels — and fails on any feature it does not implement
    rather than ignoring it.
    """
    kubectl = shutil.which("kubectl")
    if kubectl and not python:
        out = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True, text=True,
                             timeout=120, check=True).stdout
        return [d for d in yaml.safe_load_all(out) if d]
    k = yaml.safe_load((directory / "kustomization.yaml").read_text())
    unsupported = set(k) - {"apiVersion", "kind", "namespace", "labels", "resources", "patches"}
    assert not unsupported, f"render_kustomization does not implement {unsupported}"
    docs = []
    for res in k["resources"]:
        path = (directory / res).resolve()
        if path.is_dir():
            docs.extend(render_kustomization(path, python=True))
        else:
            docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    for patch in k.get("patches", []):
        assert set(patch) == {"path"}, f"render_kustomization implements file patches only, not {patch}"
        for p in yaml.safe_load_all((directory / patch["path"]).read_text()):
            (target,) = [d for d in docs if d["kind"] == p["kind"] and d["metadata"]["name"] == p["metadata"]["name"]]
            strategic_merge(target, p)
    extra = {kk: v for entry in k.get("labels", []) for kk, v in entry["pairs"].items()}
    for d in docs:
        d["metadata"].setdefault("labels", {}).update(extra)
        if d["kind"] != "Namespace" and "namespace" in k:
            d["metadata"]["namespace"] = k["namespace"]
    return docs


def strategic_merge(target: dict, patch: dict) -> None:
    """Kubernetes' strategic merge for what the patches here use: maps merge key by key, lists of
    named maps (containers, volumes, env) merge by `name`, other lists and scalars are replaced."""
    for key, value in patch.items():
        old = target.get(key)
        if isinstance(value, dict) and isinstance(old, dict):
            strategic_merge(old, value)
        elif (isinstance(value, list) and isinstance(old, list) and value and old
              and all(isinstance(v, dict) and "name" in v for v in value + old)):
            by_name = {v["name"]: v for v in old}
            for v in value:
                if v["name"] in by_name:
                    strategic_merge(by_name[v["name"]], v)
                else:
                    old.append(v)
        else:
            target[key] = value


@pytest.fixture(scope="module")
def k8s() -> dict[str, dict]:
    docs = render_kustomization(OPS / "k8s")
    return {d["kind"]: d for d in docs}


def test_k8s_manifests_validate_against_schemas(k8s):
    assert set(k8s) == {"Namespace", "ConfigMap", "PersistentVolumeClaim", "Deployment", "Service",
                        "ServiceMonitor"}
    for kind, doc in k8s.items():
        if kind == "ServiceMonitor":
            jsonschema.validate(doc, SERVICEMONITOR_SCHEMA)
            with pytest.raises(kubernetes_validate.SchemaNotFoundError):
                kubernetes_validate.validate(doc, "1.30", strict=True)  # honest: no CRD schema there
        else:
            kubernetes_validate.validate(doc, "1.30", strict=True)


def test_k8s_validation_can_fail(k8s):
    bad = json.loads(json.dumps(k8s["Deployment"]))
    bad["spec"]["replicas"] = "one"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, "1.30", strict=True)
    sm = json.loads(json.dumps(k8s["ServiceMonitor"]))
    sm["spec"]["endpoints"][0]["intervall"] = "30s"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(sm, SERVICEMONITOR_SCHEMA)


def test_k8s_objects_fit_together(k8s):
    dep, svc, sm, cm = k8s["Deployment"], k8s["Service"], k8s["ServiceMonitor"], k8s["ConfigMap"]
    spec = dep["spec"]
    assert spec["replicas"] == 1 and spec["strategy"]["type"] == "Recreate"
    pod_labels = spec["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= pod_labels.items()
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert sm["spec"]["endpoints"][0]["port"] in {p["name"] for p in svc["spec"]["ports"]}
    (c,) = spec["template"]["spec"]["containers"]
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["resources"]["requests"]["cpu"] and c["resources"]["requests"]["memory"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert c["livenessProbe"]["httpGet"]["port"] in ports
    volumes = {v["name"]: v for v in spec["template"]["spec"]["volumes"]}
    assert volumes["config"]["configMap"]["name"] == cm["metadata"]["name"]
    assert volumes["data"]["persistentVolumeClaim"]["claimName"] == k8s["PersistentVolumeClaim"]["metadata"]["name"]
    # the shipped warehouse config is valid, and the daemon listens where the probes look
    cfg = parse_config(yaml.safe_load(cm["data"]["freshet.yaml"]), source="configmap freshet.yaml")
    assert int(cfg.listen.rsplit(":", 1)[1]) == ports["http"]
    grace = int(next(a for a in c["args"] if a.startswith("--grace=")).split("=")[1])
    assert spec["template"]["spec"]["terminationGracePeriodSeconds"] > grace


# ---------------------------------------------------------------- Kubernetes with Spark Connect
@pytest.fixture(scope="module")
def k8s_connect() -> dict[tuple[str, str], dict]:
    return {(d["kind"], d["metadata"]["name"]): d for d in render_kustomization(OPS / "k8s-connect")}


def test_k8s_connect_manifests_validate_against_schemas(k8s_connect):
    assert set(k8s_connect) == {("Namespace", "freshet"), ("ConfigMap", "freshet-config"),
                                ("PersistentVolumeClaim", "freshet-data"), ("Deployment", "freshet"),
                                ("Service", "freshet"), ("ServiceMonitor", "freshet"),
                                ("Deployment", "spark-connect"), ("Service", "spark-connect"),
                                ("NetworkPolicy", "spark-connect")}
    for (kind, _), doc in k8s_connect.items():
        if kind == "ServiceMonitor":
            jsonschema.validate(doc, SERVICEMONITOR_SCHEMA)
        else:
            kubernetes_validate.validate(doc, "1.30", strict=True)


def test_k8s_connect_daemon_reaches_the_server_and_both_share_the_data(k8s_connect):
    cm = k8s_connect[("ConfigMap", "freshet-config")]
    cfg = parse_config(yaml.safe_load(cm["data"]["freshet.yaml"]), source="k8s-connect freshet.yaml")
    assert cfg.spark.remote and cfg.spark.master is None
    host, port = cfg.spark.remote.removeprefix("sc://").split(":")
    svc = k8s_connect[("Service", host)]  # the remote names the Connect server's Service
    (sport,) = svc["spec"]["ports"]
    assert sport["port"] == int(port)
    server = k8s_connect[("Deployment", "spark-connect")]
    pod = server["spec"]["template"]
    assert svc["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    (c,) = pod["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports[sport["targetPort"]] == int(port)
    assert f"--port={port}" in c["args"] and "--host=0.0.0.0" in c["args"]
    assert c["command"][-1].endswith("scripts/connect_server.py")
    # the same image: the same Spark and Delta as the daemon's client
    daemon = k8s_connect[("Deployment", "freshet")]["spec"]["template"]
    (dc,) = daemon["spec"]["containers"]
    assert c["image"] == dc["image"]
    # both pods mount one ReadWriteMany volume at the same path: the server reads the landing
    # zone's files and writes the tables at the paths the daemon's config names
    assert k8s_connect[("PersistentVolumeClaim", "freshet-data")]["spec"]["accessModes"] == ["ReadWriteMany"]

    def data_mount(p: dict, container: dict) -> str:
        (vol,) = [v for v in p["spec"]["volumes"] if v.get("persistentVolumeClaim", {}).get("claimName") == "freshet-data"]
        (m,) = [m for m in container["volumeMounts"] if m["name"] == vol["name"]]
        return m["mountPath"]

    mount = data_mount(pod, c)
    assert mount == data_mount(daemon, dc)
    assert cfg.warehouse.root.startswith(mount) and cfg.warehouse.landing.startswith(mount)
    # the daemon's own probes and settings are unchanged; its pod is smaller without a driver
    assert dc["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert dc["resources"]["requests"]["cpu"] == "500m"
    # only the daemon may reach the server
    np = k8s_connect[("NetworkPolicy", "spark-connect")]["spec"]
    assert np["podSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    (rule,) = np["ingress"]
    (peer,) = rule["from"]
    assert peer["podSelector"]["matchLabels"].items() <= daemon["metadata"]["labels"].items()


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed: nothing to compare with")
def test_python_kustomize_renders_what_kubectl_renders():
    for d in (OPS / "k8s", OPS / "k8s-connect"):
        def key(doc: dict) -> tuple[str, str]:
            return doc["kind"], doc["metadata"]["name"]

        real = {key(x): x for x in render_kustomization(d)}
        ours = {key(x): x for x in render_kustomization(d, python=True)}
        assert ours == real, d


# ---------------------------------------------------------------- Prometheus rules
def test_promtool_check_and_unit_test_rules():
    promtool = tool("promtool", "prometheus")
    r = subprocess.run([promtool, "check", "rules", str(OPS / "prometheus" / "rules.yml")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr
    r = subprocess.run([promtool, "test", "rules", "rules_test.yml"], cwd=OPS / "prometheus",
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr
    r = subprocess.run([promtool, "check", "config", str(OPS / "prometheus" / "prometheus.yml")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_promtool_unit_tests_can_fail(tmp_path):
    promtool = tool("promtool", "prometheus")
    shutil.copy(OPS / "prometheus" / "rules.yml", tmp_path / "rules.yml")
    text = (OPS / "prometheus" / "rules_test.yml").read_text().replace("eval_time: 10m", "eval_time: 12m", 1)
    (tmp_path / "rules_test.yml").write_text(text)
    r = subprocess.run([promtool, "test", "rules", "rules_test.yml"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode != 0 and "FreshetTableStale" in r.stdout + r.stderr


# ---------------------------------------------------------------- dashboard ↔ metrics
#: Metrics a panel charts that a freshly started daemon has no series of yet, with the reason: the
#: real-Prometheus test (tests/test_daemon.py) does not wait for data from these.
PENDING_METRICS = {"freshet_autotune_predicted_staleness": "no series before the tuner's first evaluation "
                                                           "(10 minutes and 50 jobs into a run)",
                   "freshet_landing_unknown_partitions": "a series only while a landing directory that names no "
                                                         "stream holds partitions",
                   "freshet_table_late_rows_unfolded": "a series only for stateful tables"}

#: Exported families no dashboard panel charts, with the reason (empty: every metric has a panel).
NOT_CHARTED: dict[str, str] = {}


def exported_families() -> dict[str, set[str]]:
    """Every metric family the daemon exports (metrics and the API's), with its sample names, from
    registries populated with a base table under maintenance, a derived table and the example
    config's declared series."""
    from ops.api import create_app
    from warehouse.config import load_config
    from warehouse.upkeep import UpkeepStats

    upkeep = UpkeepStats(commits_since_optimize=2, optimize_every=5, vacuum_every=86400.0, last_optimize=90.0,
                         last_vacuum=80.0, next_vacuum=86480.0, files=3, bytes_reclaimed=1000,
                         jobs_ok=(("optimize", 1), ("vacuum", 1)), jobs_failed=(("optimize", 1),))
    tables = [make_table("t", freshness=50.0, safe_freshness=40.0, arrived=60.0, target_staleness=60.0,
                         observed_time=10.0, time_within_target=5.0, upkeep=upkeep),
              make_table("d", kind="derived", freshness=30.0, safe_freshness=30.0, windows_old_sql=2,
                         recompute_pending=600.0, windows_recomputed=4),
              make_table("s", kind="stateful", freshness=30.0, safe_freshness=30.0, late_rows_unfolded=3)]
    reg = CollectorRegistry()
    m = register_metrics(reg, lambda: make_stats(100.0, tables), lambda: 100.0)
    m.declare(load_config(ROOT / "examples" / "netmon.yaml"))
    m.job_done("t", "base", 1.0, 10, late_rows=2)
    m.decision_seconds.observe(0.001)
    m.unknown_directories({"router-cpu": 1})  # a landing directory of no stream
    create_app(None, reg)  # freshet_api_requests_rejected_total
    LineageEmitter(load_config(ROOT / "examples" / "netmon.yaml"), reg)  # freshet_lineage_events_*_total
    tuner = AutoTuner(load_config(ROOT / "examples" / "netmon.yaml"), None, reg, lambda new: None, now=0.0)
    tuner.predicted.labels(setting="max-benefit, global, chop none, 4 tracks").set(1.0)  # after an evaluation
    # prometheus_client's `_created` timestamps of counters and histograms are not metrics of ours
    return {f.name: {s.name for s in f.samples if not s.name.endswith("_created")}
            for f in text_string_to_metric_families(generate_latest(reg).decode()) if not f.name.endswith("_created")}


def exported_names() -> set[str]:
    """Every sample name the daemon exports."""
    return {n for names in exported_families().values() for n in names}


METRIC = re.compile(r"\b(freshet_[a-z0-9_]+)")


def dashboard() -> dict:
    return json.loads((OPS / "grafana" / "freshet-dashboard.json").read_text())


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title, PromQL) of every panel's queries, with the dashboard's variables filled in as
    Grafana would for "All" tables over a 5-minute range."""
    return [(p["title"], t["expr"].replace("$table", ".*").replace("$__range", "5m"))
            for p in dashboard()["panels"] for t in p.get("targets", [])]


def all_rules() -> list[dict]:
    return [r for g in yaml.safe_load((OPS / "prometheus" / "rules.yml").read_text())["groups"] for r in g["rules"]]


def test_dashboard_and_rules_use_only_exported_metrics():
    names = exported_names()
    dash = dashboard()
    panels = [p for p in dash["panels"] if p["type"] != "row"]
    exprs = [e for _, e in dashboard_queries()]
    assert len(panels) >= 30 and dash["uid"] and all(p["targets"] for p in panels)
    titles = " ".join(p["title"].lower() for p in panels)
    for want in ("staleness", "weighted", "pending", "busy", "duration", "quarantine", "α", "β",
                 "late rows", "recomputed", "old sql", "maintenance", "operator", "spark", "lineage"):
        assert want in titles, want
    exprs += [r["expr"] for r in all_rules()]
    used = {m for e in exprs for m in METRIC.findall(e)}
    assert used, "no metric referenced"
    missing = sorted(used - names - set(PENDING_METRICS))
    assert not missing, f"referenced but not exported: {missing}"
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))


def test_dashboard_charts_every_exported_metric():
    """A panel for every metric the daemon exports (the months-of-operation ones, Spark,
    intake, the API's rejections included), or a reason in NOT_CHARTED."""
    families = exported_families()
    assert {"freshet_late_rows", "freshet_windows_recomputed", "freshet_table_windows_old_sql",
            "freshet_table_late_rows_unfolded",
            "freshet_maintenance_jobs", "freshet_operator_actions", "freshet_spark_connected",
            "freshet_spark_connection_lost", "freshet_api_requests_rejected"} <= set(families)
    charted = {m for _, e in dashboard_queries() for m in METRIC.findall(e)}
    uncharted = sorted(f for f, samples in families.items() if not samples & charted and f not in NOT_CHARTED)
    assert not uncharted, f"no panel for: {uncharted}"
    assert set(PENDING_METRICS) <= charted


def test_every_rule_has_a_promtool_test():
    """Every alert has a promtool case where it fires (exp_alerts not empty) and one where it is
    checked not to; every recording rule has an expression test."""
    tests = yaml.safe_load((OPS / "prometheus" / "rules_test.yml").read_text())["tests"]
    cases = [c for t in tests for c in t.get("alert_rule_test", [])]
    fires = {c["alertname"] for c in cases if c["exp_alerts"]}
    quiet = {c["alertname"] for c in cases if not c["exp_alerts"]}
    exprs = {c["expr"].split("{")[0] for t in tests for c in t.get("promql_expr_test", [])}
    alerts = {r["alert"] for r in all_rules() if "alert" in r}
    records = {r["record"] for r in all_rules() if "record" in r}
    assert {"FreshetRecomputeStalled", "FreshetWindowsOnOldSql", "FreshetMaintenanceFailing",
            "FreshetTableSuspendedTooLong", "FreshetLineageEventsDropped"} <= alerts
    assert alerts - fires == set(), "alerts never seen firing"
    assert alerts - quiet == set(), "alerts never checked quiet"
    assert records - exprs == set(), "recording rules without a test"


def test_backlog_alert_reads_the_truthful_backlog_gauge(tmp_path):
    """FreshetBacklogGrowing watches freshet_table_backlog_seconds (arrived − loaded, a running job's
    data included); rules_test.yml holds the case of a job running, 141 partitions (2h11m)
    waiting. With the old expression over freshet_table_pending_delta_seconds (0 while a job ran)
    that case does not fire."""
    rules = yaml.safe_load((OPS / "prometheus" / "rules.yml").read_text())
    (alert,) = [r for g in rules["groups"] for r in g["rules"] if r.get("alert") == "FreshetBacklogGrowing"]
    assert "freshet_table_backlog_seconds" in alert["expr"] and "pending_delta" not in alert["expr"]
    tests = (OPS / "prometheus" / "rules_test.yml").read_text()
    assert "2h 11m 0s of event time in 141" in " ".join(tests.split())
    promtool = tool("promtool", "prometheus")
    old = (OPS / "prometheus" / "rules.yml").read_text().replace(
        "freshet_table_backlog_seconds", "freshet_table_pending_delta_seconds")
    (tmp_path / "rules.yml").write_text(old)
    (tmp_path / "rules_test.yml").write_text(tests)
    r = subprocess.run([promtool, "test", "rules", "rules_test.yml"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode != 0 and "FreshetBacklogGrowing" in r.stdout + r.stderr


# ---------------------------------------------------------------- a fresh machine
def _stub(d: Path, name: str, body: str) -> None:
    p = d / name
    p.write_text("#!/bin/sh\n" + body + "\n")
    p.chmod(0o755)


def _deps(tmp_path: Path, *, missing: tuple[str, ...] = (), java: str = "17.0.15", uid: int = 1000,
          sudo_ok: bool = False, venv: bool = True,
          args: tuple[str, ...] = ()) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run scripts/system_deps.sh with PATH = stubs only: the machine's real tools are invisible.

    helm is in its cache (FRESHET_HELM_DIR) unless "helm" is `missing`; then a stub `go` builds a
    stub helm, unless "go" is missing too (the few tools the build step uses are the real ones)."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    log = tmp_path / "calls"
    rec = f'echo "${{0##*/}} $*" >> {log}'
    for name in ("promtool", "prometheus", "systemd-analyze", "chromium", "chromedriver"):
        if name not in missing:
            _stub(bin_, name, "exit 0")
    if "java" not in missing:
        _stub(bin_, "java", f"echo 'openjdk version \"{java}\" 2025-04-15' >&2")
    _stub(bin_, "python3", "exit 0" if venv else "exit 1")
    _stub(bin_, "id", f"echo {uid}")
    _stub(bin_, "apt-get", rec)
    _stub(bin_, "sudo", rec + '\n[ "$1" = -n ] && exit ' + ("0" if sudo_ok else "1") + '\nexec "$@"')
    env = {"PATH": str(bin_), "FRESHET_HELM_DIR": str(tmp_path / "helm")}
    helm = Path(subprocess.run(["/bin/bash", str(ROOT / "scripts" / "fetch_helm.sh"), "--path"], env=env,
                               capture_output=True, text=True, check=True).stdout.strip())
    if "helm" not in missing:
        helm.parent.mkdir(parents=True)
        _stub(helm.parent, "helm", "exit 0")
    else:
        for tool_ in ("mkdir", "mktemp", "mv", "rm", "chmod"):
            (bin_ / tool_).symlink_to(shutil.which(tool_))
        if "go" not in missing:
            _stub(bin_, "go", rec + f'\necho "GOFLAGS=$GOFLAGS" >> {log}'
                  + '\nprintf \'#!/bin/sh\\necho v3\\n\' > "$GOBIN/helm"; chmod +x "$GOBIN/helm"')
    r = subprocess.run(["/bin/bash", str(ROOT / "scripts" / "system_deps.sh"), *args], env=env,
                       capture_output=True, text=True, timeout=60)
    return r, log.read_text().splitlines() if log.exists() else []


def test_system_deps_change_nothing_when_everything_is_there(tmp_path):
    r, calls = _deps(tmp_path)
    assert r.returncode == 0 and calls == [] and r.stderr == ""


def test_system_deps_without_root_or_sudo_stop_with_the_apt_get_command(tmp_path):
    r, calls = _deps(tmp_path, missing=("promtool",), java="11.0.2")
    assert r.returncode == 1 and calls == ["sudo -n true"] and r.stdout == ""  # asked, installed nothing
    (line,) = r.stderr.splitlines()
    assert "sudo apt-get install -y --no-install-recommends prometheus openjdk-17-jre-headless" in line


def test_system_deps_install_with_passwordless_sudo(tmp_path):
    r, calls = _deps(tmp_path, missing=("systemd-analyze", "java"), sudo_ok=True, venv=False)
    assert r.returncode == 0, r.stderr
    assert calls == ["sudo -n true", "sudo apt-get update -qq",
                     "apt-get update -qq",
                     "sudo apt-get install -y -qq --no-install-recommends systemd openjdk-17-jre-headless python3-venv",
                     "apt-get install -y -qq --no-install-recommends systemd openjdk-17-jre-headless python3-venv"]


def test_system_deps_install_as_root(tmp_path):
    r, calls = _deps(tmp_path, missing=("prometheus",), java="1.8.0_292", uid=0)
    assert r.returncode == 0, r.stderr
    assert calls == ["apt-get update -qq",
                     "apt-get install -y -qq --no-install-recommends prometheus openjdk-17-jre-headless"]


def test_system_deps_build_helm_from_the_go_module_proxy_once(tmp_path):
    r, calls = _deps(tmp_path, missing=("helm",))
    assert r.returncode == 0, r.stderr
    (go, flags) = calls
    assert go.startswith("go install -ldflags") and go.endswith(" helm.sh/helm/v3/cmd/helm@v3.22.0")
    assert "internal/version.version=v3.22.0" in go and flags == "GOFLAGS=-mod=mod"
    assert "building helm v3.22.0 from the Go module proxy" in r.stderr
    (built,) = (tmp_path / "helm").glob("v3.22.0/helm")
    assert [p.name for p in built.parent.iterdir()] == ["helm"]  # no build directory left behind
    again = subprocess.run(["/bin/bash", str(ROOT / "scripts" / "system_deps.sh")], capture_output=True, text=True,
                           env={"PATH": str(tmp_path / "bin"), "FRESHET_HELM_DIR": str(tmp_path / "helm")}, timeout=60)
    assert again.returncode == 0 and again.stderr == "" and len((tmp_path / "calls").read_text().splitlines()) == 2


def test_system_deps_no_helm_installs_the_packages_and_builds_nothing(tmp_path):
    r, calls = _deps(tmp_path, missing=("helm", "prometheus"), uid=0, args=("--no-helm",))
    assert r.returncode == 0, r.stderr
    assert calls == ["apt-get update -qq", "apt-get install -y -qq --no-install-recommends prometheus"]
    assert not (tmp_path / "helm").exists() and "helm" not in r.stderr
    bad = subprocess.run(["/bin/bash", str(ROOT / "scripts" / "system_deps.sh"), "--no-hlem"], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and "usage: scripts/system_deps.sh [--no-helm]" in bad.stderr


def test_system_deps_without_go_say_what_helm_needs(tmp_path):
    r, calls = _deps(tmp_path, missing=("helm", "go"))
    assert r.returncode == 1 and calls == []
    (line,) = r.stderr.splitlines()
    assert "helm v3.22.0" in line and "Go >= 1.26" in line


def test_make_test_installs_system_deps_and_ci_only_calls_it():
    r = subprocess.run(["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    out = r.stdout
    assert "scripts/system_deps.sh" in out and out.index("system_deps.sh") < out.index("pytest")
    assert out.index("fetch_helm.sh") < out.index("pytest")  # helm is built, beside the venv
    ci = [ln for ln in (ROOT / ".ci" / "run").read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    assert ci[-1] == "exec make test" and not any("apt-get" in ln for ln in ci)
