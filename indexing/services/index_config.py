"""The index's own configuration: backend, URLs, models, chunking.

Each process used to take these from the environment that started it, so a shell without
`pmd up`'s variables searched with another model and advised re-embedding everything. Now the
values live with the index (table `IndexSetting`), written by `pmd up`, `pmd config set` and the
web (staff), and every process applies them when it first reaches the database
(`index_config_apply`, wired in pmd_site/apps.py), and again whenever another process changed them
(`index_config_refresh`, asked by whoever reads the embedding setup): a running worker embeds with
what `pmd config set` just wrote, not with what it started with. An environment variable still wins
for its own process, with a warning naming both values, never advice to re-embed.

Where a value comes from is one rule, shown wherever the value is shown (`pmd config show`, `pmd
up`'s summary, status): this process's environment, the index's configuration (set by a person:
`pmd config set`, the web, or the environment of a `pmd up`), chosen automatically (stored by pmd: a
default, or the local backend when no model server answered), or the default. A value chosen
automatically gives way to the environment of the next `pmd up` that names another
(`index_config_from_start`), even when that embeds everything again; a value a person set does not.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field

from django.conf import settings
from django.db import ProgrammingError
from django.db.models import Count, Max

from indexing.errors import InvalidSetting, ReplacesVectors
from indexing.models import Chunk, EmbeddingFingerprint, IndexSetting

log = logging.getLogger(__name__)

# The settings an index keeps, from pmd's one table of settings (pmd_site/settings/table.py), which
# the settings hand down (this layer may not import pmd_site): name -> its entry (kind, default,
# choices). VECTOR_SETTINGS change what an embedding is: changing one replaces every vector.
_ENTRIES = settings.PMD_INDEX_SETTINGS
_TYPES = {"str": str, "int": int, "float": float}
INDEX_SETTINGS: dict[str, type] = {name: _TYPES[entry.kind] for name, entry in _ENTRIES.items()}
VECTOR_SETTINGS = {name for name, entry in _ENTRIES.items() if entry.replaces_vectors}


@dataclass
class ConfigChange:
    changed: dict[str, tuple[str | None, str]] = field(default_factory=dict)  # name -> (before, after)
    replaces_vectors: str = ""  # what embedding again replaces, when it does


# Where a value comes from, in words: the one wording of every face.
SOURCE_WORDS = {
    "environment": "this process's environment",
    "index": "the index's configuration",
    "automatic": "chosen automatically",
    "default": "default",
}


def index_config_get() -> dict[str, str]:
    """What the index keeps (name -> value as written)."""
    return dict(IndexSetting.objects.filter(name__in=list(INDEX_SETTINGS)).values_list("name", "value"))


def _automatic_names() -> set[str]:
    return set(
        IndexSetting.objects.filter(name__in=list(INDEX_SETTINGS), automatic=True).values_list("name", flat=True)
    )


def setting_source(
    name: str, *, stored: dict[str, str] | None = None, automatic: set[str] | None = None, environ=None
) -> str:
    """Where the value this process uses for `name` comes from: environment, index, automatic or default."""
    environ = os.environ if environ is None else environ
    stored = index_config_get() if stored is None else stored
    automatic = _automatic_names() if automatic is None else automatic
    if str(environ.get(name, "")).strip():
        return "environment"
    if name in stored:
        return "automatic" if name in automatic else "index"
    return "default"


def index_config_effective() -> list[dict]:
    """Every index setting: the value this process uses, the index's, and where the used one comes
    from (`source`, in words `source_words`). The chunk size is the one the model really uses: for
    the local backend without PMD_CHUNK_TOKENS, the model's window."""
    stored = index_config_get()
    automatic = _automatic_names()
    rows = []
    for name in INDEX_SETTINGS:
        used = str(getattr(settings, name, "") or "")
        given = os.environ.get(name, "").strip()
        source = setting_source(name, stored=stored, automatic=automatic)
        note = ""
        if name == "PMD_CHUNK_TOKENS" and not given and name not in stored and settings.PMD_LLM_BACKEND == "local":
            from indexing.llm import chunk_tokens  # noqa: PLC0415 - a keyword search loads no LLM client

            really = str(chunk_tokens())
            if really != used:
                used, source, note = really, "automatic", f"sized to the window of {settings.PMD_EMBED_MODEL}"
        rows.append(
            {
                "name": name,
                "value": used,
                "index": stored.get(name),
                "source": source,
                "source_words": SOURCE_WORDS[source] + (f": {note}" if note else ""),
                "mismatch": bool(given and name in stored and given != stored[name]),
            }
        )
    return rows


def _parse(name: str, value: str):
    if name not in INDEX_SETTINGS:
        raise InvalidSetting(f"{name}: not a setting the index keeps (one of {', '.join(INDEX_SETTINGS)})")
    kind = INDEX_SETTINGS[name]
    try:
        parsed = kind(value.strip()) if kind is not str else value.strip()
    except ValueError:
        raise InvalidSetting(f"{name}={value!r}: expected {'a whole number' if kind is int else 'a number'}") from None
    choices = _ENTRIES[name].choices
    if choices and parsed not in choices:
        raise InvalidSetting(f"{name}={value!r}: one of {', '.join(choices)}")
    return parsed


