"""Teams in the web UI and the admin: a collection someone may not see does not exist for them.

A private collection `hrvault` (owner: olga, staff) holds a document with a word no other
document has, and a file identical to one of the shared `handbook` (one content row for both).
mia (member) and bob (staff, not its owner) must learn neither the name nor the word from any
page; after olga shares it, mia sees it everywhere.
"""

from __future__ import annotations

import re
import shutil
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from indexing.access import Access, visible_collection_names
from indexing.models import ApiToken, AuditEvent, Collection, Document, Job
from indexing.services.tokens import token_create
from tests.support.factories import make_group, make_user

pytestmark = pytest.mark.django_db

SECRET_NAME = "hrvault"
SECRET_WORD = "zanzibarquux"  # only in hrvault's salaries document
NEVER_CREATED = "nosuchvault"  # what a name that was never created gets: the yardstick for "no leak"
HTMX = {"HTTP_HX_REQUEST": "true"}


def _no_leak(response) -> str:
    body = response.content.decode()
    assert SECRET_NAME not in body and SECRET_WORD not in body, response.request["PATH_INFO"]
    return body


def _same_as_never_created(client, url_template: str, method: str = "get", data=None):
    """The answer for the hidden name is the answer for a name never created (name swapped, CSRF tokens aside)."""

    def normalized(name):
        response = getattr(client, method)(url_template.format(name=name), data or {})
        body = re.sub(r'(csrfmiddlewaretoken" value="|X-CSRFToken": ")[^"]+', r"\1", response.content.decode())
        return response.status_code, body.replace(name, "NAME")

    hidden, never = normalized(SECRET_NAME), normalized(NEVER_CREATED)
    assert hidden == never
    assert SECRET_WORD not in hidden[1]
    return hidden[0]


@pytest.fixture
def people(db):
    return {
        "olga": make_user("olga", password="correct horse battery", staff=True),
        "bob": make_user("bob", password="correct horse battery", staff=True),
        "mia": make_user("mia", password="correct horse battery"),
        "root": make_user("root", password="correct horse battery", superuser=True),
    }


@pytest.fixture
def clients(people):
    made = {}
    for name, user in people.items():
        made[name] = Client()
        made[name].force_login(user)
    return made


@pytest.fixture
def collections(people, corpus_dir, tmp_path, settings):
    """`handbook` (everyone) and `hrvault` (private to olga), both indexed."""
    from indexing.services.collections import collection_create
    from indexing.services.scanning import collection_index

    settings.PMD_COLLECTION_ROOTS = [tmp_path]
    vault = tmp_path / "vault"
    (vault / "pay").mkdir(parents=True)
    (vault / "pay" / "salaries.md").write_text(
        f"# Salaries {SECRET_WORD}\n\nQuarterly salaries of the team, {SECRET_WORD}.\n"
    )
    (vault / "guides").mkdir()
    shutil.copy(corpus_dir / "guides" / "postgres-tuning.md", vault / "guides" / "postgres-tuning.md")
    handbook = collection_create(path=corpus_dir, name="handbook")
    secret = collection_create(
        path=vault, name=SECRET_NAME, owner=people["olga"], visibility=Collection.Visibility.PRIVATE
    )
    for collection in (handbook, secret):
        collection_index(collection)
    return {"handbook": handbook, "secret": secret}


def _secret_document():
    return Document.objects.get(collection__name=SECRET_NAME, path="pay/salaries.md")


# --- the web UI: a member without access ------------------------------------------------------


def test_a_member_without_access_finds_the_collection_on_no_page(clients, collections, people):
    mia = clients["mia"]
    page = _no_leak(mia.get("/collections/"))
    assert "handbook" in page
    _no_leak(mia.get("/status/"))
    _no_leak(mia.get("/tokens/"))
    _no_leak(mia.get("/"))  # the collection filter
    # The owner sees it on the same pages: the checks above can fail.
    assert SECRET_NAME in clients["olga"].get("/collections/").content.decode()
    assert SECRET_NAME in clients["olga"].get("/").content.decode()


