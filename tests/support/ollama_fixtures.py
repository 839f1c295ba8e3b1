"""pytest fixtures around the Ollama-compatible test server (load with
`pytest_plugins = ["tests.support.ollama_fixtures"]` in tests/conftest.py).

    def test_x(ollama):          # server reset, settings pointed at it
        ollama.fail_next(2)
        ollama.chat_handler = lambda body: '{"queries": ["a", "b"]}'
"""

from __future__ import annotations

import pytest

from tests.support.ollama_server import OllamaTestServer, unused_url


@pytest.fixture(scope="session")
def ollama_server():
    server = OllamaTestServer().start()
    yield server
    server.stop()


@pytest.fixture
def ollama(ollama_server, settings):
    """The test server, reset, with Django settings aimed at it (Ollama backend,
    embeddinggemma, fast retries)."""
    from search.pipeline.absent import forget_absent

    ollama_server.reset()
    forget_absent()  # a model missing from an earlier test's server is asked for again
    if ollama_server.port is None or ollama_server._httpd is None:
        ollama_server.start(ollama_server.port or 0)
    settings.PMD_LLM_BACKEND = "ollama"
    settings.OLLAMA_URL = ollama_server.url
    settings.PMD_EMBED_MODEL = "embeddinggemma"
    settings.PMD_EMBED_QUERY_PROMPT = ""
    settings.PMD_EMBED_DOC_PROMPT = ""
    settings.PMD_LLM_TIMEOUT = 10.0
    settings.PMD_LLM_RETRIES = 2
    settings.PMD_LLM_RETRY_BACKOFF = 0.01
    yield ollama_server
    ollama_server.reset()
    if ollama_server._httpd is None:  # a test stopped it: bring it back for the next one
        ollama_server.start(ollama_server.port or 0)


@pytest.fixture
def ollama_openai(ollama, settings):
    """The same server through its OpenAI-compatible routes."""
    settings.PMD_LLM_BACKEND = "openai"
    settings.PMD_OPENAI_BASE_URL = ollama.openai_url
    settings.PMD_OPENAI_API_KEY = ""
    return ollama


@pytest.fixture
def ollama_down(settings):
    """Settings pointing at a URL where nothing listens."""
    url = unused_url()
    settings.PMD_LLM_BACKEND = "ollama"
    settings.OLLAMA_URL = url
    settings.PMD_LLM_RETRIES = 1
    settings.PMD_LLM_RETRY_BACKOFF = 0.01
    return url
