"""Accounts of the web UI, the API and /mcp: create, set a password, lift a lockout, make sure an
admin exists. Every face (`pmd user`, `pmd up`) changes accounts here, so each change is audited
the same way and checked by the same rules as the admin's and the sign-in form's."""

from __future__ import annotations

import secrets
import unicodedata
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from indexing import errors
from indexing.access import Access
from indexing.models import ExternalIdentity
from indexing.services.audit import audit_record
from indexing.services.throttling import reset_token_failures


def _user(username: str):
    user_model = get_user_model()
    try:
        return user_model.objects.get(**{user_model.USERNAME_FIELD: username})
    except user_model.DoesNotExist:
        raise errors.UserNotFound(f"no account named '{username}'") from None


def _check_username(username: str) -> str:
    """The rules the admin and the sign-in form apply (letters, digits and @ . + - _), not only the
    database's: a name the web cannot take is refused everywhere."""
    user_model = get_user_model()
    username = username.strip()
    if not username:
        raise errors.InvalidAccount("the username is empty")
    try:
        user_model._meta.get_field(user_model.USERNAME_FIELD).run_validators(username)
    except ValidationError as e:
        raise errors.InvalidAccount(f"{username!r} cannot be a username: {' '.join(e.messages)}") from None
    return username


def _check_password(password: str, user) -> str:
    if not password:
        raise errors.InvalidAccount("the password is empty")
    try:
        validate_password(password, user)
    except ValidationError as exc:
        raise errors.InvalidAccount("password rejected: " + " ".join(exc.messages)) from None
    return password


def username_available(*, username: str) -> str:
    """The cleaned name if a new account may take it (a face asks before prompting for a password)."""
    user_model = get_user_model()
    username = _check_username(username)
    if user_model.objects.filter(**{user_model.USERNAME_FIELD: username}).exists():
        raise errors.AccountExists(name=username)
    return username


def user_create(
    *, username: str, password: str, access: Access, email: str = "", staff: bool = False, superuser: bool = False
):
    """A new account (`superuser` implies staff); AccountExists when the name is taken."""
    user_model = get_user_model()
    username = username_available(username=username)
    _check_password(password, user_model(**{user_model.USERNAME_FIELD: username, "email": email}))
    with transaction.atomic():
        if superuser:
            user = user_model.objects.create_superuser(username, email=email, password=password)
        else:
            user = user_model.objects.create_user(username, email=email, password=password, is_staff=staff)
        audit_record(access, "user.create", username, role=user_role(user))
    return user


def user_role(user) -> str:
    return "superuser" if user.is_superuser else "staff" if user.is_staff else "member"


def user_password_set(*, username: str, password: str, access: Access, validate: bool = True):
    """Set an account's password and lift its lockout (the person locked out is often the one
    whose password is being reset). `validate=False` only for a password pmd generated."""
    user = _user(username)
    user.set_password(_check_password(password, user) if validate else password)
    with transaction.atomic():
        user.save(update_fields=["password"])
        audit_record(access, "user.password", user.get_username())
    _login_failures_clear(user.get_username())
    return user


def user_unlock(*, username: str, access: Access, addresses: tuple[str, ...] = ()) -> int:
    """Forget the failed logins of `username` (and of `addresses`: logins and API tokens), which
    lifts their lockout; returns how many failure records went."""
    cleared = _login_failures_clear(username, addresses)
    audit_record(access, "user.unlock", username, addresses=list(addresses), cleared=cleared)
    return cleared


def _login_failures_clear(username: str, addresses: tuple[str, ...] = ()) -> int:
    from axes.utils import reset  # noqa: PLC0415 - start-up time of the CLI: django-axes loads when needed

    cleared = reset(username=username)
    for address in addresses:
        cleared += reset(ip=address) + reset_token_failures(address)
    return cleared


@dataclass
class AdminAccount:
    username: str
    password: str | None = None  # set only when just generated: shown once


def admin_ensure(*, username: str, access: Access, reset: bool = False) -> AdminAccount:
    """An admin account to sign in with (`pmd up`): `username`, or an existing superuser; created
    (or, with `reset`, given a new password) with a generated password when needed."""
    user_model = get_user_model()
    user = user_model.objects.filter(**{user_model.USERNAME_FIELD: username}).first()
    if user is None and not reset and user_model.objects.filter(is_superuser=True).exists():
        return AdminAccount(user_model.objects.filter(is_superuser=True).order_by("pk").first().get_username())
    if user is not None and not reset:
        return AdminAccount(username)
    password = secrets.token_urlsafe(12)
    if user is None:
        try:
            with transaction.atomic():
                user_model.objects.create_superuser(username, email="", password=password)
                audit_record(access, "user.create", username, role="superuser", generated_password=True)
        except IntegrityError:
            # Another `pmd up` on the same database created it a moment ago (and showed its password).
            if not user_model.objects.filter(**{user_model.USERNAME_FIELD: username}).exists():
                raise
            return AdminAccount(username)
    else:
        user_password_set(username=username, password=password, access=access, validate=False)
    return AdminAccount(username, password)


