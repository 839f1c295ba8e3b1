"""The docker compose stack, checked without a Docker engine.

The compose file is validated against the compose-spec JSON schema, then cross-checked
against the code: services it waits for exist and report health, every command it runs is
a real `pmd` command, every variable is documented in `.env.example`.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.paths import ROOT

COMPOSE = ROOT / "compose.yaml"
DOCKERFILE = ROOT / "Dockerfile"
ENV_EXAMPLE = ROOT / ".env.example"
APP_SERVICES = {"web", "worker", "beat", "watcher"}
STATEFUL_SERVICES = {"db", "redis", "ollama"}
# Conventions from outside pmd, not pmd settings.
NOT_PMD_SETTINGS = {
    "DJANGO_SETTINGS_MODULE",
    "NO_COLOR",
    "FORCE_COLOR",
    "XDG_DATA_HOME",
    "HF_ENDPOINT",
    "HF_HUB_OFFLINE",  # the Hugging Face hub client's (local backend downloads)
    "PMD_SUPERVISOR_PID",
}  # set by `pmd up` for its own children, not by users


def _check_jsonschema() -> str:
    found = shutil.which("check-jsonschema") or str(Path(sys.executable).parent / "check-jsonschema")
    assert Path(found).exists(), "check-jsonschema is missing: install the dev extras (`pip install -e '.[dev]'`)"
    return found


def _validate(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [_check_jsonschema(), "--builtin-schema", "vendor.compose-spec", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def _documented() -> set[str]:
    return set(re.findall(r"^([A-Z][A-Z0-9_]*)=", ENV_EXAMPLE.read_text(), re.MULTILINE))


def test_compose_file_is_valid_against_the_compose_spec_schema():
    result = _validate(COMPOSE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_schema_validation_rejects_a_broken_compose_file(tmp_path):
    broken = tmp_path / "compose.yaml"
    broken.write_text(COMPOSE.read_text().replace("\n  web:\n", "\n  web:\n    restart_policy_typo: always\n", 1))
    result = _validate(broken)
    assert result.returncode != 0
    assert "restart_policy_typo" in result.stdout + result.stderr


def test_every_depends_on_target_exists_and_can_satisfy_its_condition(compose):
    services = compose["services"]
    for name, service in services.items():
        for target, rule in (service.get("depends_on") or {}).items():
            assert target in services, f"{name} depends on unknown service {target}"
            condition = rule.get("condition")
            if condition == "service_healthy":
                check = services[target].get("healthcheck") or {}
                assert check.get("test") and not check.get("disable"), (
                    f"{name} waits for {target}'s health, which it never reports"
                )
            if condition == "service_completed_successfully":
                assert services[target].get("restart") == "no", f"{target} is one-shot but restarts"


def test_app_services_share_one_definition_and_wait_for_migrations(compose):
    services = compose["services"]
    assert APP_SERVICES <= set(services)
    images = {services[name].get("image") for name in APP_SERVICES | {"migrate"}}
    assert len(images) == 1, "web, worker, beat, watcher and migrate must run the same image"
    for name in APP_SERVICES:
        service = services[name]
        assert service["depends_on"]["migrate"]["condition"] == "service_completed_successfully", name
        assert service["restart"] == "unless-stopped", name
        assert service["logging"]["options"]["max-size"], name
        assert any(v.endswith(":/notes:ro") for v in service["volumes"]), f"{name} must mount the notes read-only"


def test_stateful_services_have_healthchecks_volumes_and_log_rotation(compose):
    services = compose["services"]
    for name in STATEFUL_SERVICES:
        service = services[name]
        assert service["healthcheck"]["test"], name
        assert service.get("volumes"), f"{name} keeps data: it needs a volume"
        assert service["logging"]["options"]["max-file"], name
    assert "pg_isready" in " ".join(services["db"]["healthcheck"]["test"])
    assert services["ollama"]["healthcheck"]["test"][-2:] == ["ollama", "list"]
    assert "pgvector" in services["db"]["image"]


def test_ollama_pull_fetches_the_configured_models(compose):
    pull = compose["services"]["ollama-pull"]
    script = " ".join(pull["command"])
    for variable in ("PMD_EMBED_MODEL", "PMD_GENERATE_MODEL", "PMD_RERANK_MODEL"):
        assert f"$${variable}" in script
        assert variable in pull["environment"]
    assert pull["depends_on"]["ollama"]["condition"] == "service_healthy"


def _variables_read_by_the_code() -> set[str]:
    pattern = re.compile(
        r"""(?:env\.get_[a-z]+\(\s*|\bread\(\s*|os\.environ(?:\.get|\.setdefault)?[\[(]\s*|os\.getenv\(\s*)"""
        r"""["']([A-Z][A-Z0-9_]+)["']"""
    )
    names: set[str] = set()
    for folder in ("pmd_site", "indexing", "search"):
        for path in (ROOT / folder).rglob("*.py"):
            names.update(pattern.findall(path.read_text(errors="replace")))
    return names - NOT_PMD_SETTINGS


def test_every_variable_the_code_reads_is_documented_in_env_example():
    read = _variables_read_by_the_code()
    assert {"DATABASE_URL", "PMD_WATCH_POLLING", "PMD_RECONCILE_INTERVAL"} <= read  # the scan itself works
    missing = sorted(read - _documented())
    assert not missing, f"document these in .env.example: {missing}"


def test_every_variable_compose_interpolates_is_documented_in_env_example():
    text = COMPOSE.read_text().replace("$$", "")  # $$ escapes a literal $ for the container's shell
    used = set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", text))
    missing = sorted(used - _documented())
    assert not missing, f"document these in .env.example: {missing}"


def _pmd_commands(compose) -> list[list[str]]:
    """Every argument list handed to `pmd`: Dockerfile CMD/HEALTHCHECK, compose commands and healthchecks."""
    import json

    dockerfile = DOCKERFILE.read_text()
    commands = [json.loads(re.search(r"^CMD (\[.*\])$", dockerfile, re.MULTILINE).group(1))]
    health = re.search(r"CMD (\[\"pmd\".*\])", dockerfile).group(1)
    commands.append(json.loads(health)[1:])
    for name, service in compose["services"].items():
        if service.get("image") == compose["services"]["web"]["image"] and "command" in service:
            commands.append(service["command"])
        test = (service.get("healthcheck") or {}).get("test") or []
        if test[:2] == ["CMD", "pmd"]:
            commands.append(test[2:])
    return commands


def test_every_pmd_command_in_the_dockerfile_and_compose_exists(compose):
    from pmd_site.cli import build_parser

    commands = _pmd_commands(compose)
    assert len(commands) >= 7
    parser = build_parser()
    for argv in commands:
        args = parser.parse_args(argv)  # SystemExit (a test error) on an unknown command or option
        assert callable(getattr(args, "func", None)), argv
        help_run = subprocess.run(
            [sys.executable, "-m", "pmd_site.cli", argv[0], "--help"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
        )
        assert help_run.returncode == 0, help_run.stderr


def test_dockerfile_is_slim_non_root_installs_the_package_and_is_healthchecked():
    text = DOCKERFILE.read_text()
    assert re.search(r"^ARG PYTHON_VERSION=3\.11$", text, re.MULTILINE)
    assert "FROM python:${PYTHON_VERSION}-slim" in text
    users = re.findall(r"^USER (\S+)$", text, re.MULTILINE)
    assert users and users[-1] not in {"root", "0"}
    # pmd is installed as a package (not editable: its pages come with it), from the build context
    # bound for that step alone, with the formats extra and without the embedded servers; pip's
    # downloads stay in a build cache between builds.
    install = re.search(r"^RUN (--mount=\S+\s+\\\n\s*)+cp -r /src (\S+) && pip install (\S+)", text, re.MULTILINE)
    assert install, "one RUN step with mounts installs pmd"
    bound = set(re.findall(r"--mount=type=bind,source=(\S+?),target=/src/", install.group(0)))
    assert {"pyproject.toml", "setup.py", "pmd_site", "search", "indexing", "templates"} <= bound
    assert "--mount=type=cache,target=/root/.cache/pip" in install.group(0)
    assert install.group(3) == f'"{install.group(2)}[formats]"'
    # The docs site is built in a stage of its own and copied where compose's PMD_HELP_DIR points.
    assert re.search(r"^FROM python:\$\{PYTHON_VERSION\}-slim AS docs$", text, re.MULTILINE)
    assert "COPY --from=docs /site /app/help" in text
    assert "COPY . ." not in text and " -e " not in text and "embedded" not in install.group(3)
    assert "collectstatic" in text
    assert re.search(r"^HEALTHCHECK .*\n\s+CMD \[\"pmd\", \"healthcheck\", \"web\"\]", text, re.MULTILINE)
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".env", ".venv", ".git"} <= set(ignored)


def test_the_image_builds_the_docs_with_the_mkdocs_material_the_lock_names():
    pinned = re.search(r'"mkdocs-material==([^"]+)"', DOCKERFILE.read_text())
    locked = re.search(r'name = "mkdocs-material"\nversion = "([^"]+)"', (ROOT / "uv.lock").read_text())
    assert pinned and locked and pinned.group(1) == locked.group(1)
