"""`python -m pmd_site.settings [--write]`: print .env.example as the table of settings renders it,
or write it over the repository's own."""

from __future__ import annotations

import sys

from pmd_site.settings.core import BASE_DIR
from pmd_site.settings.table import render_env_example


def main(argv: list[str]) -> int:
    text = render_env_example()
    if argv[:1] == ["--write"]:
        (BASE_DIR / ".env.example").write_text(text)
        # The docs' settings reference is rendered from the same table, by the command that
        # renders every generated page (it imports the CLI, which the settings may not).
        print("now also: .venv/bin/python -m pmd_site.reference --write (the docs' references)", file=sys.stderr)
    elif argv:
        print("usage: python -m pmd_site.settings [--write]", file=sys.stderr)
        return 2
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
