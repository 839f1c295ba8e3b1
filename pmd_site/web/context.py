"""What every page's template can show: the version in the footer."""

from pmd_site.version import VERSION


def version(request) -> dict:
    return {"pmd_version": VERSION}