def test_a_member_without_access_gets_no_search_result_from_it(clients, collections):
    for query in ("salaries", "quarterly salaries team", "postgres tuning"):
        body = _no_leak(clients["mia"].get("/", {"q": query, "mode": "keyword"}))
        if query == "postgres tuning":  # the same file in both collections: only the visible copy
            assert "handbook/guides/postgres-tuning.md" in body
    assert SECRET_WORD in clients["olga"].get("/", {"q": "salaries", "mode": "keyword"}).content.decode()
    # Filtering on it is "no such collection", exactly as for a name never created.
    assert _same_as_never_created(clients["mia"], "/?q=salaries&collection={name}") == 200


@pytest.mark.django_db(transaction=True)  # hybrid search runs its retrievers in threads, which must see the data
def test_semantic_and_hybrid_search_skip_it_too(clients, collections, ollama):
    from indexing.services.embedding.run import embed_pending

    embed_pending()
    for mode in ("semantic", "hybrid"):
        body = _no_leak(clients["mia"].get("/", {"q": "quarterly salaries", "mode": mode}))
        assert 'class="result"' in body and "vector search failed" not in body, mode  # found only what mia sees
        owner = clients["olga"].get("/", {"q": "quarterly salaries", "mode": mode}).content.decode()
        assert SECRET_WORD in owner, mode


def test_its_documents_are_not_found_by_path_docid_or_raw(clients, collections):
    mia = clients["mia"]
    assert _same_as_never_created(mia, "/doc/{name}/pay/salaries.md") == 404
    assert _same_as_never_created(mia, "/raw/{name}/pay/salaries.md") == 404
    hidden = _secret_document()
    response = mia.get(f"/d/{hidden.docid}")
    assert response.status_code == 404
    _no_leak(response)
    assert clients["olga"].get(f"/d/{hidden.docid}").status_code == 302
    # A document whose content is shared: the link leads to the copy mia may see, never the other.
    shared = Document.objects.get(collection__name=SECRET_NAME, path="guides/postgres-tuning.md")
    assert mia.get(f"/d/{shared.docid}")["Location"] == "/doc/handbook/guides/postgres-tuning.md"


def test_a_job_on_it_is_no_such_job_even_for_whoever_started_it(clients, collections, people):
    hidden = Job.objects.create(
        kind=Job.Kind.INDEX,
        collection=collections["secret"],
        created_by=people["mia"],
        state=Job.State.DONE,
        message=f"indexed {SECRET_NAME}",
    )
    seen = Job.objects.create(
        kind=Job.Kind.INDEX, collection=collections["handbook"], created_by=people["mia"], state=Job.State.DONE
    )
    response = clients["mia"].get(f"/jobs/{hidden.pk}/", **HTMX)
    assert response.status_code == 404
    _no_leak(response)
    assert clients["mia"].get(f"/jobs/{seen.pk}/", **HTMX).status_code == 200


def test_staff_who_do_not_see_it_cannot_share_or_reindex_it(clients, collections):
    bob = clients["bob"]
    _no_leak(bob.get("/collections/"))
    assert _same_as_never_created(bob, "/collections/{name}/share/", "post", {"visibility": "everyone"}) == 404
    assert _same_as_never_created(bob, "/collections/{name}/reindex/", "post") == 404
    assert Collection.objects.get(name=SECRET_NAME).visibility == Collection.Visibility.PRIVATE


# --- the web UI: sharing ------------------------------------------------------------------------


def test_each_row_says_who_sees_it_and_only_staff_get_the_sharing_control(clients, collections, people):
    owner = clients["olga"].get("/collections/").content.decode()
    secret_row = owner[owner.index(f'id="sharing-{collections["secret"].pk}"') :]
    assert re.search(r'data-visibility="private">\s*<span class="badge error">private</span>', secret_row)
    assert "owner olga" in secret_row.split("</span>\n  </span>")[0]
    assert 'data-visibility="everyone"' in owner
    assert f'action="/collections/{SECRET_NAME}/share/"' in owner and 'name="visibility"' in owner
    assert '<option value="mia">mia</option>' in owner  # people to share with
    member = clients["mia"].get("/collections/").content.decode()
    assert 'data-visibility="everyone"' in member
    assert "/share/" not in member and 'name="visibility"' not in member