# --- Sign-in through an identity provider (OpenID Connect, forward auth, LDAP) --------------
# Every such path ends here: one rule for which account a provider's person gets, one mapping
# of the provider's groups to pmd's groups (which decide who sees which collection), one audit.


@dataclass
class ProviderSignIn:
    """What an identity provider vouches for. `groups` None: the provider said nothing about
    groups (memberships stay as they are); a list, even empty, is the whole truth."""

    provider: str  # "openid:<id>", "forward-auth", "ldap"
    subject: str  # the provider's stable id for the person (OpenID `sub`, the proxy's user name)
    username: str
    email: str = ""
    groups: list[str] | None = None
    issuer: str = ""  # OpenID Connect's `iss`: the subject is the person only within it


def _group_managed(name: str) -> bool:
    """A pmd group the provider decides (PMD_GROUPS_PREFIX / PMD_GROUPS_ALLOWED; all when neither
    is set): the provider adds and removes these memberships, others are left to the admin."""
    allowed, prefix = settings.PMD_GROUPS_ALLOWED, settings.PMD_GROUPS_PREFIX
    if not allowed and not prefix:
        return True
    return name in allowed or bool(prefix and name.startswith(prefix))


def provider_groups_mapped(groups: list[str]) -> set[str]:
    """The pmd groups a provider's group names become: the managed ones, as named there."""
    return {g.strip() for g in groups if g.strip() and len(g.strip()) <= 150 and _group_managed(g.strip())}


def _groups_apply(user, groups: list[str], via: str) -> None:
    wanted = provider_groups_mapped(groups)
    current = set(user.groups.values_list("name", flat=True))
    added = sorted(wanted - current)
    removed = sorted(g for g in current - wanted if _group_managed(g))
    for name in added:
        group, created = Group.objects.get_or_create(name=name)
        if created:
            audit_record(None, "group.create", name, via=via)
        user.groups.add(group)
    if removed:
        user.groups.remove(*Group.objects.filter(name__in=removed))
    if added or removed:
        audit_record(None, "user.groups", user.get_username(), added=added, removed=removed, via=via)
    staff_groups, superuser_groups = set(settings.PMD_STAFF_GROUPS), set(settings.PMD_SUPERUSER_GROUPS)
    if not staff_groups and not superuser_groups:
        return  # roles are the admin's to give
    before = user_role(user)
    named = {g.strip() for g in groups}
    user.is_superuser = bool(named & superuser_groups) if superuser_groups else user.is_superuser
    user.is_staff = user.is_superuser or (bool(named & staff_groups) if staff_groups else user.is_staff)
    if user_role(user) != before:
        user.save(update_fields=["is_staff", "is_superuser"])
        audit_record(None, "user.role", user.get_username(), role=user_role(user), was=before, via=via)


SUBJECT_MAX = 255  # ExternalIdentity.subject


def _username_for(signin: ProviderSignIn) -> str:
    """The provider's user name, kept to what a pmd name may hold (the web form's rules), in the
    form Django stores (NFKC): the name compared with existing accounts is the one created."""
    cleaned = "".join(c for c in unicodedata.normalize("NFKC", signin.username.strip()) if c.isalnum() or c in "@.+-_")[
        :150
    ]
    return _check_username(cleaned or signin.subject)


def _link_hint(username: str, signin: ProviderSignIn) -> str:
    return (
        f"an administrator can link it to this sign-in: "
        f"pmd user link {username} --provider {signin.provider} --subject {signin.subject}"
    )