def index_config_set(
    *, values: dict[str, str], replace_vectors: bool = False, only_new: bool = False, automatic: bool = False
) -> ConfigChange:
    """Write settings into the index (and apply them here). A change of what an embedding is
    (model, backend, chunking, document prompt) while vectors exist raises ReplacesVectors saying
    what would be replaced, unless `replace_vectors`. `only_new`: keep what the index already has.
    `automatic`: pmd chose these values, no person did (see the module docstring). Another backend
    brings its own models where pmd chose the old backend's (an empty answer model among them):
    those changes are made and reported too."""
    for name, value in values.items():
        _parse(name, value)
    stored = index_config_get()
    follow = {} if automatic else _models_following_the_backend(values, stored)
    values = {**follow, **values}
    change = ConfigChange()
    for name, value in values.items():
        value = value.strip()
        if only_new and name in stored:
            continue
        before = stored.get(name, None)
        current = before if before is not None else str(getattr(settings, name, "") or "")
        if value != current or before is None:
            change.changed[name] = (before, value)
    reembed = {
        name
        for name in change.changed
        if name in VECTOR_SETTINGS
        and change.changed[name][1] != (change.changed[name][0] or str(getattr(settings, name, "") or ""))
    }
    if reembed and Chunk.objects.exists():
        held = ", ".join(f"{fp.model} ({fp.chunks.count()} chunks)" for fp in EmbeddingFingerprint.objects.all())
        described = ", ".join(
            f"{n}: {change.changed[n][0] or getattr(settings, n, '')} → {change.changed[n][1]}" for n in sorted(reembed)
        )
        change.replaces_vectors = (
            f"{described}: every note and commit is embedded again, and the vectors of "
            f"{held} are removed once the new "
            "ones cover the index; until then vector search finds only what is done"
        )
        if not replace_vectors:
            raise ReplacesVectors(change.replaces_vectors)  # each face says how to confirm
    for name, (_, value) in change.changed.items():
        chosen_by_pmd = automatic or name in follow
        IndexSetting.objects.update_or_create(name=name, defaults={"value": value, "automatic": chosen_by_pmd})
        _use(name, value)
    if not automatic:  # a person chose the value the index had already: it is theirs now
        mine = [name for name in values if name not in follow]
        IndexSetting.objects.filter(name__in=mine, automatic=True).update(automatic=False)
    if _applied.is_set():
        _seen["stamp"] = _stamp()  # this process already uses what it wrote
    return change


def _models_following_the_backend(values: dict[str, str], stored: dict[str, str]) -> dict[str, str]:
    """The new backend's default models, for the models pmd chose for the old one (not given now)."""
    backend = values.get("PMD_LLM_BACKEND", "").strip()
    if not backend or backend == stored.get("PMD_LLM_BACKEND"):
        return {}
    defaults = getattr(settings, "PMD_MODEL_DEFAULTS", {}).get("local" if backend == "local" else "ollama", {})
    automatic = _automatic_names()
    return {name: value for name, value in defaults.items() if name not in values and name in automatic}


# What names a model server for the local backend chosen automatically to give way to.
_NAMES_A_MODEL_SERVER = ("OLLAMA_URL", "PMD_EMBED_MODEL", "PMD_GENERATE_MODEL", "PMD_RERANK_MODEL", "PMD_ANSWER_MODEL")


def backend_is_chosen(*, environ=None) -> bool:
    """Whether a person chose the backend (in this environment or the index's configuration):
    then pmd never chooses it again."""
    return setting_source("PMD_LLM_BACKEND", environ=environ) in {"environment", "index"}


def environment_names_a_model_server(*, environ=None) -> bool:
    """Whether this environment names a model server or its models (not a local model's folder):
    what makes a backend chosen automatically worth choosing again."""
    environ = os.environ if environ is None else environ
    for name in _NAMES_A_MODEL_SERVER:
        value = str(environ.get(name, "")).strip()
        if value and not value.startswith(("/", "~", "./", "../")):
            return True
    return False


@dataclass
class StartConfig:
    """What `index_config_from_start` did: the changes, the environment's values it did not use
    (they would replace the vectors of a configuration a person set) and why."""

    change: ConfigChange
    not_used: list[str] = field(default_factory=list)
    why_not_used: str = ""