def test_sharing_with_a_person_through_the_form_lets_them_see_it_everywhere(clients, collections, people):
    response = clients["olga"].post(f"/collections/{SECRET_NAME}/share/", {"visibility": "shared", "users": ["mia"]})
    assert response.status_code == 302 and response["Location"] == "/collections/"
    event = AuditEvent.objects.get(action="collection.share")
    assert (event.actor, event.target, event.detail["users"]) == (people["olga"], SECRET_NAME, ["mia"])

    mia = clients["mia"]
    assert SECRET_NAME in mia.get("/collections/").content.decode()
    assert SECRET_WORD in mia.get("/", {"q": "salaries", "mode": "keyword"}).content.decode()
    assert mia.get(f"/doc/{SECRET_NAME}/pay/salaries.md").status_code == 200
    assert mia.get(f"/d/{_secret_document().docid}").status_code == 302
    _no_leak(clients["bob"].get("/collections/"))  # shared with mia, not with bob


def test_sharing_with_a_group_by_htmx_answers_the_rows_fragment(clients, collections, people):
    team = make_group("hr-team", people["mia"])
    response = clients["olga"].post(
        f"/collections/{SECRET_NAME}/share/", {"visibility": "shared", "groups": ["hr-team"]}, **HTMX
    )
    body = response.content.decode()
    assert response.status_code == 200 and "<html" not in body
    assert body.lstrip().startswith(f'<div class="sharing small" id="sharing-{collections["secret"].pk}"')
    assert "groups hr-team" in body and 'role="status">saved' in body
    assert SECRET_NAME in visible_collection_names(Access.for_user(people["mia"]))
    people["mia"].groups.remove(team)
    assert SECRET_NAME not in visible_collection_names(Access.for_user(people["mia"]))


def test_a_refused_sharing_is_shown_on_its_row_and_changes_nothing(clients, collections):
    olga = clients["olga"]
    page = olga.post(f"/collections/{SECRET_NAME}/share/", {"visibility": "shared"})
    body = page.content.decode()
    assert page.status_code == 400 and "needs at least one group or person" in body
    assert '<details class="share" open>' in body  # that row's control, opened
    fragment = olga.post(f"/collections/{SECRET_NAME}/share/", {"visibility": "shared"}, **HTMX)
    assert fragment.status_code == 422 and "needs at least one group or person" in fragment.content.decode()
    assert "<html" not in fragment.content.decode()
    bad = olga.post(f"/collections/{SECRET_NAME}/share/", {"visibility": "world", "users": ["nobody"]})
    assert bad.status_code == 400 and 'class="field-error"' in bad.content.decode()
    assert Collection.objects.get(name=SECRET_NAME).visibility == Collection.Visibility.PRIVATE
    assert not AuditEvent.objects.filter(action="collection.share").exists()


def test_choosing_everyone_or_private_drops_the_people_still_selected(clients, collections, people):
    olga = clients["olga"]
    olga.post(f"/collections/{SECRET_NAME}/share/", {"visibility": "shared", "users": ["mia", "bob"]})
    response = olga.post(f"/collections/{SECRET_NAME}/share/", {"visibility": "private", "users": ["mia"]})
    assert response.status_code == 302
    secret = Collection.objects.get(name=SECRET_NAME)
    assert secret.visibility == Collection.Visibility.PRIVATE and not secret.shared_users.exists()


def test_making_someone_elses_collection_private_takes_it_off_the_page(clients, collections, people):
    Collection.objects.filter(name="handbook").update(owner=people["olga"])
    response = clients["bob"].post("/collections/handbook/share/", {"visibility": "private"}, **HTMX)
    assert response.status_code == 200 and response["HX-Redirect"] == "/collections/"
    page = clients["bob"].get("/collections/").content.decode()
    assert "you no longer see that collection" in page and "handbook" not in page
    assert "handbook" in clients["olga"].get("/collections/").content.decode()


def test_sharing_is_for_staff_and_needs_a_csrf_token(clients, collections, people):
    handbook = "/collections/handbook/share/"
    assert clients["mia"].post(handbook, {"visibility": "private"}).status_code == 403
    careful = Client(enforce_csrf_checks=True)
    careful.force_login(people["olga"])
    assert careful.post(handbook, {"visibility": "private"}).status_code == 403
    assert careful.get(handbook).status_code == 405
    assert Collection.objects.get(name="handbook").visibility == Collection.Visibility.EVERYONE


