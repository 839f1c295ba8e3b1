"""The ASGI entry point served by `pmd up` (uvicorn/gunicorn): `pmd_site.asgi:application`.

For now this is Django alone; the MCP Streamable HTTP endpoint at /mcp is routed here
next to it so that one process serves the web UI, the JSON API and MCP.
"""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pmd_site.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

django_application = get_asgi_application()
application = django_application
