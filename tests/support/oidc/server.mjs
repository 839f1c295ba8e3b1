// A real OpenID provider for the sign-in tests: oidc-provider (the certified Node.js
// implementation) on loopback, with its built-in development login pages (any name signs in).
// Started once per test module by tests/support/openid.py; reads its settings from a JSON file:
//   {"port", "issuer", "jwks": {"keys": [...]}, "clients": [...], "accounts": "<path of a JSON file>"}
// The accounts file ({"name": {"email", "groups": [...]}}) is read at every sign-in, so a test
// changes someone's groups between two sign-ins by rewriting it.
import fs from 'node:fs';
import Provider from 'oidc-provider';

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));

function account(id) {
  const people = JSON.parse(fs.readFileSync(config.accounts, 'utf8'));
  return people[id];
}

const provider = new Provider(config.issuer, {
  clients: config.clients,
  jwks: config.jwks,
  pkce: { required: () => true },
  scopes: ['openid', 'offline_access', 'email', 'profile', 'groups'],
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['preferred_username', 'name'],
    groups: ['groups'],
  },
  features: {
    devInteractions: { enabled: true },
    rpInitiatedLogout: { enabled: true },
  },
  ttl: { Session: 600, Interaction: 600, Grant: 600, AccessToken: 600, IdToken: 600, AuthorizationCode: 60 },
  async findAccount(ctx, id) {
    const person = account(id);
    if (!person) return undefined;
    return {
      accountId: id,
      async claims() {
        return {
          sub: id,
          preferred_username: id,
          name: id,
          email: person.email || `${id}@example.org`,
          email_verified: true,
          groups: person.groups || [],
        };
      },
    };
  },
});
provider.listen(config.port, '127.0.0.1', () => {
  process.stdout.write(`listening ${config.issuer}\n`);
});
