# One image for every pmd service in compose.yaml (web, worker, beat, watcher, migrate):
# the command picks the service, e.g. `serve --host 0.0.0.0`, `worker`, `beat`, `watch`.
ARG PYTHON_VERSION=3.11

# The documentation site, built in a stage of its own (mkdocs stays out of the image): pmd serves
# it at /help/, so a home server without internet has the docs too. The version is uv.lock's.
FROM python:${PYTHON_VERSION}-slim AS docs
RUN --mount=type=bind,source=docs,target=/src/docs \
    --mount=type=bind,source=mkdocs.yml,target=/src/mkdocs.yml \
    --mount=type=bind,source=CHANGELOG.md,target=/src/CHANGELOG.md \
    --mount=type=cache,target=/root/.cache/pip \
    pip install --disable-pip-version-check "mkdocs-material==9.8.2" \
 && cd /src && NO_MKDOCS_2_WARNING=1 mkdocs build --quiet --site-dir /site

FROM python:${PYTHON_VERSION}-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PMD_HOME=/data \
    PMD_STATIC_ROOT=/app/staticfiles \
    PMD_HELP_DIR=/app/help

# git: `pmd update --pull` for collections that are git checkouts; tini: signals and zombies;
# tesseract: OCR of scanned PDFs (PMD_OCR=auto uses it when it is installed).
RUN apt-get update \
 && apt-get install -y --no-install-recommends git tini tesseract-ocr tesseract-ocr-eng \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 1000 pmd \
 && useradd --system --uid 1000 --gid pmd --home-dir /data --shell /usr/sbin/nologin pmd \
 && mkdir -p /data && chown pmd:pmd /data

WORKDIR /app

# pmd installed as a package from the build context (bound for this step only: no source in the
# image), with the web pages it carries. Only what the package is built from is bound, so a change
# of the docs rebuilds the docs stage alone. The compose stack brings its own PostgreSQL and Redis,
# so the `embedded` extra is left out; `formats` (PDF and Office files) is in. pip's downloads are
# kept in a build cache outside the image, so a rebuild after a code change downloads nothing.
RUN --mount=type=bind,source=pyproject.toml,target=/src/pyproject.toml \
    --mount=type=bind,source=setup.py,target=/src/setup.py \
    --mount=type=bind,source=README.md,target=/src/README.md \
    --mount=type=bind,source=pmd_site,target=/src/pmd_site \
    --mount=type=bind,source=search,target=/src/search \
    --mount=type=bind,source=indexing,target=/src/indexing \
    --mount=type=bind,source=templates,target=/src/templates \
    --mount=type=cache,target=/root/.cache/pip \
    cp -r /src /tmp/pmd-src && pip install "/tmp/pmd-src[formats]" && rm -rf /tmp/pmd-src \
 && PMD_SECRET_KEY=build-only DATABASE_URL=postgres://build@localhost/build \
    DJANGO_SETTINGS_MODULE=pmd_site.settings django-admin collectstatic --noinput --verbosity 0

COPY --from=docs /site /app/help

USER pmd
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["pmd", "healthcheck", "web"]
ENTRYPOINT ["/usr/bin/tini", "--", "pmd"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8000"]
