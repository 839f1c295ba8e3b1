"""Django admin for the index: the same services and job starters as the web UI and CLI.

Every staff account may use it (as the web UI's staff rules: `pmd user create --staff` grants no
Django model permissions), and sees only what `visible_collections` lets it see; superusers see
everything. Content rows (and the caches) are shared between collections, so they are for
superusers only. Changes that matter for access (adding, renaming, sharing, removing a
collection; contexts) leave the same audit trail as from every other face.
"""

from __future__ import annotations

from functools import partial

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.db import transaction
from django.db.models import Count, Q
from django.utils.html import format_html

from indexing.errors import InvalidCollection, PmdError
from indexing.language import LANGUAGES
from indexing.models import (
    AuditEvent,
    Collection,
    Content,
    Document,
    ExternalIdentity,
    FileProblem,
    Job,
    LLMCache,
    PathContext,
)
from indexing.selectors import jobs_visible_to
from indexing.services.audit import audit_record
from indexing.services.background import embedding_request
from indexing.services.collections import (
    collection_configure,
    collection_remove,
    collection_rename,
    collection_root_check,
)
from indexing.services.refresh import collection_add, collections_refresh
from indexing.services.sharing import collection_share, collection_writers
from pmd_site.admin.base import StaffAdmin, SuperuserOnlyAdmin, admin_access

# Which field of the form a service error concerns, by its code (absent: the form as a whole).
_FIELD_FOR_CODE = {"collection_path_refused": "root_path", "collection_exists": "name", "invalid_sharing": "visibility"}
_SHARING_FIELDS = {"visibility", "shared_users", "shared_groups"}