def test_adding_a_private_collection_from_the_collections_page(clients, collections, people, tmp_path):
    diary = tmp_path / "diary"
    diary.mkdir()
    (diary / "today.md").write_text("# Today\n\nNothing happened.\n")
    page = clients["olga"].get("/collections/").content.decode()
    assert '<option value="everyone" selected>' in page and '<option value="private">' in page
    response = clients["olga"].post("/collections/add/", {"path": str(diary), "name": "diary", "visibility": "private"})
    assert response.status_code == 302
    added = Collection.objects.get(name="diary")
    assert (added.visibility, added.owner) == (Collection.Visibility.PRIVATE, people["olga"])
    assert "diary" not in clients["mia"].get("/collections/").content.decode()
    assert "diary" not in clients["bob"].get("/collections/").content.decode()
    assert AuditEvent.objects.get(action="collection.add").detail["visibility"] == "private"


# --- the web UI: tokens ----------------------------------------------------------------------


def test_a_token_from_the_form_is_read_only_for_everything_by_default(clients, collections, people):
    response = clients["mia"].post("/tokens/new/", {"name": "reader"})
    assert response.status_code == 200
    token = ApiToken.objects.get(user=people["mia"])
    assert (token.can_write, list(token.collections.all()), token.expires) == (False, [], None)
    body = _no_leak(response)
    assert "Read-only · all collections you see · never expires" in body


def test_a_token_can_be_given_write_scope_some_collections_and_an_expiry(clients, collections, people):
    response = clients["olga"].post(
        "/tokens/new/", {"name": "agent", "can_write": "on", "collections": [SECRET_NAME], "expires": "30d"}
    )
    assert response.status_code == 200, response.content
    token = ApiToken.objects.get(user=people["olga"])
    assert token.can_write and [c.name for c in token.collections.all()] == [SECRET_NAME]
    assert timedelta(days=29) < token.expires - timezone.now() <= timedelta(days=30)
    listing = clients["olga"].get("/tokens/").content.decode()
    assert "read &amp; write" in listing and SECRET_NAME in listing and "in 4\xa0weeks" in listing


def test_a_token_cannot_name_a_collection_its_user_does_not_see(clients, collections, people):
    assert f'<option value="{SECRET_NAME}">' not in clients["mia"].get("/tokens/").content.decode()
    response = clients["mia"].post("/tokens/new/", {"name": "sneaky", "collections": [SECRET_NAME]})
    assert response.status_code == 400 and 'class="field-error"' in response.content.decode()
    assert not ApiToken.objects.exists()


def test_the_token_list_marks_expired_tokens_and_hides_collections_no_longer_seen(clients, collections, people):
    olga = people["olga"]
    old = token_create(user=olga, name="old", access=Access.for_user(olga), collections=[SECRET_NAME, "handbook"])
    ApiToken.objects.filter(pk=old.token.pk).update(expires=timezone.now() - timedelta(hours=1))
    token_create(user=olga, name="fresh", access=Access.for_user(olga), expires_in="7d")
    listing = clients["olga"].get("/tokens/").content.decode()
    old_row = listing[listing.index("<strong>old</strong>") :].split("</tr>")[0]
    assert old_row.count('<span class="badge error">expired</span>') == 1 and "read-only" in old_row
    fresh_row = listing[listing.index("<strong>fresh</strong>") :].split("</tr>")[0]
    assert "expired" not in fresh_row and ("in 6\xa0days" in fresh_row or "in 1\xa0week" in fresh_row)
    # Once olga no longer sees hrvault (someone made it private to another owner), its name is not shown.
    Collection.objects.filter(name=SECRET_NAME).update(owner=people["bob"])
    old_row = clients["olga"].get("/tokens/").content.decode().split("<strong>old</strong>")[1].split("</tr>")[0]
    assert SECRET_NAME not in old_row and "handbook, 1 you no longer see" in old_row


# --- the admin ------------------------------------------------------------------------------


def _admin_form(collection: Collection, **changes) -> dict:
    form = {
        "name": collection.name,
        "root_path": collection.root_path,
        "mask": collection.mask,
        "ignore_patterns": "[]",
        "text_search_config": collection.text_search_config,
        "visibility": collection.visibility,
        "shared_users": [u.pk for u in collection.shared_users.all()],
        "shared_groups": [g.pk for g in collection.shared_groups.all()],
    }
    form.update(changes)
    return form


