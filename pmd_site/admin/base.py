"""What every pmd admin page shares: staff may use them, limited to the collections they see;
content shared across collections is for superusers only. Used by pmd_site.admin.indexing and pmd_site.admin.tokens."""

from django.contrib import admin

from indexing.access import Access, visible_collections
from indexing.models import Collection


def admin_access(request) -> Access:
    """The admin user, as the services see them."""
    return Access.for_user(request.user)


class StaffAdmin(admin.ModelAdmin):
    """A pmd model any staff account may use; a non-superuser sees only the rows of the
    collections they see (`visible_rows`), and collection choices are only those."""

    staff_may_change = True  # False: staff who are not superusers may only look

    @staticmethod
    def _staff(request) -> bool:
        return request.user.is_active and request.user.is_staff

    def _may_change(self, request) -> bool:
        return self._staff(request) and (self.staff_may_change or request.user.is_superuser)

    def has_module_permission(self, request):
        return self._staff(request)

    def has_view_permission(self, request, obj=None):
        return self._staff(request)

    def has_add_permission(self, request):
        return self._may_change(request)

    def has_change_permission(self, request, obj=None):
        return self._may_change(request)

    def has_delete_permission(self, request, obj=None):
        return self._may_change(request)

    def get_queryset(self, request):
        rows = super().get_queryset(request)
        if request.user.is_superuser:
            return rows
        return self.visible_rows(rows, visible_collections(admin_access(request)), request)

    def visible_rows(self, rows, collections, request):
        """`rows` cut down to what belongs to `collections` (a queryset of the visible ones)."""
        return rows

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)
        return type(form.__name__, (form,), {"access": admin_access(request)})

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.related_model is Collection:
            kwargs["queryset"] = visible_collections(admin_access(request))
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        if db_field.related_model is Collection:
            kwargs["queryset"] = visible_collections(admin_access(request))
        return super().formfield_for_manytomany(db_field, request, **kwargs)


class SuperuserOnlyAdmin(admin.ModelAdmin):
    """Content and caches are shared by every collection holding the same text: nothing ties a
    row to one collection's visibility, so only superusers see them."""

    @staticmethod
    def _superuser(request) -> bool:
        return request.user.is_active and request.user.is_superuser

    def has_module_permission(self, request):
        return self._superuser(request)

    def has_view_permission(self, request, obj=None):
        return self._superuser(request)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return self._superuser(request)

    def has_delete_permission(self, request, obj=None):
        return self._superuser(request)
