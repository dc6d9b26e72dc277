// A real OpenID provider for the tests (panva's oidc-provider, run by tests/support/oidc.py).
// It issues JWT access tokens for any resource indicator (RFC 8707) with the scopes
// "mcp:tools other:read"; sign-in and consent go through its devInteractions pages (any login).
// Env: ISSUER, PORT, REDIRECT_URI, CLIENT_SECRET. Clients: "lineup-test" (public, authorization
// code + PKCE), "lineup-machine" (client_credentials), "lineup-short" (client_credentials, tokens
// living 1 s). Dynamic client registration is on, as MCP clients use it.
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import Provider from 'oidc-provider';

const { ISSUER, PORT, REDIRECT_URI, CLIENT_SECRET } = process.env;
const key = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' });

const provider = new Provider(ISSUER, {
  jwks: { keys: [{ ...key, kid: randomUUID(), use: 'sig', alg: 'RS256' }] },
  clients: [
    {
      client_id: 'lineup-test',
      token_endpoint_auth_method: 'none',
      redirect_uris: [REDIRECT_URI],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
    },
    ...['lineup-machine', 'lineup-short'].map((client_id) => ({
      client_id,
      client_secret: CLIENT_SECRET,
      redirect_uris: [],
      grant_types: ['client_credentials'],
      response_types: [],
    })),
  ],
  scopes: ['openid', 'offline_access', 'mcp:tools', 'other:read'],
  features: {
    devInteractions: { enabled: true },
    clientCredentials: { enabled: true },
    registration: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: (ctx, client, oneOf) => oneOf,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resourceIndicator, client) => ({
        scope: 'mcp:tools other:read',
        audience: resourceIndicator,
        accessTokenFormat: 'jwt',
        accessTokenTTL: client.clientId === 'lineup-short' ? 1 : 3600,
        jwt: { sign: { alg: 'RS256' } },
      }),
    },
  },
  pkce: { required: () => true },
});

provider.listen(Number(PORT), '127.0.0.1', () => console.log(`listening ${ISSUER}`));
