"""Accounts of the web UI, the API and /mcp: create, set a password, lift a lockout, make sure an
admin exists. Every face (`pmd user`, `pmd up`) changes accounts here, so each change is audited
the same way and checked by the same rules as the admin's and the sign-in form's."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import transaction

from indexing import errors
from indexing.access import Access
from indexing.services.audit import audit_record
from indexing.services.throttling import reset_token_failures


def _user(username: str):
    User = get_user_model()
    try:
        return User.objects.get(**{User.USERNAME_FIELD: username})
    except User.DoesNotExist:
        raise errors.UserNotFound(f"no account named '{username}'") from None


def _check_username(username: str) -> str:
    """The rules the admin and the sign-in form apply (letters, digits and @ . + - _), not only the
    database's: a name the web cannot take is refused everywhere."""
    User = get_user_model()
    username = username.strip()
    if not username:
        raise errors.InvalidAccount("the username is empty")
    try:
        User._meta.get_field(User.USERNAME_FIELD).run_validators(username)
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
    User = get_user_model()
    username = _check_username(username)
    if User.objects.filter(**{User.USERNAME_FIELD: username}).exists():
        raise errors.AccountExists(name=username)
    return username


def user_create(*, username: str, password: str, access: Access, email: str = "", staff: bool = False,
                superuser: bool = False):
    """A new account (`superuser` implies staff); AccountExists when the name is taken."""
    User = get_user_model()
    username = username_available(username=username)
    _check_password(password, User(**{User.USERNAME_FIELD: username, "email": email}))
    with transaction.atomic():
        if superuser:
            user = User.objects.create_superuser(username, email=email, password=password)
        else:
            user = User.objects.create_user(username, email=email, password=password, is_staff=staff)
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
    from axes.utils import reset  # django-axes: imported when needed (start-up time of the CLI)

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
    User = get_user_model()
    user = User.objects.filter(**{User.USERNAME_FIELD: username}).first()
    if user is None and not reset and User.objects.filter(is_superuser=True).exists():
        return AdminAccount(User.objects.filter(is_superuser=True).order_by("pk").first().get_username())
    if user is not None and not reset:
        return AdminAccount(username)
    password = secrets.token_urlsafe(12)
    if user is None:
        with transaction.atomic():
            User.objects.create_superuser(username, email="", password=password)
            audit_record(access, "user.create", username, role="superuser", generated_password=True)
    else:
        user_password_set(username=username, password=password, access=access, validate=False)
    return AdminAccount(username, password)
