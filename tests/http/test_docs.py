"""The documentation as tests (issue 39): every example of README.md and docs/*.md that talks to
a daemon runs against a real one (doc_examples.py: a ```sh block as one script, a ```python block
as one program); the README stays short and its links lead somewhere; and the generated pages
(docs/performance.md, docs/kernels.md) are what scripts/perf_doc.py makes of bench/results now."""

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

from conftest import BACKEND, ROOT, Daemon
from test_perf_analyzer import shm_names_lock
import doc_examples

DOCS = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
EXAMPLES = [e for p in DOCS if p.exists() for e in doc_examples.examples(p)]
CLIENT_DIR = ROOT / "clients" / "python"


@pytest.fixture(scope="module")
def docs_daemon(tmp_path_factory):
    sock_dir = tempfile.mkdtemp(prefix="crunchd-d-", dir="/tmp")  # sun_path: 107 bytes at most
    # async results the examples leave unfetched expire at once, so the drain at the end is short
    d = Daemon(["--unix-socket", os.path.join(sock_dir, "crunchd.sock"), "--result-ttl-s", "1", "--drain-timeout-s", "10"],
               name="docs",
               workdir=tmp_path_factory.mktemp("docs-daemon"))
    d.start()
    yield d
    d.stop()
    shutil.rmtree(sock_dir, ignore_errors=True)


def needs(body):
    """Why a block cannot run here, or None."""
    text = "\n".join(body)
    if re.search(r"^\s*(sudo\s+)?(\S*/)?crunchd\s", text, re.M):
        return "starts a daemon of its own, with its own flags (its tests/http file runs that)"
    if "cuda_shared_memory" in text and (BACKEND != "cuda" or importlib.util.find_spec("cuda") is None):
        return "CUDA shared memory needs the cuda backend and cuda-python (test_cuda_shm.py covers it)"
    if "tritonclient" in text and importlib.util.find_spec("tritonclient") is None:
        return "tritonclient is not installed"
    if ".tools/perf_analyzer" in text and not os.access(ROOT / ".tools" / "perf_analyzer" / "perf_analyzer", os.X_OK):
        return "perf_analyzer is not fetched (make deps)"
    return None


@pytest.mark.parametrize("where,lang,body", EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_doc_example(docs_daemon, where, lang, body):
    reason = needs(body)
    if reason:
        pytest.skip(reason)
    d = docs_daemon
    env = dict(os.environ, PORT=str(d.port), PYTHONPATH=str(CLIENT_DIR))
    if lang == "sh":
        script = doc_examples.sh_script(body, d.port, d.unix_path)
        with shm_names_lock(script):  # perf_analyzer's shared-memory objects have fixed names
            p = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=180, env=env)
    else:
        code = doc_examples.localize("\n".join(body), d.port, d.unix_path)
        p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=180, env=env)
        script = code
    assert p.returncode == 0, f"{where}\n{script}\nexit {p.returncode}\nstdout: {p.stdout[-800:]}\nstderr: {p.stderr[-800:]}"


def test_the_examples_are_found():
    names = {w.split(":")[0] for w, _, _ in EXAMPLES}
    assert {"README.md", "api.md", "kserve.md", "clients.md"} <= names, names
    readme = [e for e in EXAMPLES if e[0].startswith("README.md")]
    assert sum(lang == "python" for _, lang, _ in readme) == 2 and len(readme) >= 7, [w for w, _, _ in readme]


def test_the_extractor(tmp_path):
    md = tmp_path / "x.md"
    md.write_text("text\n```sh\nX=$(curl localhost:8080/v1/jobs -d '{}' | wc -c)\nmake run\ncurl -X POST \\\n"
                  "  localhost:8080/v1/gemm -d '{}'   # 422\n```\n```json\ncurl localhost:8080/nope\n```\n"
                  "```python\nprint(1)\n```\n")
    found = doc_examples.examples(md)
    assert [(w, lang) for w, lang, _ in found] == [("x.md:2", "sh")], found
    script = doc_examples.sh_script(found[0][2], 1234)
    assert script.splitlines()[1:] == [
        "X=$(curl -sS -f --max-time 60 127.0.0.1:1234/v1/jobs -d '{}' | wc -c)",
        "test \"$(curl -sS --max-time 60 -o /dev/null -w '%{http_code}' -X POST 127.0.0.1:1234/v1/gemm -d '{}')\" = 422"]


def test_readme_is_a_newcomers_read():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    for link in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if not link.startswith("http"):
            assert (ROOT / link).exists(), link
    for doc in ("api.md", "kserve.md", "performance.md", "kernels.md", "operations.md", "deploy.md", "clients.md",
                "architecture.md"):
        assert f"docs/{doc}" in text, doc


def test_docs_link_to_files_that_exist():
    for p in DOCS:
        for link in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", p.read_text()):
            if not link.startswith("http"):
                assert (p.parent / link).resolve().exists(), f"{p.name}: {link}"


def test_generated_docs_are_up_to_date():
    """docs/performance.md and docs/kernels.md are scripts/perf_doc.py's output for bench/results
    and docs/src/ as committed: a new CSV or an edit there needs `make docs`."""
    git = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=ROOT, capture_output=True, text=True)
    if git.returncode != 0 or git.stdout.strip() != "false":
        pytest.skip("not a full git checkout: the tables name each CSV's commit")
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "perf_doc.py"), "--check"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
