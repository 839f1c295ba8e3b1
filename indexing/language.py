"""A collection's language: which PostgreSQL text search configuration stems its words.

The user says `--language de` (or `auto`, which reads a sample of the folder's notes); what is
stored is the configuration itself (`Collection.text_search_config`), so `--config` stays the
expert form and an existing collection keeps what it had. Chinese, Japanese and Korean have no
snowball stemmer: they use `simple`, and their character bigrams (indexing/keyword/analysis.py)
are made whatever the configuration.

Detection is small and dependency-free: the script of the letters first (Han, kana, Hangul,
Cyrillic, Greek…), then, for Latin script, which language's common short words occur most.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

# code → (name, PostgreSQL configuration). The snowball languages PostgreSQL 16/17 ship, plus CJK.
LANGUAGES: dict[str, tuple[str, str]] = {
    "ar": ("Arabic", "arabic"),
    "hy": ("Armenian", "armenian"),
    "eu": ("Basque", "basque"),
    "ca": ("Catalan", "catalan"),
    "da": ("Danish", "danish"),
    "nl": ("Dutch", "dutch"),
    "en": ("English", "english"),
    "fi": ("Finnish", "finnish"),
    "fr": ("French", "french"),
    "de": ("German", "german"),
    "el": ("Greek", "greek"),
    "hi": ("Hindi", "hindi"),
    "hu": ("Hungarian", "hungarian"),
    "id": ("Indonesian", "indonesian"),
    "ga": ("Irish", "irish"),
    "it": ("Italian", "italian"),
    "lt": ("Lithuanian", "lithuanian"),
    "ne": ("Nepali", "nepali"),
    "no": ("Norwegian", "norwegian"),
    "pt": ("Portuguese", "portuguese"),
    "ro": ("Romanian", "romanian"),
    "ru": ("Russian", "russian"),
    "sr": ("Serbian", "serbian"),
    "es": ("Spanish", "spanish"),
    "sv": ("Swedish", "swedish"),
    "ta": ("Tamil", "tamil"),
    "tr": ("Turkish", "turkish"),
    "yi": ("Yiddish", "yiddish"),
    "zh": ("Chinese", "simple"),
    "ja": ("Japanese", "simple"),
    "ko": ("Korean", "simple"),
    "none": ("no stemming", "simple"),
    "mixed": ("mixed languages, no stemming", "simple"),
}
AUTO = "auto"
CJK_LANGUAGES = frozenset({"zh", "ja", "ko"})

# Letters of a script → the language they stand for when they are most of the text.
_SCRIPTS = [
    ("ja", re.compile(r"[\u3040-\u30ff\uff66-\uff9f]")),  # kana: Japanese even among Han
    ("ko", re.compile(r"[\uac00-\ud7af\u1100-\u11ff\u3130-\u318f]")),
    ("zh", re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")),
    ("ru", re.compile(r"[\u0400-\u04ff]")),
    ("el", re.compile(r"[\u0370-\u03ff]")),
    ("ar", re.compile(r"[\u0600-\u06ff]")),
    ("hy", re.compile(r"[\u0530-\u058f]")),
    ("hi", re.compile(r"[\u0900-\u097f]")),
    ("ta", re.compile(r"[\u0b80-\u0bff]")),
    ("yi", re.compile(r"[\u0590-\u05ff]")),
]
_LATIN = re.compile(r"[A-Za-z\u00c0-\u024f]")
_WORD = re.compile(r"[a-z\u00e0-\u024f]{2,}")  # one-letter words (a, e, o, y) say little
# Code, commands and addresses are no one's language: not counted.
_NOT_PROSE = re.compile(
    r"\A---\n.*?\n---\n|```.*?(?:```|\Z)|`[^`\n]*`|\{\{.*?\}\}|<[^>\n]*>|https?://\S+|\[[^\]\n]*\]\([^)\n]*\)"
    r"|!?\[\[[^\]\n]*\]\]",  # frontmatter, code, templates, tags, addresses, links and wiki links: names, not prose
    re.S,
)

# A few dozen of the commonest short words of each Latin-script language (function words only).
_STOP = {
    "en": "the of and to in is that for it with as on are this be by or from at an not you can your have how "
    "do does what which why my all",
    "de": "der die das und ist nicht ein eine mit den von zu im auf für dem des sich auch wird oder werden wenn "
    "bei aus einer einem nach sind wie",
    "fr": "le la les et des est une pour que dans du en qui pas sur avec ce sont par au aux plus vous",
    "es": "el la los las y de que en un una es por con para del se no al lo como más su",
    "it": "il di che la le e un una per non sono con del della gli alla nel si come anche",
    "pt": "o a os as de que e um uma do da em para com não no na por se mais como",
    "nl": "de het een en van is dat niet op te voor met zijn er maar ook als bij",
    "sv": "och att det som en är på för med har inte av till den om jag ett",
    "da": "og at det som en er på for med har ikke af til den om jeg et",
    "no": "og at det som en er på for med har ikke av til den om jeg et",
    "fi": "ja on ei että se oli ovat mutta kuin tai jos myös joka",
    "hu": "a az és hogy nem egy is van meg de ha csak mint ez",
    "tr": "ve bir bu da de için ile ne çok daha gibi olan olarak",
    "ro": "și de la în nu cu pe un o este care să din ce",
    "id": "dan yang di ini itu dengan untuk tidak dari dalam akan pada",
    "ca": "el la els les i de que en un una per amb no és del",
}
_STOP_SETS = {code: set(words.split()) for code, words in _STOP.items()}
SAMPLE_FILES = 60
SAMPLE_CHARS = 4000
MIXED_SHARE = 0.6
MIXED = "mixed"


@dataclass(frozen=True)
class LanguageChoice:
    code: str  # "de", or "" when --config named the configuration directly
    config: str  # the PostgreSQL text search configuration
    detected: bool = False  # chosen by `auto` from the notes

    @property
    def label(self) -> str:
        name = LANGUAGES[self.code][0] if self.code in LANGUAGES else self.config
        return f"{name} (detected)" if self.detected else name


def language_of_config(config: str) -> str:
    """The language code a stored configuration stands for ('' if none or several do)."""
    codes = [
        c for c, (_, cfg) in LANGUAGES.items() if cfg == config and c not in CJK_LANGUAGES and c not in ("none", MIXED)
    ]
    return codes[0] if len(codes) == 1 else ""


def language_label(config: str) -> str:
    """How a stored configuration is shown: the language's name, or the configuration's."""
    code = language_of_config(config)
    return LANGUAGES[code][0] if code else config


_HINTS = {"de": "äöüß", "fr": "éèêàçœ", "es": "ñ¿¡", "pt": "ãõ", "sv": "å", "tr": "ğış"}


def latin_share(text: str) -> float:
    """Share of a text's letters in Latin script (a Han or kana character weighing as ~3
    letters): what an English-only model can read of it. 1.0 for a text without letters."""
    text = _NOT_PROSE.sub(" ", text)
    latin = len(_LATIN.findall(text))
    other = sum(len(p.findall(text)) * (3 if code in CJK_LANGUAGES else 1) for code, p in _SCRIPTS)
    return latin / (latin + other) if latin + other else 1.0


def query_language(text: str) -> str | None:
    """The language of a short query, or None when its words do not say (a query of names,
    commands or codes): its script, else one of its words being a common word or holding a
    letter of one language only."""
    text = _NOT_PROSE.sub(" ", text)
    for code, pattern in _SCRIPTS:
        if pattern.search(text):
            scripts = {c: len(p.findall(text)) for c, p in _SCRIPTS}
            if scripts["ja"]:
                return "ja"
            best = max(scripts, key=scripts.get)
            if scripts[best] * (3 if best in CJK_LANGUAGES else 1) >= len(_LATIN.findall(text)):
                return best
            break
    words = _WORD.findall(text.lower())
    hits = {lang: sum(w in stop for w in words) for lang, stop in _STOP_SETS.items()}
    for lang, letters in _HINTS.items():
        hits[lang] = hits.get(lang, 0) + sum(any(ch in letters for ch in w) for w in words)
    best = max(hits, key=hits.get)
    if not hits[best] or list(hits.values()).count(hits[best]) > 1:
        return None
    return best


def detect_language(text: str) -> str | None:
    """The language most of `text` is in, or None when there are too few letters or common words to say."""
    text = _NOT_PROSE.sub(" ", text)
    scripts = Counter()
    for code, pattern in _SCRIPTS:
        scripts[code] = len(pattern.findall(text))
    latin = len(_LATIN.findall(text))
    total = latin + sum(scripts.values())
    if total < 20:
        return None
    if scripts["ja"] and scripts["ja"] >= 0.05 * (scripts["ja"] + scripts["zh"]):
        scripts["ja"] += scripts.pop("zh")  # Japanese text is largely Han; kana decides it
    code, count = scripts.most_common(1)[0]
    # CJK characters are words or syllables, Latin ones letters: weigh them ~3 letters each.
    weight = 3 if code in CJK_LANGUAGES else 1
    if count * weight > latin:
        return code
    words = Counter(_WORD.findall(text.lower()))
    hits = {lang: sum(n for w, n in words.items() if w in stop) for lang, stop in _STOP_SETS.items()}
    best = max(hits, key=hits.get)
    # Too few common words to tell (a daily note of tasks and names): no vote. Counting it as English
    # made a vault of four languages and many such notes English.
    return best if hits[best] >= 3 else None


def detect_notes_language(texts: list[str]) -> str | None:
    """The language of a set of notes: each note votes by its detected language, weighted by
    its length; `mixed` when no language has MIXED_SHARE of the votes (then nothing is stemmed,
    which costs a one-language collection little and spares the others a foreign stemmer)."""
    votes: Counter = Counter()
    for text in texts:
        code = detect_language(text)
        if code:
            votes[code] += len(text)
    if not votes:
        return None
    code, weight = votes.most_common(1)[0]
    return code if weight >= MIXED_SHARE * sum(votes.values()) else MIXED


def sample_texts(paths: list[str]) -> list[str]:
    """The first characters of up to SAMPLE_FILES notes spread over `paths`."""
    step = max(1, len(paths) // SAMPLE_FILES)
    texts = []
    for path in paths[::step][:SAMPLE_FILES]:
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                texts.append(handle.read(SAMPLE_CHARS))
        except OSError:
            continue
    return texts


def language_choice(
    *, language: str | None, config: str | None, sample: list[str] | None, fallback_config: str
) -> LanguageChoice:
    """The configuration for a new collection: `config` as given, else `language`'s, else
    (`auto`) the language detected in the `sample` notes, else `fallback_config`."""
    if config:
        return LanguageChoice(language_of_config(config), config)
    code = (language or AUTO).strip().lower()
    if code != AUTO:
        if code not in LANGUAGES:
            by_name = {name.lower(): c for c, (name, _) in LANGUAGES.items()}
            code = by_name.get(code, code)
        if code not in LANGUAGES:
            raise ValueError(code)
        return LanguageChoice(code, LANGUAGES[code][1])
    detected = detect_notes_language(sample or [])
    if detected is None:
        return LanguageChoice(language_of_config(fallback_config), fallback_config)
    return LanguageChoice(detected, LANGUAGES[detected][1], detected=True)
