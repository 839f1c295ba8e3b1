"""OAuth 2.1 for remote agents (/mcp and the API): discovery, the consent page and Authlib's
authorization server over indexing.services.oauth."""