class CollectionAdminForm(forms.ModelForm):
    """Adding a collection here is the service `collection_add`, as in the web UI and the API:
    the same checks (PMD_COLLECTION_ROOTS among them) and the same side effects. Moving one
    obeys PMD_COLLECTION_ROOTS too; renaming and sharing go through `collection_rename` and
    `collection_share`, so their rules and the audit trail are the same as everywhere."""

    access = None  # the admin user's Access, set by CollectionAdmin.get_form

    class Meta:
        model = Collection
        fields = "__all__"
        # A rename onto a taken name is refused by the model's own check first: the service's words,
        # the same whether or not the admin user sees the collection holding it.
        error_messages = {"name": {"unique": "this collection name is not available: choose another"}}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.saved_name = self.instance.name if self.instance.pk else None
        if "title_from" in self.fields:  # left empty when adding: chosen by the folder (an Obsidian vault: file names)
            self.fields["title_from"].required = False
            if not self.instance.pk:
                self.fields["title_from"].choices = [
                    ("", "automatic: the file name in an Obsidian vault, else headings"),
                    *Collection.TitleFrom.choices,
                ]
                self.initial["title_from"] = ""
        if not self.instance.pk and "text_search_config" in self.fields:  # adding: the language chooses it
            self.fields["text_search_config"].required = False
            self.initial["text_search_config"] = ""

    language = forms.ChoiceField(
        required=False,
        label="Language",
        choices=[("", "automatic: detected from the notes")]
        + [(code, name) for code, (name, _) in LANGUAGES.items() if code != "mixed"],
        help_text="for stemming and stop words in keyword search; a text search configuration, if given, wins",
    )

    def clean_title_from(self):
        return self.cleaned_data.get("title_from") or (self.instance.title_from if self.instance.pk else "")

    def clean_root_path(self):
        value = self.cleaned_data["root_path"]
        if not self.instance.pk:
            return value  # adding: collection_add checks the folder (see clean)
        if value == self.instance.root_path:
            return value  # unchanged: a folder added from the CLI stays editable (the scanner has its own check)
        try:  # the rules of adding one: a move over a hidden collection's folder would show it too
            root = collection_root_check(
                path=value, allowed_roots=settings.PMD_COLLECTION_ROOTS, access=self.access, moving=self.instance
            )
        except InvalidCollection as exc:
            raise forms.ValidationError(exc.message) from None
        return str(root)

    def _share(self, name: str, cleaned: dict):
        return collection_share(
            name=name,
            access=self.access,
            visibility=cleaned["visibility"],
            users=[u.get_username() for u in cleaned.get("shared_users") or ()],
            groups=[g.name for g in cleaned.get("shared_groups") or ()],
        )

    def clean(self):
        """Adding: register the collection (and share it) through the services, so their refusals
        are this form's errors; a refused sharing undoes the adding.

        The admin saves inside one transaction (a later failure undoes this too); the index job
        is asked for once it commits (CollectionAdmin.save_model)."""
        cleaned = super().clean()
        if self.instance.pk or self.errors:
            return cleaned
        visibility = cleaned.get("visibility") or Collection.Visibility.EVERYONE
        try:
            with transaction.atomic():
                added = collection_add(
                    path=cleaned["root_path"],
                    name=cleaned["name"],
                    mask=cleaned.get("mask") or None,
                    ignore_patterns=cleaned.get("ignore_patterns") or None,
                    text_search_config=cleaned.get("text_search_config") or None,
                    language=cleaned.get("language") or None,
                    title_from=cleaned.get("title_from") or None,
                    transclude=bool(cleaned.get("transclude")),
                    allowed_roots=settings.PMD_COLLECTION_ROOTS,
                    index="no",
                    access=self.access,
                    visibility=visibility,
                )
                if (
                    visibility == Collection.Visibility.SHARED
                    or cleaned.get("shared_users")
                    or cleaned.get("shared_groups")
                ):
                    self._share(added.collection.name, cleaned)
                    added.collection.refresh_from_db()
        except PmdError as exc:
            self.add_error(_FIELD_FOR_CODE.get(exc.code), exc.message)
            return cleaned
        self.instance = added.collection
        cleaned["root_path"] = added.collection.root_path  # the resolved folder, as the service stored it
        cleaned["title_from"] = added.collection.title_from  # as the service chose it
        cleaned["text_search_config"] = added.collection.text_search_config  # from the language, as chosen
        return cleaned

    def _post_clean(self):
        """Changing: once the model's own checks pass, rename and share through the services
        (both undone together when one refuses). The admin then saves the same values."""
        super()._post_clean()
        if self.saved_name is None or self.errors:
            return
        renamed = "name" in self.changed_data and self.cleaned_data["name"] != self.saved_name
        shared = bool(_SHARING_FIELDS & set(self.changed_data))
        if not (renamed or shared):
            return
        try:
            with transaction.atomic():
                name = self.saved_name
                if renamed:
                    name = collection_rename(name=name, new_name=self.cleaned_data["name"], access=self.access).name
                if shared:
                    self.instance.owner = self._share(name, self.cleaned_data).collection.owner
        except PmdError as exc:
            renaming_refused = renamed and exc.code == "invalid_collection"  # a name the service does not take
            self.add_error("name" if renaming_refused else _FIELD_FOR_CODE.get(exc.code), exc.message)


