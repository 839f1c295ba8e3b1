"""The password hasher of the in-process tests: Django's PBKDF2 with one round instead of a million.

A million rounds cost about a second of CPU per user made or login checked, hundreds of times
per suite, and no test is about the cost. The `pmd` processes the system tests start (pmd up,
pmd serve) read the real settings, so they hash with Django's default.
"""

from __future__ import annotations

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class OneRoundPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    iterations = 1
