"""What pyproject.toml cannot say: the top-level templates/ folder ships inside the package as
pmd_site/templates, so an installed pmd (a wheel, pipx) has its web pages. Everything else about
the package is declared in pyproject.toml."""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["pmd_site*", "search*", "indexing*"]), "pmd_site.templates"],
    package_dir={"pmd_site.templates": "templates"},
    include_package_data=False,  # only the package_data below: static/ and templates/ are data, not packages
    package_data={
        "pmd_site.templates": ["*.html", "**/*.html"],
        "": ["static/**/*", "templates/**/*", "*.html", "*.js", "*.css"],
    },
)
