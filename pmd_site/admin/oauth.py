"""OAuth clients and grants in the admin: looked at, and grants revoked through the service
(indexing.services.oauth) the web UI uses. Nothing is added or edited here: clients register
themselves, and grants come from members' consent. Superusers see every grant; other staff their own."""

from django.contrib import admin, messages

from indexing.errors import PmdError
from indexing.models import OAuthClient, OAuthGrant
from indexing.services.oauth import oauth_grant_revoke
from pmd_site.admin.base import StaffAdmin, admin_access


class ReadOnlyAdmin(StaffAdmin):
    staff_may_change = False

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(OAuthClient)
class OAuthClientAdmin(ReadOnlyAdmin):
    list_display = ("name", "client_id", "auth_method", "created")
    search_fields = ("name", "client_id")
    fields = ("name", "client_id", "auth_method", "redirect_uris", "metadata", "created")
    readonly_fields = fields

    def has_module_permission(self, request):
        return request.user.is_active and request.user.is_superuser

    def has_view_permission(self, request, obj=None):
        return request.user.is_active and request.user.is_superuser


@admin.register(OAuthGrant)
class OAuthGrantAdmin(ReadOnlyAdmin):
    list_display = ("client", "user", "scope", "created", "refreshed", "revoked")
    list_filter = ("revoked",)
    search_fields = ("client__name", "user__username")
    fields = ("client", "user", "scope", "created", "refreshed", "revoked")
    readonly_fields = fields
    actions = ["revoke_selected"]

    def visible_rows(self, rows, collections, request):
        return rows.filter(user=request.user)  # not a superuser: their own grants only

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("client", "user", "token")

    @admin.display(description="scope")
    def scope(self, obj):
        return "read & write" if obj.token.can_write else "read-only"

    @admin.action(description="Revoke selected grants")
    def revoke_selected(self, request, queryset):
        revoked = 0
        for grant in queryset.filter(revoked__isnull=True):
            try:
                oauth_grant_revoke(grant_id=grant.pk, access=admin_access(request))
            except PmdError as exc:
                messages.error(request, exc.message)
                continue
            revoked += 1
        messages.info(request, f"revoked {revoked} grant(s)")