@admin.register(Collection)
class CollectionAdmin(StaffAdmin):
    form = CollectionAdminForm
    list_display = ("name", "visibility", "owner", "root_path", "mask", "active_documents", "last_indexed_at")
    list_filter = ("visibility",)
    search_fields = ("name", "root_path")
    readonly_fields = ("owner", "created_at", "updated_at", "last_indexed_at", "reading")
    filter_horizontal = ("shared_users", "shared_groups", "writer_users", "writer_groups")
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "name",
                    "root_path",
                    "mask",
                    "ignore_patterns",
                    "text_search_config",
                    "title_from",
                    "transclude",
                )
            },
        ),
        (
            "Who sees it",
            {
                "fields": ("visibility", "owner", "shared_users", "shared_groups"),
                "description": "Everyone signed in, the chosen groups and people, or only its owner "
                "(superusers see every collection).",
            },
        ),
        (
            "Who writes notes",
            {
                "fields": ("writable", "writer_users", "writer_groups"),
                "description": "Read-only unless writable; then its owner, superusers and these people and "
                "groups (among those who see it) may write notes through pmd with a write token.",
            },
        ),
        ("Dates", {"fields": ("created_at", "updated_at", "last_indexed_at")}),
    )
    actions = ["reindex", "embed"]

    def get_fieldsets(self, request, obj=None):
        """Adding: the notes' language too (afterwards the text search configuration says it)."""
        if obj is not None:
            return self.fieldsets
        first, *rest = self.fieldsets
        return ((first[0], {**first[1], "fields": (*first[1]["fields"], "language")}), *rest)

    def visible_rows(self, rows, collections, request):
        return rows.filter(pk__in=collections.values("pk"))

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(n_active=Count("documents", filter=Q(documents__active=True)))

    def save_model(self, request, obj, form, change):
        if change:
            if "transclude" in form.changed_data:  # through the service: audited, keyword passages rewritten
                collection_configure(name=obj.name, access=admin_access(request), transclude=obj.transclude)
            super().save_model(request, obj, form, change)
            return
        # Registered by the form through collection_add; its index job (as the web UI's and the API's
        # index="job") is asked for when the admin's transaction commits: a worker or a background
        # thread asked earlier would not see the collection yet.
        transaction.on_commit(partial(collections_refresh, names=[obj.name], in_job=True, access=admin_access(request)))
        messages.info(request, f"indexing of {obj.name} started; see Jobs")

    def save_related(self, request, form, formsets, change):
        """Who writes, through the service (audited), once the form saved its lists."""
        super().save_related(request, form, formsets, change)
        if {"writable", "writer_users", "writer_groups"} & set(form.changed_data):
            obj = form.instance
            collection_writers(
                name=obj.name,
                access=admin_access(request),
                writable=obj.writable,
                users=[u.get_username() for u in obj.writer_users.all()],
                groups=[g.name for g in obj.writer_groups.all()],
            )

    def get_deleted_objects(self, objs, request):
        # Its documents, contexts and problems go with it: the service decides, not their admins' permissions.
        deleted, counts, _, protected = super().get_deleted_objects(objs, request)
        return deleted, counts, set(), protected

    def delete_model(self, request, obj):
        collection_remove(name=obj.name, access=admin_access(request))  # audited, as from the CLI and the API

    def delete_queryset(self, request, queryset):
        for collection in queryset:
            self.delete_model(request, collection)

    @admin.display(description="documents", ordering="n_active")
    def active_documents(self, obj):
        return obj.n_active

    @admin.action(description="Reindex selected collections")
    def reindex(self, request, queryset):
        for collection in queryset:
            collections_refresh(names=[collection.name], in_job=True, access=admin_access(request))
        self.message_user(request, f"indexing started for {queryset.count()} collection(s); see Jobs", messages.SUCCESS)

    @admin.action(description="Embed selected collections")
    def embed(self, request, queryset):
        embedding_request(collections=[c.name for c in queryset], created_by=request.user)
        self.message_user(
            request, f"embedding started for {queryset.count()} collection(s); see Jobs", messages.SUCCESS
        )


@admin.register(PathContext)
class PathContextAdmin(StaffAdmin):
    list_display = ("target", "text")
    list_filter = (("collection", admin.RelatedOnlyFieldListFilter),)
    search_fields = ("path_prefix", "text")

    def visible_rows(self, rows, collections, request):
        return rows.filter(Q(collection__isnull=True) | Q(collection__in=collections.values("pk")))

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        audit_record(
            admin_access(request), "context.change" if change else "context.add", obj.target, text=obj.text[:500]
        )

    def delete_model(self, request, obj):
        target = obj.target
        super().delete_model(request, obj)
        audit_record(admin_access(request), "context.remove", target)

    def delete_queryset(self, request, queryset):
        for context in queryset.select_related("collection"):
            self.delete_model(request, context)


@admin.register(Document)
class DocumentAdmin(StaffAdmin):
    staff_may_change = False
    list_display = ("path", "collection", "title", "docid", "active", "size", "updated_at")
    list_filter = (("collection", admin.RelatedOnlyFieldListFilter), "active")
    search_fields = ("=docid", "path", "title")
    list_select_related = ("collection",)
    readonly_fields = (
        "collection",
        "path",
        "title",
        "docid",
        "content_link",
        "active",
        "mtime",
        "size",
        "frontmatter",
        "created_at",
        "updated_at",
        "body",
    )
    exclude = ("content",)
    show_full_result_count = False

    def visible_rows(self, rows, collections, request):
        return rows.filter(collection__in=collections.values("pk"))

    def get_search_results(self, request, queryset, search_term):
        # "#abc123" (as printed by the CLI) searches by docid.
        return super().get_search_results(request, queryset, search_term.lstrip("#"))

    def has_add_permission(self, request):
        return False  # documents come from indexing, never from hand edits

    @admin.display(description="content")
    def content_link(self, obj):
        return obj.content_id

    @admin.display(description="body")
    def body(self, obj):
        return format_html(
            '<pre style="white-space:pre-wrap;max-height:40rem;overflow:auto">{}</pre>', obj.content.body
        )


