"""Team sign-in: the identity provider a team already runs signs people in to the web UI.

- `oidc`: OpenID Connect providers (discovery, authorization code with PKCE, ID token checks);
- `forward`: forward authentication behind a trusted reverse proxy (Remote-User and friends);
- `backends`: the password form (which PMD_PASSWORD_LOGIN may turn off) and provider sessions;
- `views`: the "Sign in with …" redirects, the provider's callback, sign-out.
Each path hands what the provider vouches for to one service, `provider_sign_in`
(indexing.services.accounts), which picks the account and maps the provider's groups.
"""