def test_staff_without_model_permissions_can_use_the_admin(clients, collections):
    index = clients["bob"].get("/admin/")
    assert index.status_code == 200
    body = index.content.decode()
    for model in ("collection", "document", "job", "pathcontext", "fileproblem", "auditevent", "apitoken"):
        assert f"/admin/indexing/{model}/" in body, model
    assert "/admin/indexing/content/" not in body and "/admin/indexing/llmcache/" not in body
    assert "/admin/indexing/content/" in clients["root"].get("/admin/").content.decode()


def test_the_admin_shows_staff_only_the_collections_they_see(clients, collections, people):
    bob = clients["bob"]
    for url in (
        "/admin/indexing/collection/",
        "/admin/indexing/document/",
        "/admin/indexing/fileproblem/",
        "/admin/indexing/pathcontext/add/",
        "/admin/indexing/job/",
        "/admin/indexing/apitoken/add/",
    ):
        response = bob.get(url)
        assert response.status_code == 200, url
        _no_leak(response)
    searched = bob.get("/admin/indexing/document/", {"q": "salaries"}).content.decode()
    assert "0 results" in searched and SECRET_NAME not in searched
    assert "handbook" in bob.get("/admin/indexing/collection/").content.decode()
    hidden = bob.get(f"/admin/indexing/collection/{collections['secret'].pk}/change/", follow=True)
    assert hidden.redirect_chain[-1][0] == "/admin/"
    _no_leak(hidden)
    document = bob.get(f"/admin/indexing/document/{_secret_document().pk}/change/", follow=True)
    assert document.redirect_chain and _no_leak(document)
    # The owner and superusers see it: the checks above can fail.
    for who in ("olga", "root"):
        assert SECRET_WORD in clients[who].get("/admin/indexing/document/", {"q": SECRET_WORD}).content.decode()
        assert SECRET_NAME in clients[who].get("/admin/indexing/pathcontext/add/").content.decode()


def test_content_and_caches_in_the_admin_are_for_superusers_only(clients, collections):
    for url in ("/admin/indexing/content/", "/admin/indexing/llmcache/"):
        assert clients["olga"].get(url).status_code == 403, url
        assert clients["root"].get(url).status_code == 200, url
    content = _secret_document().content_id
    assert clients["olga"].get(f"/admin/indexing/content/{content}/change/").status_code == 403


def test_sharing_in_the_admin_goes_through_the_service_and_is_audited(clients, collections, people):
    secret = collections["secret"]
    url = f"/admin/indexing/collection/{secret.pk}/change/"
    refused = clients["olga"].post(url, _admin_form(secret, visibility="shared"))
    assert refused.status_code == 200 and "needs at least one group or person" in refused.content.decode()
    assert not AuditEvent.objects.filter(action="collection.share").exists()

    response = clients["olga"].post(url, _admin_form(secret, visibility="shared", shared_users=[people["mia"].pk]))
    assert response.status_code == 302, response.content
    event = AuditEvent.objects.get(action="collection.share")
    assert (event.actor, event.target, event.detail["users"]) == (people["olga"], SECRET_NAME, ["mia"])
    secret.refresh_from_db()
    assert secret.visibility == Collection.Visibility.SHARED and secret.owner == people["olga"]
    assert SECRET_NAME in visible_collection_names(Access.for_user(people["mia"]))
    # Saving again without a change of sharing records nothing new.
    clients["olga"].post(url, _admin_form(secret))
    assert AuditEvent.objects.filter(action="collection.share").count() == 1


def test_renaming_and_removing_in_the_admin_are_audited(clients, collections, people):
    secret = collections["secret"]
    url = f"/admin/indexing/collection/{secret.pk}/change/"
    bad = clients["olga"].post(url, _admin_form(secret, name="has/slash"))
    assert bad.status_code == 200 and "not a valid collection name" in bad.content.decode()
    assert clients["olga"].post(url, _admin_form(secret, name="vault2")).status_code == 302
    assert AuditEvent.objects.get(action="collection.rename").detail == {"old_name": SECRET_NAME}
    deleted = clients["olga"].post(f"/admin/indexing/collection/{secret.pk}/delete/", {"post": "yes"})
    assert deleted.status_code == 302 and not Collection.objects.filter(pk=secret.pk).exists()
    assert AuditEvent.objects.get(action="collection.remove").target == "vault2"


