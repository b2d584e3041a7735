"""Prometheus and Grafana: promtool on the compose stack's config and on a real /metrics scrape;
the dashboard's and the adapter rule's queries parse (promtool check rules) and name only
metrics and labels that a real scrape has."""

import json
import re

import pytest
import yaml

from conftest import ROOT, load_yaml, run, tool

COMPOSE = ROOT / "deploy" / "compose"
DASHBOARD = COMPOSE / "grafana" / "dashboards" / "crunchd.json"
GRAFANA_VARS = {"$__rate_interval": "1m", "$__interval": "15s", "$instance": ".*", "$op": ".*"}
PROMQL_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset",
                   "and", "or", "unless", "le"}


@pytest.fixture(scope="module")
def promtool():
    exe = tool("promtool")
    if not exe:
        pytest.skip("promtool not installed (scripts/deps.sh installs Debian's prometheus)")
    return exe


def dashboard_exprs():
    dash = json.loads(DASHBOARD.read_text())
    out = []
    for p in dash["panels"]:
        for t in p.get("targets", []):
            expr = t["expr"]
            for k, v in GRAFANA_VARS.items():
                expr = expr.replace(k, v)
            assert "$" not in expr, f"unknown Grafana variable in {t['expr']!r}"
            out.append((p["title"], expr))
    return out


def adapter_rules():
    cm = load_yaml(ROOT / "deploy" / "k8s" / "prometheus-adapter-rules.yaml")
    return yaml.safe_load(cm["data"]["config.yaml"])["rules"]


def adapter_exprs():
    out = []
    for rule in adapter_rules():
        series = rule["seriesQuery"]
        metric = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)", series).group(1)
        q = (rule["metricsQuery"].replace("<<.Series>>", metric)
             .replace("<<.LabelMatchers>>", 'namespace="default",pod=~"crunchd-.*"')
             .replace("<<.GroupBy>>", "pod"))
        out += [("adapter seriesQuery", series), ("adapter metricsQuery", q)]
    return out


def check_rules(promtool, tmp_path, exprs):
    rules = {"groups": [{"name": "g", "rules": [
        {"record": f"crunchd:check_{i}", "expr": e} for i, (_, e) in enumerate(exprs)]}]}
    f = tmp_path / "rules.yml"
    f.write_text(yaml.safe_dump(rules))
    return run([promtool, "check", "rules", str(f)])


def test_promtool_check_config(promtool):
    r = run([promtool, "check", "config", str(COMPOSE / "prometheus.yml")])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout + r.stderr


def test_promtool_check_metrics_on_a_real_scrape(promtool, scrape):
    r = run([promtool, "check", "metrics"], input=scrape)
    assert r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(), r.stdout + r.stderr


def test_promtool_check_metrics_can_fail(promtool):
    bad = "# TYPE crunchd_bad counter\ncrunchd_bad 1\n"  # a counter without _total, no HELP
    r = run([promtool, "check", "metrics"], input=bad)
    assert r.returncode != 0 or r.stdout.strip() or r.stderr.strip()


def test_queries_parse(promtool, tmp_path):
    exprs = dashboard_exprs() + adapter_exprs()
    r = check_rules(promtool, tmp_path, exprs)
    assert r.returncode == 0, r.stdout + r.stderr


def test_query_check_can_fail(promtool, tmp_path):
    r = check_rules(promtool, tmp_path, [("bad", "sum by (op (rate(crunchd_requests_total[1m]))")])
    assert r.returncode != 0


def metric_refs(expr):
    """[(metric, {label names used in its selector}, {label names in by (...)})]"""
    refs = []
    by = set()
    for m in re.finditer(r"\b(?:by|without)\s*\(([^)]*)\)", expr):
        by |= {x.strip() for x in m.group(1).split(",") if x.strip()}
    for m in re.finditer(r"\b((?:crunchd|process)_[a-zA-Z0-9_]+)\s*(\{([^}]*)\})?", expr):
        labels = set(re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)", m.group(3) or ""))
        refs.append((m.group(1), labels, by))
    return refs


# Labels Prometheus itself attaches at scrape time (or the k8s scrape config does).
TARGET_LABELS = {"instance", "job", "namespace", "pod"}


def test_dashboard_names_only_scraped_metrics_and_labels(scraped_series):
    seen = set()
    for title, expr in dashboard_exprs() + adapter_exprs():
        refs = metric_refs(expr)
        assert refs, f"{title}: no crunchd or process metric in {expr!r}"
        for metric, labels, by in refs:
            seen.add(metric)
            assert metric in scraped_series, f"{title}: {metric} is not in a real scrape"
            have = scraped_series[metric] | TARGET_LABELS
            assert labels <= have, f"{title}: {metric} has no label(s) {labels - have}"
            assert by <= have | {"le"}, f"{title}: {metric} cannot be grouped by {by - have}"
    # The panels the issue asks for are all there.
    for m in ("crunchd_requests_total", "crunchd_jobs_in_queue", "crunchd_job_duration_seconds_bucket",
              "crunchd_flops_total", "crunchd_device_memory_used_bytes"):
        assert m in seen, m


def test_dashboard_panels_and_datasource():
    dash = json.loads(DASHBOARD.read_text())
    text = json.dumps(dash)
    assert "histogram_quantile(0.5," in text and "histogram_quantile(0.99," in text
    assert "/ 1e9" in text
    assert re.search(r'code=~\\"\[45\]\.\.\\"', text)
    ds = load_yaml(COMPOSE / "grafana" / "provisioning" / "datasources" / "prometheus.yml")
    uid = ds["datasources"][0]["uid"]
    assert ds["datasources"][0]["url"] == "http://prometheus:9090"
    uids = {p["datasource"]["uid"] for p in dash["panels"]}
    uids |= {t["datasource"]["uid"] for p in dash["panels"] for t in p["targets"]}
    assert uids == {uid}
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    prov = load_yaml(COMPOSE / "grafana" / "provisioning" / "dashboards" / "crunchd.yml")
    assert prov["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards"


def test_adapter_rule_serves_the_hpa_metric(scraped_series):
    rules = adapter_rules()
    hpa = load_yaml(ROOT / "deploy" / "k8s" / "hpa.yaml")
    names = {m["pods"]["metric"]["name"] for m in hpa["spec"]["metrics"] if m["type"] == "Pods"}
    served = {r["name"]["as"] for r in rules}
    assert names and names <= served, (names, served)
    for r in rules:
        metric = re.match(r"\w+", r["seriesQuery"]).group(0)
        assert metric in scraped_series
        assert set(r["resources"]["overrides"]) == {"namespace", "pod"}
