"""Searching: keyword ranking (BM25), typo correction, time words, the search log, digests of
saved searches."""

from __future__ import annotations

from pmd_site.settings.table import read

PMD_BM25_K1 = read("PMD_BM25_K1")
PMD_BM25_B = read("PMD_BM25_B")
PMD_BM25_TITLE_WEIGHT = read("PMD_BM25_TITLE_WEIGHT")  # title/headings term frequency counts this much
# Typos: a query word no searched note holds is corrected from the collections' own words.
PMD_TYPO_CORRECTION = read("PMD_TYPO_CORRECTION")
# The search log: staff see the team's top, zero-result, weak and slow queries; kept this many days.
PMD_SEARCH_LOG = read("PMD_SEARCH_LOG")
# Time words in a plain query ("notes last week", "yesterday", "recent") become a removable date filter.
PMD_TIME_WORDS = read("PMD_TIME_WORDS")
PMD_SEARCH_LOG_DAYS = read("PMD_SEARCH_LOG_DAYS")
# Saved searches with a webhook or an email digest are run this often (seconds; 0: never) by celery beat.
PMD_DIGEST_INTERVAL = read("PMD_DIGEST_INTERVAL")
# A digest webhook may name a private or loopback address (off: only public addresses, so a member
# cannot make the server call its neighbours).
PMD_DIGEST_PRIVATE_WEBHOOKS = read("PMD_DIGEST_PRIVATE_WEBHOOKS")
