// Discovery + conversation with the official A2A JS SDK client (@a2a-js/sdk, pinned in
// package.json), starting from a base URL only. The twin of ../client_from_card.py.
//
//   node "$(tests/peers/provision_js.sh)" BASE_URL [--tenant T] [--credential KIND=VALUE ...]
//                                             [--binding JSONRPC|HTTP+JSON|GRPC]
//
// 1. The SDK's DefaultAgentCardResolver fetches BASE_URL/.well-known/agent-card.json.
//    It resolves the card path *relative* to the base URL (new URL('.well-known/…', base)),
//    so a base without a trailing slash loses its last segment
//    (http://gw/agents/grpc -> http://gw/agents/.well-known/agent-card.json): the slash is
//    added here, as any caller of this SDK with a path-prefixed agent must.
// 2. The SDK's ClientFactory, given only the transport of `--binding` (default JSONRPC;
//    the gRPC one needs the optional peers @grpc/grpc-js and @bufbuild/protobuf), picks the
//    card's interface of that binding (a 1.0 one is preferred) and sets the interface's
//    tenant, if any, on every request. The gRPC transport dials the interface's URL as
//    given, as a grpc-js target (`host:port`), without TLS.
// 3. Conversation: send `hello` (-> Message), send `task` (-> COMPLETED Task), stream
//    `stream` (-> the six events), get the task, send `slow` and cancel it (-> CANCELED),
//    send `headers` (-> what the agent saw: A2A-Version, binding and tenant).
//
// With `--credential` (KIND `bearer` or `api-key`): once the card is resolved (without
// credentials: it is public), the SDK's createAuthenticatingFetchWithRetry sends, for the
// first of the card's securityRequirements it has a credential for, that credential where
// the card's scheme says (Authorization: Bearer for HTTP bearer, OAuth2 and OpenID Connect;
// the named header for an API key). The JS SDK does not read the card's security itself.
//
// stdout, like client_from_card.py:
//   CARD <url the card was fetched from>
//   SECURITY <scheme>:<kind>[:<header>] ...   (the card's required schemes, in order)
//   INTERFACE <protocolBinding> <protocolVersion> <url>      (what the factory chose)
//   step <n>: <name>: ok
//   AGENT binding=<jsonrpc|rest|grpc> tenant=<tenant seen by the agent, '-' if none>
//   CALLS <n> <url>        (every conversation request went to this one URL; HTTP+JSON:
//                           to operation paths below it; gRPC: calls on the channel to it)
//   OK <n> steps
// At the first failure: `FAIL step <n> (<name>): <reason>` on stderr, exit 1.
// `--tenant T`: the agent must see tenant T; without it, the chosen interface's tenant.
// Every wait is bounded: each step 60 s, the whole run 5 min.

import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';

import {
  CancelTaskRequest,
  GetTaskRequest,
  SendMessageRequest,
  TaskState,
  taskStateToJSON,
} from '@a2a-js/sdk';
import {
  ClientFactory,
  createAuthenticatingFetchWithRetry,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory,
} from '@a2a-js/sdk/client';

const STEP_LIMIT_MS = 60_000;
setTimeout(() => {
  console.error('FAIL: the whole run took more than 5 min');
  process.exit(1);
}, 300_000).unref();

class StepFailed extends Error {
  name = 'StepFailed';
}

function check(cond, what) {
  if (!cond) throw new StepFailed(what);
}

function request(text, returnImmediately = false) {
  return SendMessageRequest.fromJSON({
    message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] },
    configuration: { returnImmediately },
  });
}

const stateName = (state) => taskStateToJSON(state).replace(/^TASK_STATE_/, '');
const isTask = (result) => result && 'status' in result && 'id' in result;
const isMessage = (result) => result && 'messageId' in result;
const text = (message) => message.parts[0]?.content?.value;

function kind(ev) {
  const p = ev.payload;
  if (p?.$case === 'task') return `task:${stateName(p.value.status.state)}`;
  if (p?.$case === 'statusUpdate') return `status:${stateName(p.value.status.state)}`;
  return p?.$case;
}

function withLimit(promise, ms, what) {
  let timer;
  const limit = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
}

