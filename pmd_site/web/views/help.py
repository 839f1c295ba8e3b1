"""/help/: the documentation site, served by pmd itself from its built copy (PMD_HELP_DIR), so a
team on a server without internet access reads the same docs as everyone else."""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import SuspiciousFileOperation
from django.http import Http404, HttpResponse
from django.views.static import serve

from pmd_site.security import content_security_policy
from pmd_site.web.pages import page

INLINE_SCRIPT = re.compile(rb"<script(?![^>]*\bsrc=)(?![^>]*type=\"application/json\")[^>]*>(.*?)</script>", re.S)


def _policy(html: bytes) -> str:
    """pmd's policy, with the built site's own inline scripts allowed by their hashes (the theme
    needs them); no other inline script runs."""
    hashes = sorted(
        {f"'sha256-{base64.b64encode(hashlib.sha256(body).digest()).decode()}'" for body in INLINE_SCRIPT.findall(html)}
    )
    return content_security_policy().replace("script-src 'self'", " ".join(["script-src 'self'", *hashes]))


@login_required
def help_page(request, path: str = ""):
    root = Path(settings.PMD_HELP_DIR)
    if not (root / "index.html").is_file():
        # A checkout (./scripts/run) can build the site itself; an installed package has no docs/.
        checkout = (Path(settings.BASE_DIR) / "mkdocs.yml").is_file()
        return page(request, "web/help_missing.html", {"folder": root, "checkout": checkout}, status=404)
    if path == "" or path.endswith("/"):
        path += "index.html"
    try:
        response = serve(request, path, document_root=root)
    except SuspiciousFileOperation:
        raise Http404("no such page") from None  # a path out of the folder: as if it did not exist
    if not response.get("Content-Type", "").startswith("text/html"):
        return response
    with response.file_to_stream as file:  # a page of the docs: small. (response.close() would
        html = file.read()  # signal the request's end: Django closes the database connections.)
    answer = HttpResponse(html, content_type=response["Content-Type"])
    answer["Content-Security-Policy"] = _policy(html)
    return answer
