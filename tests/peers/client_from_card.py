"""Discovery + conversation with the a2a-sdk 1.3.0 client, starting from a base URL only.

    python client_from_card.py BASE_URL [--tenant T] [--credential KIND=VALUE ...]
                               [--binding JSONRPC|HTTP+JSON|GRPC]

1. The SDK's `A2ACardResolver` fetches `BASE_URL/.well-known/agent-card.json`.
2. The SDK's `ClientFactory` (config: JSONRPC, or the `--binding` given, is the only
   transport it may use) picks the card's interface of that binding (spec 8.3.2; a 1.0
   interface is preferred) and sets the interface's `tenant`, if any, on every request.
   For gRPC the SDK asks the caller for a channel to the interface's URL: here a
   plaintext one, with the URL as its target (`host:port`).
3. Conversation: send `hello` (-> Message), send `task` (-> COMPLETED Task), stream
   `stream` (-> the six events), get the task, send `slow` and cancel it (-> CANCELED),
   send `headers` (-> what the agent saw: binding and tenant).

With `--credential` (KIND `bearer` or `api-key`), the SDK's `AuthInterceptor` reads the
card's `securityRequirements` and `securitySchemes` and sends, for the first required scheme
it has a credential for, that credential where the scheme says (`Authorization: Bearer` for
HTTP bearer, OAuth2 and OpenID Connect schemes; the named header for an API key).

stdout (for the caller to assert on):
    CARD <url the card was fetched from>
    SECURITY <scheme>:<kind>[:<header>] ...   # the card's required schemes, in order
    INTERFACE <protocolBinding> <protocolVersion> <url>      # what the factory chose
    step <n>: <name>: ok
    AGENT binding=<jsonrpc|rest|grpc> tenant=<tenant seen by the agent, '-' if none>
    CALLS <n> <url>        # every conversation request went to this one URL (HTTP+JSON:
                           # to operation paths below it; gRPC: calls on channels to it)
    OK <n> steps
At the first failure: `FAIL step <n> (<name>): <reason>` on stderr, exit 1.

`--tenant T`: the agent must see tenant T (a route with a fixed tenant injects it);
without it, the agent must see the chosen interface's tenant (none for agent.py's card).
Every network wait is bounded (httpx timeout 30 s, each step 60 s).
"""

import argparse
import asyncio
import json
import sys

import grpc
import httpx

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.auth import AuthInterceptor, CredentialService
from a2a.helpers import get_message_text
from a2a.types.a2a_pb2 import CancelTaskRequest, GetTaskRequest, TaskState
from conversation_helpers import check, collect, kind, request, run_steps


def steps(unary, streaming, expected_tenant):
    ctx = {}

    async def hello():
        [ev] = await collect(unary.send_message(request('hello')))
        check(ev.HasField('message'), f'expected a Message, got {kind(ev)}')
        check(get_message_text(ev.message) == 'echo: hello', f'text {get_message_text(ev.message)!r}')

    async def task():
        [ev] = await collect(unary.send_message(request('task')))
        check(ev.HasField('task'), f'expected a Task, got {kind(ev)}')
        check(ev.task.status.state == TaskState.TASK_STATE_COMPLETED,
              f'state {TaskState.Name(ev.task.status.state)}')
        data = ev.task.artifacts[0].parts[1].data.struct_value
        check(data['answer'] == 42, f'artifact data {data}')
        ctx['task'] = ev.task

    async def stream():
        kinds = [kind(ev) for ev in await collect(streaming.send_message(request('stream')))]
        want = ['task:SUBMITTED', 'status:WORKING', 'artifact_update', 'artifact_update',
                'artifact_update', 'status:COMPLETED']
        check(kinds == want, f'stream events {kinds}')

    async def get_task():
        t = await unary.get_task(GetTaskRequest(id=ctx['task'].id))
        check(t.id == ctx['task'].id and t.status.state == TaskState.TASK_STATE_COMPLETED,
              f'GetTask returned {t.id} {TaskState.Name(t.status.state)}')

    async def cancel():
        [ev] = await collect(unary.send_message(request('slow:20', return_immediately=True)))
        check(ev.HasField('task'), f'expected a Task, got {kind(ev)}')
        t = await unary.cancel_task(CancelTaskRequest(id=ev.task.id))
        check(t.id == ev.task.id and t.status.state == TaskState.TASK_STATE_CANCELED,
              f'cancel -> {TaskState.Name(t.status.state)}')

    async def agent_view():
        [ev] = await collect(unary.send_message(request('headers')))
        seen = json.loads(get_message_text(ev.message))
        check(seen['a2a-version'] == '1.0', f'A2A-Version seen by agent: {seen["a2a-version"]!r}')
        tenant = seen['tenant'] or ''
        check(tenant == expected_tenant, f'agent saw tenant {tenant!r}, expected {expected_tenant!r}')
        print(f'AGENT binding={seen["binding"]} tenant={tenant or "-"}', flush=True)

    return [('send hello -> message', hello), ('send task -> completed task', task),
            ('stream -> events', stream), ('get task', get_task),
            ('send slow + cancel -> canceled', cancel), ('agent saw binding and tenant', agent_view)]