function steps(client, expectedTenant) {
  const ctx = {};
  return [
    ['send hello -> message', async () => {
      const r = await client.sendMessage(request('hello'));
      check(isMessage(r), `expected a Message, got ${JSON.stringify(r)}`);
      check(text(r) === 'echo: hello', `text ${JSON.stringify(text(r))}`);
    }],
    ['send task -> completed task', async () => {
      const t = await client.sendMessage(request('task'));
      check(isTask(t), `expected a Task, got ${JSON.stringify(t)}`);
      check(t.status.state === TaskState.TASK_STATE_COMPLETED, `state ${stateName(t.status.state)}`);
      const data = t.artifacts[0]?.parts[1]?.content;
      check(data?.$case === 'data' && data.value.answer === 42, `artifact data ${JSON.stringify(data)}`);
      ctx.task = t;
    }],
    ['stream -> events', async () => {
      const kinds = [];
      for await (const ev of client.sendMessageStream(request('stream'))) kinds.push(kind(ev));
      const want = ['task:SUBMITTED', 'status:WORKING', 'artifactUpdate', 'artifactUpdate',
        'artifactUpdate', 'status:COMPLETED'];
      check(JSON.stringify(kinds) === JSON.stringify(want), `stream events ${kinds}`);
    }],
    ['get task', async () => {
      const t = await client.getTask(GetTaskRequest.fromJSON({ id: ctx.task.id }));
      check(t.id === ctx.task.id && t.status.state === TaskState.TASK_STATE_COMPLETED,
        `GetTask returned ${t.id} ${stateName(t.status.state)}`);
    }],
    ['send slow + cancel -> canceled', async () => {
      const t = await client.sendMessage(request('slow:20', true));
      check(isTask(t), `expected a Task, got ${JSON.stringify(t)}`);
      const c = await client.cancelTask(CancelTaskRequest.fromJSON({ id: t.id }));
      check(c.id === t.id && c.status.state === TaskState.TASK_STATE_CANCELED,
        `cancel -> ${stateName(c.status.state)}`);
    }],
    ['agent saw binding and tenant', async () => {
      const r = await client.sendMessage(request('headers'));
      check(isMessage(r), `expected a Message, got ${JSON.stringify(r)}`);
      const seen = JSON.parse(text(r));
      check(seen['a2a-version'] === '1.0', `A2A-Version seen by agent: ${seen['a2a-version']}`);
      const tenant = seen.tenant ?? '';
      check(tenant === expectedTenant, `agent saw tenant '${tenant}', expected '${expectedTenant}'`);
      console.log(`AGENT binding=${seen.binding} tenant=${tenant || '-'}`);
    }],
  ];
}

// What the client must present for a card's scheme: [kind, header name or undefined].
function schemeKind(scheme) {
  switch (scheme?.scheme?.$case) {
    case 'apiKeySecurityScheme': return ['api-key', scheme.scheme.value.name];
    case 'mtlsSecurityScheme': return ['mtls', undefined];
    case undefined: return ['missing', undefined];
    default: return ['bearer', undefined];
  }
}

// The card's required schemes, in order: [name, kind, header].
function required(card) {
  return (card.securityRequirements ?? []).flatMap((requirement) =>
    Object.keys(requirement.schemes ?? {}).map((name) =>
      [name, ...schemeKind(card.securitySchemes?.[name])]));
}

// The headers of the first required scheme a credential is given for.
function credentialHeaders(card, credentials) {
  for (const [, kind, header] of required(card)) {
    const value = credentials[kind];
    if (value === undefined) continue;
    if (kind === 'api-key') return { [header]: value };
    if (kind === 'bearer') return { Authorization: `Bearer ${value}` };
  }
  return {};
}

const oneLine = (e) => `${e?.name ?? 'Error'}: ${String(e?.message ?? e).split('\n').join(' | ')}`;

// The one transport factory of `binding`, and the calls it makes counted in `grpcCalls`
// (HTTP ones are seen by `fetchImpl`).
async function transportFactory(binding, fetchImpl, grpcCalls) {
  switch (binding) {
    case 'JSONRPC': return new JsonRpcTransportFactory({ fetchImpl });
    case 'HTTP+JSON': return new RestTransportFactory({ fetchImpl });
    case 'GRPC': {
      // Optional peers of the SDK: loaded only when asked for.
      const grpc = await import('@grpc/grpc-js');
      const { GrpcTransportFactory } = await import('@a2a-js/sdk/client/grpc');
      const counting = (options, nextCall) => {
        grpcCalls.push(options.method_definition.path);
        return new grpc.InterceptingCall(nextCall(options));
      };
      return new GrpcTransportFactory({ grpcCallOptions: { interceptors: [counting] } });
    }
    default: throw new Error(`unknown binding ${binding}`);
  }
}