def _account_for(signin: ProviderSignIn):
    """The account tied to the provider's subject (compared exactly), or a new one. An account
    that exists already, under the provider's name for the person or the name it cleans to, is
    never taken at first sign-in: a name is no proof of being that account's owner (it is often
    the person's to edit at the provider). An administrator links it (`identity_link`)."""
    user_model = get_user_model()
    if len(signin.subject) > SUBJECT_MAX:
        raise errors.SignInRefused(
            f"the name {signin.provider} gives for this person is longer than {SUBJECT_MAX} characters"
        )
    link = (
        ExternalIdentity.objects.select_for_update()
        .select_related("user")
        .filter(provider=signin.provider, subject=signin.subject)
        .first()
    )
    if link is not None:
        _issuer_check(link, signin)
        return link.user, link
    username = _username_for(signin)
    if user_model.objects.filter(**{f"{user_model.USERNAME_FIELD}__iexact": username}).exists():
        raise errors.SignInRefused(
            f"an account named '{username}' already exists and is not linked to this "
            f"person of {signin.provider}; {_link_hint(username, signin)}"
        )
    if not settings.PMD_SIGNIN_CREATE_USERS:
        raise errors.SignInRefused(
            f"there is no account linked to this person of {signin.provider} and only "
            f"existing accounts may sign in; {_link_hint(username, signin)}"
        )
    user = user_model.objects.create_user(username, email=signin.email or "", password=None)
    audit_record(None, "user.create", username, role=user_role(user), via=signin.provider)
    return user, ExternalIdentity.objects.create(
        provider=signin.provider, subject=signin.subject, issuer=signin.issuer, user=user
    )


def _issuer_check(link: ExternalIdentity, signin: ProviderSignIn) -> None:
    """A `sub` names a person only within its issuer: a provider reconfigured to another issuer
    does not inherit the accounts linked through the first. A link without an issuer yet (made by
    an admin) takes the issuer of its first sign-in."""
    if not signin.issuer or link.issuer == signin.issuer:
        return
    if link.issuer:
        raise errors.SignInRefused(
            f"this person of {signin.provider} was linked through the issuer {link.issuer}, not "
            f"{signin.issuer}; {_link_hint(link.user.get_username(), signin)}"
        )
    link.issuer = signin.issuer
    link.save(update_fields=["issuer"])


def identity_link(*, username: str, provider: str, subject: str, access: Access) -> ExternalIdentity:
    """Tie an identity provider's person to an existing account: from then on that person signs
    in as it. The only way an existing account gets a provider's sign-in (an admin's word)."""
    provider, subject = provider.strip(), subject.strip()
    known = {"forward-auth", "ldap", *(f"openid:{p['id']}" for p in settings.PMD_OIDC_PROVIDERS)}
    if provider not in known:
        raise errors.InvalidAccount(f"unknown identity provider {provider!r}: one of {', '.join(sorted(known))}")
    if not subject or len(subject) > SUBJECT_MAX:
        raise errors.InvalidAccount(f"the subject must be 1 to {SUBJECT_MAX} characters")
    user = _user(username)
    with transaction.atomic():
        existing = (
            ExternalIdentity.objects.select_for_update()
            .select_related("user")
            .filter(provider=provider, subject=subject)
            .first()
        )
        if existing is not None:
            if existing.user_id == user.pk:
                if existing.issuer:  # linked again: the next sign-in's issuer is the one vouching
                    existing.issuer = ""
                    existing.save(update_fields=["issuer"])
                    audit_record(access, "user.link", user.get_username(), via=provider, subject=subject)
                return existing
            raise errors.InvalidAccount(
                f"{provider} {subject!r} already signs in as '{existing.user.get_username()}'; delete that link first"
            )
        link = ExternalIdentity.objects.create(provider=provider, subject=subject, user=user)
        audit_record(access, "user.link", user.get_username(), via=provider, subject=subject)
    return link


def provider_sign_in(*, signin: ProviderSignIn):
    """The account a provider's person signs in as, its groups and role brought up to date
    (audited); SignInRefused for a deactivated account or one pmd may not create or take."""
    with transaction.atomic():
        user, link = _account_for(signin)
        if not user.is_active:
            raise errors.SignInRefused(f"the account '{user.get_username()}' is deactivated")
        if signin.groups is not None:
            _groups_apply(user, signin.groups, signin.provider)
        if signin.email and signin.email != user.email:
            user.email = signin.email
            user.save(update_fields=["email"])
        link.last_sign_in = timezone.now()
        link.save(update_fields=["last_sign_in"])
    return user


def password_login_allowed(user) -> bool:
    """Whether `user` may sign in with a password: everyone unless PMD_PASSWORD_LOGIN is off,
    then only the break-glass accounts (PMD_PASSWORD_LOGIN_USERS)."""
    if settings.PMD_PASSWORD_LOGIN:
        return True
    return user.get_username() in settings.PMD_PASSWORD_LOGIN_USERS
