"""Team sign-in: the identity provider a team already runs signs people in to the web UI.

- `oidc`: OpenID Connect providers (discovery, authorization code with PKCE, ID token checks);
- `backends`: the password form (which PMD_PASSWORD_LOGIN may turn off) and provider sessions;
- `ldap`: LDAP through django-auth-ldap (the ldap extra).
The web UI's side is pmd_site/web: views/signin.py ("Sign in with …", the provider's callback,
sign-out) and forward_auth.py (Remote-User from the trusted reverse proxy). Every path hands what
the provider vouches for to one service, `provider_sign_in` (indexing.services.accounts), which
picks the account and maps the provider's groups.
"""