// `factory`, remembering the URL of each transport it creates: the interface the client
// factory chose.
function recordingCreates(factory, created) {
  return {
    get protocolName() { return factory.protocolName; },
    create: (url, card) => {
      created.push(url);
      return factory.create(url, card);
    },
  };
}

async function main() {
  const { positionals, values } = parseArgs({
    allowPositionals: true,
    options: {
      tenant: { type: 'string' },
      credential: { type: 'string', multiple: true },
      binding: { type: 'string', default: 'JSONRPC' },
    },
  });
  const binding = values.binding;
  const credentials = Object.fromEntries((values.credential ?? []).map((c) => {
    const at = c.indexOf('=');
    return [c.slice(0, at), c.slice(at + 1)];
  }));
  if (positionals.length !== 1) {
    console.error('usage: client_from_card.mjs BASE_URL [--tenant T] [--credential KIND=VALUE ...] '
      + '[--binding JSONRPC|HTTP+JSON|GRPC]');
    return 2;
  }
  const base = positionals[0].endsWith('/') ? positionals[0] : `${positionals[0]}/`;

  const sent = [];
  const recorded = (input, init) => {
    sent.push(String(input instanceof Request ? input.url : input));
    return fetch(input, init);
  };
  // Empty until the card is known: the card itself is fetched without credentials.
  let authHeaders = {};
  const fetchImpl = createAuthenticatingFetchWithRetry(recorded, {
    headers: async () => authHeaders,
    shouldRetryWithHeaders: async () => undefined,
  });
  let client;
  const [created, grpcCalls] = [[], []];
  try {
    const transport = await transportFactory(binding, fetchImpl, grpcCalls);
    const factory = new ClientFactory({
      transports: [recordingCreates(transport, created)],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
    });
    client = await withLimit(factory.createFromUrl(base), STEP_LIMIT_MS, 'card');
  } catch (e) {
    console.error(`FAIL step 0 (resolve card, create client): ${oneLine(e)}`);
    return 1;
  }
  console.log(`CARD ${sent[0]}`);
  const security = required(client.agentCard).map(([name, kind, header]) =>
    `${name}:${kind}${header ? `:${header}` : ''}`);
  console.log(`SECURITY ${security.join(' ') || '-'}`);
  authHeaders = credentialHeaders(client.agentCard, credentials);
  // The card's interface the factory built its one transport for.
  const chosen = client.agentCard.supportedInterfaces
    .find((i) => i.protocolBinding === binding && i.url === created[0]);
  if (created.length !== 1 || !chosen) {
    console.error(`FAIL step 0 (chosen interface in card): ${created} is no ${binding} interface of the card`);
    return 1;
  }
  console.log(`INTERFACE ${chosen.protocolBinding} ${chosen.protocolVersion} ${chosen.url}`);
  const expectedTenant = values.tenant ?? chosen.tenant ?? '';
  sent.length = 0;

  const all = steps(client, expectedTenant);
  for (const [n, [name, step]] of all.entries()) {
    try {
      await withLimit(step(), STEP_LIMIT_MS, name);
    } catch (e) {
      console.error(`FAIL step ${n + 1} (${name}): ${oneLine(e)}`);
      return 1;
    }
    console.log(`step ${n + 1}: ${name}: ok`);
  }
  // The interface URL is what the client really used, not only what it announced.
  let urls = [...new Set(sent)];
  if (binding === 'HTTP+JSON' && urls.length && urls.every((u) => u.startsWith(`${chosen.url.replace(/\/+$/, '')}/`))) {
    // Each operation has its own path below the interface's URL.
    urls = [chosen.url];
  }
  if (binding === 'GRPC' && !urls.length) {
    // No HTTP request at all: every call went over the channel the transport opened to
    // the chosen URL.
    urls = grpcCalls.length ? [chosen.url] : [];
  }
  if (urls.length !== 1 || urls[0] !== chosen.url) {
    console.error(`FAIL step ${all.length + 1} (calls went to the chosen interface): ${urls}`);
    return 1;
  }
  console.log(`CALLS ${binding === 'GRPC' ? grpcCalls.length : sent.length} ${urls[0]}`);
  console.log(`OK ${all.length} steps`);
  return 0;
}

process.exit(await main());
