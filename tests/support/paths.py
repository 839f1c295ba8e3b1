"""Where the tests find the repository and the fixture data, wherever a test file sits under tests/."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
ROOT = TESTS.parent
FIXTURES = TESTS / "fixtures"
FIXTURE_CORPUS = FIXTURES / "corpus"
FIXTURE_VAULT = FIXTURES / "vault"
