"""API tokens in the admin: created through `token_create` (scope, collections, expiry checked and
audited as in the web UI and the CLI), revoked through `token_revoke`; otherwise read-only.
Superusers see and make everyone's tokens; other staff only their own (a token carries its
user's rights)."""

from django import forms
from django.contrib import admin, messages
from django.contrib.postgres.aggregates import ArrayAgg
from django.db.models import Count, Q
from django.utils import timezone

from indexing.access import visible_collections
from indexing.errors import PmdError
from indexing.models import ApiToken
from indexing.services.tokens import token_create, token_revoke
from pmd_site.admin.base import StaffAdmin, admin_access

# Which field of the form a service error concerns, by its code (absent: the form as a whole).
_FIELD_FOR_CODE = {"collection_not_found": "collections"}


class ApiTokenAdminForm(forms.ModelForm):
    """Adding a token is `token_create`: its refusals are this form's errors."""

    access = None  # the admin user's Access, set by StaffAdmin.get_form
    created = None  # the CreatedToken (its raw value is shown once, by ApiTokenAdmin.save_model)

    class Meta:
        model = ApiToken
        fields = ("user", "name", "can_write", "collections", "expires")

    def clean_expires(self):
        expires = self.cleaned_data.get("expires")
        if expires is not None and expires <= timezone.now():
            raise forms.ValidationError("choose a time in the future, or leave it empty for no expiry")
        return expires

    def clean(self):
        cleaned = super().clean()
        if self.instance.pk or self.errors:
            return cleaned
        expires = cleaned.get("expires")
        try:
            self.created = token_create(
                user=cleaned["user"],
                name=cleaned.get("name") or "",
                access=self.access,
                can_write=cleaned.get("can_write", False),
                collections=[c.name for c in cleaned.get("collections") or ()],
                expires_in=expires - timezone.now() if expires else None,
            )
        except PmdError as exc:
            self.add_error(_FIELD_FOR_CODE.get(exc.code), exc.message)
            return cleaned
        self.instance = self.created.token
        return cleaned


@admin.register(ApiToken)
class ApiTokenAdmin(StaffAdmin):
    form = ApiTokenAdminForm
    list_display = ("prefix", "name", "user", "scope", "expires", "last_used", "revoked")
    list_filter = ("revoked", "can_write")
    search_fields = ("name", "prefix", "user__username")
    filter_horizontal = ("collections",)
    actions = ["revoke_selected"]

    def visible_rows(self, rows, collections, request):
        return rows.filter(user=request.user)  # not a superuser: their own tokens only

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        # Whom a token may be for: anyone for a superuser, otherwise only themselves (token_create
        # refuses anyone else on save, whatever the form posted).
        if db_field.name == "user" and not request.user.is_superuser:
            kwargs["queryset"] = db_field.related_model.objects.filter(pk=request.user.pk)
            kwargs["initial"] = request.user.pk
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def get_fields(self, request, obj=None):
        if obj is None:
            return ("user", "name", "can_write", "collections", "expires")
        return ("user", "name", "prefix", "scope", "collection_names", "expires", "created", "last_used", "revoked")

    def get_readonly_fields(self, request, obj=None):
        # A token's scope is fixed when it is made (make another one to change it); revoking is the action.
        if obj is None:
            return ()
        return ("user", "prefix", "scope", "collection_names", "expires", "created", "last_used", "revoked")

    @admin.display(description="scope", boolean=False, ordering="can_write")
    def scope(self, obj):
        return "read & write" if obj.can_write else "read-only"

    def get_queryset(self, request):
        # The names of a token's collections that the viewer sees (the others are only counted).
        seen = visible_collections(admin_access(request)).values("pk")
        return (
            super()
            .get_queryset(request)
            .annotate(
                n_collections=Count("collections", distinct=True),
                seen_collections=ArrayAgg(
                    "collections__name", filter=Q(collections__in=seen), distinct=True, default=[]
                ),
            )
        )

    @admin.display(description="collections")
    def collection_names(self, obj):
        if not obj.n_collections:
            return "all its user sees"
        shown = sorted(obj.seen_collections)
        return ", ".join(shown) + (" (and collections you do not see)" if len(shown) < obj.n_collections else "")

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if form.created is not None:
            messages.warning(request, f"New API token (copy it now, it is not shown again): {form.created.raw}")

    @admin.action(description="Revoke selected tokens")
    def revoke_selected(self, request, queryset):
        active = list(queryset.filter(revoked__isnull=True))
        for token in active:
            token_revoke(token=token.pk, access=admin_access(request))  # the service the CLI and the web UI revoke with
        messages.info(request, f"revoked {len(active)} token(s)")
