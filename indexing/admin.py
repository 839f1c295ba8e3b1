"""Django admin for the index: the same services and job starters as the web UI and CLI."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.db.models import Count, Q
from django.utils.html import format_html

from indexing.models import Collection, Content, Document, FileProblem, Job, LLMCache, PathContext
from indexing.services.background import embedding_request, index_request


class CollectionAdminForm(forms.ModelForm):
    """Adding or moving a collection here obeys PMD_COLLECTION_ROOTS, like the web UI and API."""

    class Meta:
        model = Collection
        fields = "__all__"

    def clean_root_path(self):
        from django.conf import settings

        from indexing.services.collections import CollectionError, collection_root_check

        value = self.cleaned_data["root_path"]
        if self.instance.pk and value == self.instance.root_path:
            return value  # unchanged: a folder added from the CLI stays editable (the scanner has its own check)
        try:
            root = collection_root_check(path=value, allowed_roots=settings.PMD_COLLECTION_ROOTS)
        except CollectionError as exc:
            raise forms.ValidationError(str(exc)) from None
        if not root.is_dir():
            raise forms.ValidationError(f"{root} is not an existing folder")
        return str(root)


@admin.register(Collection)
class CollectionAdmin(admin.ModelAdmin):
    form = CollectionAdminForm
    list_display = ("name", "root_path", "mask", "active_documents", "last_indexed_at")
    search_fields = ("name", "root_path")
    readonly_fields = ("created_at", "updated_at", "last_indexed_at")
    actions = ["reindex", "embed"]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(
            n_active=Count("documents", filter=Q(documents__active=True))
        )

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
