"""Team sign-in in a real browser against a real OpenID provider (oidc-provider on loopback):
"Sign in with …", the provider's own pages, back in pmd with the provider's groups deciding which
collections show, sign-out ending the provider's session too; moved to another group at the
provider, the next sign-in shows the other collection."""

from __future__ import annotations

import pytest

from tests.support.openid import start_provider, stop_provider

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def provider(live_server, tmp_path_factory):
    started = start_provider(
        tmp_path_factory.mktemp("openid"),
        redirect_uris=[f"{live_server.url}/accounts/oidc/test/callback/"],
        post_logout_redirect_uris=[f"{live_server.url}/accounts/login/"],
    )
    yield started
    stop_provider(started)


@pytest.fixture
def lab_and_hr(tmp_path, settings, transactional_db):
    from django.contrib.auth.models import Group

    from indexing.access import Access
    from indexing.services.collections import collection_create
    from indexing.services.scanning import collection_index
    from indexing.services.sharing import collection_share

    for name, word in (("lab", "assay"), ("hr", "payroll")):
        (tmp_path / name).mkdir()
        (tmp_path / name / f"{word}.md").write_text(f"# {word.title()}\n\nAbout the {word}.\n")
        collection_index(collection_create(path=tmp_path / name, name=name))
    Group.objects.create(name="research")
    Group.objects.create(name="people-ops")
    collection_share(name="lab", access=Access.local_user(), visibility="shared", groups=["research"])
    collection_share(name="hr", access=Access.local_user(), visibility="shared", groups=["people-ops"])


def test_sign_in_with_the_provider_follows_its_groups(chromium, live_server, provider, lab_and_hr, settings, shot):
    from pmd_site.signin import oidc

    settings.PMD_OIDC_PROVIDERS = [provider.settings()]
    oidc._cache.clear()
    provider.person("alice", groups=["research"])
    context = chromium.new_context(viewport={"width": 1280, "height": 860})
    context.set_default_timeout(15_000)
    page = context.new_page()

    def sign_in():
        page.goto(f"{live_server.url}/collections/")
        assert "/accounts/login/" in page.url
        shot(page, "signin-1-login-page")
        page.click("text=Sign in with Test IdP")
        page.wait_for_url(f"{provider.issuer}/**")
        if page.locator("input[name=login]").count():  # the provider's own sign-in page
            page.fill("input[name=login]", "alice")
            page.fill("input[name=password]", "anything")
            page.click("button[type=submit]")
        page.locator("button[type=submit]").click()  # the provider's consent
        page.wait_for_url(f"{live_server.url}/collections/")
        return page.locator("table.collections").inner_text()

    table = sign_in()
    shot(page, "signin-2-signed-in")
    assert "lab" in table and "hr" not in table
    assert "alice" in page.locator("header").inner_text()

    page.locator("form.user button").click()  # sign out: pmd, then the provider's confirmation
    page.wait_for_url(f"{provider.issuer}/**")
    page.locator("button[autofocus], button[type=submit]").first.click()
    page.wait_for_url(f"{live_server.url}/accounts/login/**")
    page.goto(f"{live_server.url}/collections/")
    assert "/accounts/login/" in page.url

    provider.person("alice", groups=["people-ops"])  # moved at the provider
    table = sign_in()
    assert "hr" in table and "lab" not in table
    shot(page, "signin-3-after-group-change")
    context.close()