@admin.register(Job)
class JobAdmin(StaffAdmin):
    staff_may_change = False
    list_display = ("created_at", "kind", "collection", "state", "progress", "created_by", "message_text")
    list_filter = ("kind", "state")

    class Media:
        css = {"all": ("pmd/admin.css",)}  # the Message column keeps a readable width

    readonly_fields = [f.name for f in Job._meta.fields]

    def visible_rows(self, rows, collections, request):
        return rows.filter(pk__in=jobs_visible_to(admin_access(request)).values("pk"))

    def has_add_permission(self, request):
        return False

    @admin.display(description="progress")
    def progress(self, obj):
        return f"{obj.done}/{obj.total} ({obj.percent}%)"

    @admin.display(description="message")
    def message_text(self, obj):
        """Readable in the list: a column wide enough to read, long messages shortened (whole in the title)."""
        text = obj.message if len(obj.message) <= 240 else obj.message[:239] + "…"
        return format_html('<span class="job-message" title="{}">{}</span>', obj.message, text)


@admin.register(FileProblem)
class FileProblemAdmin(StaffAdmin):
    staff_may_change = False
    list_display = ("path", "collection", "severity", "message", "created_at")
    list_filter = ("severity", ("collection", admin.RelatedOnlyFieldListFilter))
    search_fields = ("path", "message")
    readonly_fields = ("collection", "path", "severity", "message", "created_at")

    def visible_rows(self, rows, collections, request):
        return rows.filter(collection__in=collections.values("pk"))

    def has_add_permission(self, request):
        return False


@admin.register(LLMCache)
class LLMCacheAdmin(SuperuserOnlyAdmin):
    list_display = ("key", "kind", "created_at")
    list_filter = ("kind",)
    readonly_fields = ("key", "kind", "value", "created_at")

    def has_add_permission(self, request):
        return False


@admin.register(Content)
class ContentAdmin(SuperuserOnlyAdmin):
    list_display = ("hash", "size", "created_at")
    search_fields = ("=hash",)
    readonly_fields = ("hash", "size", "created_at", "body")

    def has_add_permission(self, request):
        return False


@admin.register(AuditEvent)
class AuditEventAdmin(StaffAdmin):
    """The audit trail, read-only. A non-superuser sees the events of the collections they see
    (and those about tokens and groups), without the details (they can name other collections)."""

    list_display = ("at", "actor_label", "action", "target")
    list_filter = ("action",)
    search_fields = ("target",)
    date_hierarchy = "at"

    def get_fields(self, request, obj=None):
        fields = ["at", "actor_label", "action", "target"]
        return fields + ["detail"] if request.user.is_superuser else fields

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def visible_rows(self, rows, collections, request):
        names = list(collections.values_list("name", flat=True))
        rows = rows.exclude(Q(action__startswith="collection.") & ~Q(target__in=names))
        seen_contexts = Q(target="/")
        for name in names:
            seen_contexts |= Q(target__startswith=f"pmd://{name}/")
        return rows.exclude(Q(action__startswith="context.") & ~seen_contexts)


@admin.register(ExternalIdentity)
class ExternalIdentityAdmin(admin.ModelAdmin):
    """Which identity provider's person signs in as which account. Superusers only, by
    Django's permissions; deleting a row unlinks the person, `pmd user link` links an existing
    account (a provider's sign-in never takes one by its name)."""

    list_display = ("user", "provider", "subject", "last_sign_in")
    list_filter = ("provider",)
    search_fields = ("subject", "user__username")
    readonly_fields = ("provider", "subject", "user", "created", "last_sign_in")

    def has_add_permission(self, request):
        return False