def scheme_kind(scheme):
    """`bearer`, `api-key` or `mtls`: what the client must present for a card's scheme."""
    if scheme.HasField('api_key_security_scheme'):
        return 'api-key', scheme.api_key_security_scheme.name
    if scheme.HasField('mtls_security_scheme'):
        return 'mtls', None
    return 'bearer', None


class CardCredentials(CredentialService):
    """The credential of each kind, given for whichever scheme of the card asks for it."""

    def __init__(self, card, credentials):
        self._card = card
        self._credentials = credentials

    async def get_credentials(self, security_scheme_name, context):
        scheme = self._card.security_schemes.get(security_scheme_name)
        if scheme is None:
            return None
        return self._credentials.get(scheme_kind(scheme)[0])


def security_line(card):
    names = []
    for requirement in card.security_requirements:
        for name in requirement.schemes:
            scheme = card.security_schemes.get(name)
            kind, header = scheme_kind(scheme) if scheme is not None else ('missing', None)
            names.append(f'{name}:{kind}' + (f':{header}' if header else ''))
    return 'SECURITY ' + (' '.join(names) or '-')


class CountingUnary(grpc.aio.UnaryUnaryClientInterceptor):
    """Counts the unary gRPC calls made on the channels it is given to, in `calls`."""

    def __init__(self, calls):
        self.calls = calls

    async def intercept_unary_unary(self, continuation, details, request):
        self.calls.append(details.method)
        return await continuation(details, request)


class CountingStreams(grpc.aio.UnaryStreamClientInterceptor):
    """Counts the streaming gRPC calls (grpc.aio gives an interceptor one kind only)."""

    def __init__(self, calls):
        self.calls = calls

    async def intercept_unary_stream(self, continuation, details, request):
        self.calls.append(details.method)
        return await continuation(details, request)


async def main(base_url, tenant, credentials, binding):
    sent = []
    grpc_calls = []
    counting = [CountingUnary(grpc_calls), CountingStreams(grpc_calls)]
    channels = []  # the URL of every gRPC channel the SDK asked for

    async def record(req):
        sent.append(str(req.url))

    def channel(url):
        channels.append(url)
        return grpc.aio.insecure_channel(url, interceptors=counting)

    async with httpx.AsyncClient(timeout=30, event_hooks={'request': [record]}) as http:
        try:
            card = await asyncio.wait_for(A2ACardResolver(http, base_url).get_agent_card(), 60)
            config = dict(httpx_client=http, supported_protocol_bindings=[binding],
                          grpc_channel_factory=channel)
            interceptors = [AuthInterceptor(CardCredentials(card, credentials))]
            unary = ClientFactory(ClientConfig(streaming=False, **config)).create(card, interceptors)
            streaming = ClientFactory(ClientConfig(streaming=True, **config)).create(
                card, interceptors)
        except Exception as e:  # noqa: BLE001
            reason = ' | '.join(str(e).splitlines())
            print(f'FAIL step 0 (resolve card, create client): {type(e).__name__}: {reason}',
                  file=sys.stderr)
            return 1
        print(f'CARD {sent[0]}', flush=True)
        print(security_line(card), flush=True)
        # The factory's choice, as the SDK itself resolves it (a 1.0 JSONRPC interface first).
        chosen = ClientFactory._find_best_interface(list(card.supported_interfaces), [binding])
        print(f'INTERFACE {chosen.protocol_binding} {chosen.protocol_version} {chosen.url}', flush=True)
        expected_tenant = chosen.tenant if tenant is None else tenant
        del sent[:]
        all_steps = steps(unary, streaming, expected_tenant)
        if not await run_steps(all_steps):
            return 1
        # The interface URL is what the client really used, not only what it announced.
        urls = sorted(set(sent))
        if binding != 'JSONRPC':
            # Each operation has its own path below the interface's URL.
            below = [u for u in urls if u.startswith(chosen.url.rstrip('/') + '/')]
            urls = [chosen.url] if urls and below == urls else urls
        if binding == 'GRPC' and not urls and grpc_calls:
            # No HTTP request at all: every call went over the channels to these URLs.
            urls = sorted(set(channels))
        if urls != [chosen.url]:
            print(f'FAIL step {len(all_steps) + 1} (calls went to the chosen interface): {urls}',
                  file=sys.stderr)
            return 1
        calls = len(grpc_calls) if binding == 'GRPC' else len(sent)
        print(f'CALLS {calls} {urls[0]}', flush=True)
    print(f'OK {len(all_steps)} steps', flush=True)
    return 0


if __name__ == '__main__':
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('base_url')
    parser.add_argument('--tenant', help='the tenant the agent must see')
    parser.add_argument('--credential', action='append', default=[], metavar='KIND=VALUE',
                        help='bearer=TOKEN or api-key=KEY, sent where the card says')
    parser.add_argument('--binding', default='JSONRPC',
                        help='the one binding the client may use: JSONRPC, HTTP+JSON or GRPC')
    args = parser.parse_args()
    credentials = dict(c.split('=', 1) for c in args.credential)
    sys.exit(asyncio.run(main(args.base_url, args.tenant, credentials, args.binding)))
