#!/usr/bin/env python
"""Django's command-line utility, over the same embedded database as `pmd`."""

import os
import sys

from django.core.management import execute_from_command_line

from pmd_site.runtime.process import database_lease, setup_django


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pmd_site.settings")
    setup_django()
    with database_lease():
        execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