def test_adding_a_shared_collection_in_the_admin(clients, collections, people, tmp_path):
    folder = tmp_path / "projects"
    folder.mkdir()
    form = {
        "name": "projects",
        "root_path": str(folder),
        "mask": "**/*.md",
        "ignore_patterns": "[]",
        "text_search_config": "english",
        "visibility": "shared",
    }
    refused = clients["olga"].post("/admin/indexing/collection/add/", form)
    assert refused.status_code == 200 and "needs at least one group or person" in refused.content.decode()
    assert not Collection.objects.filter(name="projects").exists()  # the adding was undone too
    added = clients["olga"].post("/admin/indexing/collection/add/", {**form, "shared_users": [people["mia"].pk]})
    assert added.status_code == 302, added.content
    projects = Collection.objects.get(name="projects")
    assert projects.owner == people["olga"] and list(projects.shared_users.all()) == [people["mia"]]
    assert list(AuditEvent.objects.order_by("id").values_list("action", flat=True)) == [
        "collection.add",
        "collection.share",
    ]


def test_the_audit_trail_in_the_admin_is_read_only_and_filtered(clients, collections, people):
    from indexing.services.sharing import collection_share

    collection_share(name=SECRET_NAME, access=Access.for_user(people["olga"]), visibility="shared", users=["olga"])
    collection_share(name="handbook", access=Access.for_user(people["olga"]), visibility="everyone")
    listing = clients["olga"].get("/admin/indexing/auditevent/").content.decode()
    assert "collection.share" in listing and SECRET_NAME in listing
    bob = _no_leak(clients["bob"].get("/admin/indexing/auditevent/"))
    assert "handbook" in bob
    assert clients["olga"].get("/admin/indexing/auditevent/add/").status_code == 403
    event = AuditEvent.objects.get(target="handbook")
    view = clients["olga"].get(f"/admin/indexing/auditevent/{event.pk}/change/")
    assert view.status_code == 200 and 'name="_save"' not in view.content.decode()
    assert clients["olga"].post(f"/admin/indexing/auditevent/{event.pk}/change/", {"target": "x"}).status_code == 403
    assert clients["olga"].post(f"/admin/indexing/auditevent/{event.pk}/delete/", {"post": "yes"}).status_code == 403
    assert AuditEvent.objects.filter(pk=event.pk, target="handbook").exists()


def test_a_token_made_in_the_admin_carries_its_scope(clients, collections, people):
    """A superuser makes mia's token (staff make only their own: tests/indexing/test_tokens.py)."""
    soon = timezone.now() + timedelta(days=3)
    form = {
        "user": people["mia"].pk,
        "name": "mia's agent",
        "can_write": "on",
        "collections": [collections["handbook"].pk],
        "expires_0": soon.strftime("%Y-%m-%d"),
        "expires_1": soon.strftime("%H:%M:%S"),
    }
    past = clients["root"].post("/admin/indexing/apitoken/add/", {**form, "expires_0": "2001-01-01"})
    assert past.status_code == 200 and "in the future" in past.content.decode()
    refused = clients["root"].post("/admin/indexing/apitoken/add/", {**form, "collections": [collections["secret"].pk]})
    assert refused.status_code == 200 and not ApiToken.objects.exists()  # mia does not see hrvault
    response = clients["root"].post("/admin/indexing/apitoken/add/", form, follow=True)
    assert response.status_code == 200 and "New API token" in response.content.decode()
    token = ApiToken.objects.get()
    assert token.user == people["mia"] and token.can_write
    assert [c.name for c in token.collections.all()] == ["handbook"]
    assert abs(token.expires - soon) < timedelta(seconds=5)
    event = AuditEvent.objects.get(action="token.create")
    assert (
        event.actor == people["root"] and event.detail["write"] is True and event.detail["collections"] == ["handbook"]
    )
    change = clients["root"].get(f"/admin/indexing/apitoken/{token.pk}/change/").content.decode()
    assert "read &amp; write" in change and "handbook" in change
