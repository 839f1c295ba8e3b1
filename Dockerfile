# One image for every pmd service in compose.yaml (web, worker, beat, watcher, migrate):
# the command picks the service, e.g. `serve --host 0.0.0.0`, `worker`, `beat`, `watch`.
ARG PYTHON_VERSION=3.11
FROM python:${PYTHON_VERSION}-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PMD_HOME=/data \
    PMD_STATIC_ROOT=/app/staticfiles

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
# image), with the web pages it carries. The compose stack brings its own PostgreSQL and Redis, so
# the `embedded` extra is left out; `formats` (PDF and Office files) is in. pip's downloads are kept
# in a build cache outside the image, so a rebuild after a code change downloads nothing.
RUN --mount=type=bind,target=/src,rw \
    --mount=type=cache,target=/root/.cache/pip \
    pip install "/src[formats]" \
 && PMD_SECRET_KEY=build-only DATABASE_URL=postgres://build@localhost/build \
    DJANGO_SETTINGS_MODULE=pmd_site.settings django-admin collectstatic --noinput --verbosity 0

USER pmd
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["pmd", "healthcheck", "web"]
ENTRYPOINT ["/usr/bin/tini", "--", "pmd"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8000"]
