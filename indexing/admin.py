"""Django admin for the index: the same services and job starters as the web UI and CLI."""

from __future__ import annotations

from functools import partial

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.db import transaction
from django.db.models import Count, Q
from django.utils.html import format_html

from indexing.errors import PmdError
from indexing.models import (
    Collection,
    Content,
    Document,
    FileProblem,
    Job,
    LLMCache,
    PathContext,
)
from indexing.access import Access
from indexing.services.background import embedding_request, index_request
from indexing.services.collections import CollectionError, collection_root_check
from indexing.services.refresh import collection_add

# Which field of the form a service error concerns, by its code (absent: the form as a whole).
_FIELD_FOR_CODE = {"collection_path_refused": "root_path", "collection_exists": "name"}


class CollectionAdminForm(forms.ModelForm):
    """Adding a collection here is the service `collection_add`, as in the web UI and the API:
    the same checks (PMD_COLLECTION_ROOTS among them) and the same side effects. Moving one
    obeys PMD_COLLECTION_ROOTS too."""

    access = None  # the admin user's Access, set by CollectionAdmin.get_form

    class Meta:
        model = Collection
        fields = "__all__"

    def clean_root_path(self):
        value = self.cleaned_data["root_path"]
        if not self.instance.pk:
            return value  # adding: collection_add checks the folder (see clean)
        if value == self.instance.root_path:
            return value  # unchanged: a folder added from the CLI stays editable (the scanner has its own check)
        try:
            root = collection_root_check(path=value, allowed_roots=settings.PMD_COLLECTION_ROOTS)
        except CollectionError as exc:
            raise forms.ValidationError(exc.message) from None
        if not root.is_dir():
            raise forms.ValidationError(f"{root} is not an existing folder")
        return str(root)

    def clean(self):
        """Adding: register the collection through the service, so its refusals are this form's errors.

        The admin saves inside one transaction (a later failure undoes this too); the index job
        is asked for once it commits (CollectionAdmin.save_model)."""
        cleaned = super().clean()
        if self.instance.pk or self.errors:
            return cleaned
        try:
            added = collection_add(
                path=cleaned["root_path"], name=cleaned["name"], mask=cleaned.get("mask") or None,
                ignore_patterns=cleaned.get("ignore_patterns") or None,
                text_search_config=cleaned.get("text_search_config") or None,
                allowed_roots=settings.PMD_COLLECTION_ROOTS, index="no", access=self.access,
                visibility=cleaned.get("visibility") or Collection.Visibility.EVERYONE,
            )
        except PmdError as exc:
            self.add_error(_FIELD_FOR_CODE.get(exc.code), exc.message)
            return cleaned
        self.instance = added.collection
        cleaned["root_path"] = added.collection.root_path  # the resolved folder, as the service stored it
        return cleaned


@admin.register(Collection)
class CollectionAdmin(admin.ModelAdmin):
    form = CollectionAdminForm
    list_display = ("name", "root_path", "mask", "active_documents", "last_indexed_at")
    search_fields = ("name", "root_path")
    readonly_fields = ("created_at", "updated_at", "last_indexed_at")
    actions = ["reindex", "embed"]

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)
        return type(form.__name__, (form,), {"access": Access.for_user(request.user)})

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(
            n_active=Count("documents", filter=Q(documents__active=True))
        )

    def save_model(self, request, obj, form, change):
        if change:
            super().save_model(request, obj, form, change)
            return
        # Registered by the form through collection_add; its index job (as the web UI's and the API's
        # index="job") is asked for when the admin's transaction commits: a worker or a background
        # thread asked earlier would not see the collection yet.
        transaction.on_commit(partial(index_request, collection=obj, created_by=request.user))
        messages.info(request, f"indexing of {obj.name} started; see Jobs")

    @admin.display(description="documents", ordering="n_active")
    def active_documents(self, obj):
        return obj.n_active

    @admin.action(description="Reindex selected collections")
    def reindex(self, request, queryset):
        for collection in queryset:
            index_request(collection=collection, created_by=request.user)
        self.message_user(request, f"indexing started for {queryset.count()} collection(s); see Jobs", messages.SUCCESS)

    @admin.action(description="Embed selected collections")
    def embed(self, request, queryset):
        embedding_request(collections=[c.name for c in queryset], created_by=request.user)
        self.message_user(request, f"embedding started for {queryset.count()} collection(s); see Jobs", messages.SUCCESS)


@admin.register(PathContext)
class PathContextAdmin(admin.ModelAdmin):
    list_display = ("target", "text")
    list_filter = ("collection",)
    search_fields = ("path_prefix", "text")


@admin.register(Document)
class DocumentAdmin(admin.ModelAdmin):
    list_display = ("path", "collection", "title", "docid", "active", "size", "updated_at")
    list_filter = ("collection", "active")
    search_fields = ("=docid", "path", "title")
    list_select_related = ("collection",)
    readonly_fields = ("collection", "path", "title", "docid", "content_link", "active", "mtime", "size",
                       "frontmatter", "created_at", "updated_at", "body")
    exclude = ("content",)
    show_full_result_count = False

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
        return format_html('<pre style="white-space:pre-wrap;max-height:40rem;overflow:auto">{}</pre>', obj.content.body)


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ("created_at", "kind", "collection", "state", "progress", "created_by", "message")
    list_filter = ("kind", "state")
    readonly_fields = [f.name for f in Job._meta.fields]

    def has_add_permission(self, request):
        return False

    @admin.display(description="progress")
    def progress(self, obj):
        return f"{obj.done}/{obj.total} ({obj.percent}%)"


@admin.register(FileProblem)
class FileProblemAdmin(admin.ModelAdmin):
    list_display = ("path", "collection", "severity", "message", "created_at")
    list_filter = ("severity", "collection")
    search_fields = ("path", "message")
    readonly_fields = ("collection", "path", "severity", "message", "created_at")

    def has_add_permission(self, request):
        return False


@admin.register(LLMCache)
class LLMCacheAdmin(admin.ModelAdmin):
    list_display = ("key", "kind", "created_at")
    list_filter = ("kind",)
    readonly_fields = ("key", "kind", "value", "created_at")

    def has_add_permission(self, request):
        return False


@admin.register(Content)
class ContentAdmin(admin.ModelAdmin):
    list_display = ("hash", "size", "created_at")
    search_fields = ("=hash",)
    readonly_fields = ("hash", "size", "created_at", "body")

    def has_add_permission(self, request):
        return False
