from django.contrib import admin, messages

from indexing.access import Access
from search.api_tokens import token_create, token_revoke
from search.models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("prefix", "name", "user", "created", "last_used", "revoked")
    list_filter = ("revoked",)
    search_fields = ("name", "prefix", "user__username")
    readonly_fields = ("prefix", "created", "last_used")
    fields = ("user", "name", "prefix", "created", "last_used", "revoked")
    actions = ["revoke_selected"]

    def save_model(self, request, obj, form, change):
        if change:
            super().save_model(request, obj, form, change)
            return
        created = token_create(user=obj.user, name=obj.name, access=Access.for_user(request.user))
        obj.pk = created.token.pk
        obj.__dict__.update({k: getattr(created.token, k) for k in ("digest", "prefix", "created")})
        messages.warning(request, f"New API token (copy it now, it is not shown again): {created.raw}")

    @admin.action(description="Revoke selected tokens")
    def revoke_selected(self, request, queryset):
        active = list(queryset.filter(revoked__isnull=True))
        for token in active:
            token_revoke(token=token.pk, access=Access.for_user(request.user))  # the service the CLI and the web UI revoke with
        messages.info(request, f"revoked {len(active)} token(s)")