def index_config_from_start(*, given: dict[str, str], chosen: dict[str, str]) -> StartConfig:
    """`pmd up` writes the index's configuration: `given` (its environment's values) as set by a
    person, `chosen` (pmd's own choices: the defaults, the backend it picked and that backend's
    models) as automatic. An automatic value gives way to both; a value a person set is kept
    against pmd's choices, and against the environment where that would embed everything again
    (`pmd config set … --yes` does that)."""
    stored = index_config_get()
    automatic = _automatic_names()
    personal = {name for name in stored if name not in automatic}
    ours = {name: value for name, value in chosen.items() if name not in personal and name not in given}
    kept_for_vectors = {  # a value equal to the index's changes nothing: it is used, never named
        n: v for n, v in given.items() if n in VECTOR_SETTINGS and n in personal and v.strip() != stored[n]
    }
    result = StartConfig(change=ConfigChange())
    for values, automatic_values in (
        (ours, True),
        ({n: v for n, v in given.items() if n not in kept_for_vectors}, False),
    ):
        if values:
            done = index_config_set(values=values, replace_vectors=True, automatic=automatic_values)
            result.change.changed.update(done.changed)
            result.change.replaces_vectors = result.change.replaces_vectors or done.replaces_vectors
    if kept_for_vectors:
        try:
            result.change.changed.update(index_config_set(values=kept_for_vectors).changed)
        except ReplacesVectors as exc:
            result.not_used, result.why_not_used = sorted(kept_for_vectors), str(exc)
    return result


def index_config_unset(*, names: list[str]) -> int:
    for name in names:
        _parse(name, str(_ENTRIES[name].default) if name in _ENTRIES else "")
    deleted, _ = IndexSetting.objects.filter(name__in=names).delete()
    return deleted


def _use(name: str, value: str) -> None:
    setattr(settings, name, _parse(name, value))
    if name == "PMD_CHUNK_TOKENS":
        settings.PMD_CHUNK_TOKENS_FROM_MODEL = False


_applied = threading.Event()
_seen: dict = {}  # "stamp": the index's configuration as this process last applied it
_refreshing = threading.Lock()


def _stamp() -> tuple:
    """What changes when any process writes or removes one of the index's settings."""
    found = IndexSetting.objects.filter(name__in=list(INDEX_SETTINGS)).aggregate(
        rows=Count("name"), at=Max("updated_at")
    )
    return found["rows"], found["at"]


def index_config_refresh() -> None:
    """Apply the index's settings again if another process changed them since this one did
    (one small query): a running worker or server follows `pmd config set` without a restart.
    A setting removed from the index keeps its value here until the process restarts."""
    if not _applied.is_set() or getattr(settings, "PMD_INDEX_CONFIG_FROM_DATABASE", True) is False:
        return
    with _refreshing:
        stamp = _stamp()
        if stamp != _seen.get("stamp"):
            log.info("the index's configuration changed: applying it")
            index_config_apply()


def index_config_apply(*, environ=None) -> list[str]:
    """Use the index's settings in this process, except where its environment says otherwise
    (then one warning naming both values). Returns the warnings."""
    environ = os.environ if environ is None else environ
    warnings = []
    _seen["stamp"] = _stamp()  # before reading: a change made meanwhile is applied next time
    stored = index_config_get()
    backend = stored.get("PMD_LLM_BACKEND")
    if backend and not str(environ.get("PMD_LLM_BACKEND", "")).strip():
        # The index chose the backend: its default models, where neither the index nor the environment names one.
        defaults = getattr(settings, "PMD_MODEL_DEFAULTS", {}).get("local" if backend == "local" else "ollama", {})
        for name, value in defaults.items():
            if name not in stored and not str(environ.get(name, "")).strip():
                setattr(settings, name, value)
        if backend == "local" and "PMD_CHUNK_TOKENS" not in stored and not environ.get("PMD_CHUNK_TOKENS"):
            settings.PMD_CHUNK_TOKENS_FROM_MODEL = True
    automatic = _automatic_names()
    for name, value in stored.items():
        given = str(environ.get(name, "")).strip()
        if given:
            if given != value and name not in automatic:  # pmd's own choice gives way without a word
                warnings.append(
                    f"{name}={given} from this process's environment; the index is configured with "
                    f"{name}={value} (this process uses {given}; `pmd config set {name} …` changes "
                    "the index's for every process)"
                )
            continue
        try:
            _use(name, value)
        except InvalidSetting as exc:
            warnings.append(f"the index's {exc}: this process keeps {getattr(settings, name, '')}")
    for warning in warnings:
        log.warning("%s", warning)
    _applied.set()
    return warnings


def index_config_apply_once(connection) -> None:
    """On a process's first database connection (Django's connection_created): apply the index's
    settings once. Before migrations there is no table: nothing to apply, try again next time."""
    if _applied.is_set() or getattr(settings, "PMD_INDEX_CONFIG_FROM_DATABASE", True) is False:
        return
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT to_regclass('indexing_indexsetting') IS NOT NULL")
            exists = cursor.fetchone()[0]
    except Exception:  # noqa: BLE001 - the process goes on with its environment
        return
    if not exists:
        return
    _applied.set()  # before the queries: they open no new connection, but never recurse
    try:
        index_config_apply()
    except ProgrammingError:
        # A table older than this pmd (an index not migrated yet): whoever runs the process migrates
        # it or says so in one line; the next connection (or the migration) tries again.
        log.debug("the index's configuration is not readable before its migrations", exc_info=True)
        _applied.clear()
    except Exception:
        log.warning("could not read the index's configuration: using this process's environment", exc_info=True)
