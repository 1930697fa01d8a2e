"""Deterministic A2A test agent built on the reference SDK (a2a-sdk 1.3.0).

One process serves the same agent on three bindings:
  * gRPC   (lf.a2a.v1.A2AService)        on 127.0.0.1:<--grpc-port>
  * JSON-RPC  POST /jsonrpc              on 127.0.0.1:<--http-port>
  * HTTP+JSON (REST) under /rest         on the same HTTP port
    (/rest/message:send, /rest/tasks/{id}, /rest/{tenant}/tasks/{id}, ...)
  * public agent card at /.well-known/agent-card.json
  * the SDK's v0.3 compatibility JSON-RPC endpoint: POST /v03/jsonrpc (v0.3 method names;
    the reference for tests/it/legacy.rs)

Usage:  python agent.py --grpc-port P1 --http-port P2      (0 = pick a free port)
When all listeners are up it prints exactly one stdout line, then serves until
SIGTERM/SIGINT:
  READY grpc=127.0.0.1:<p1> http=127.0.0.1:<p2> jsonrpc=/jsonrpc rest=/rest jsonrpc03=/v03/jsonrpc

Environment: A2A_TEST_MIN_PING_MS=N sets the gRPC server's ping policy (grpc C-core's
grpc.http2.min_ping_interval_without_data_ms, default 300000) to N ms, and
A2A_TEST_MAX_PING_STRIKES=K its grpc.http2.max_ping_strikes (default 2); a client
pinging more often than that gets GOAWAY ENHANCE_YOUR_CALM "too_many_pings" on the
third strike. Used by tests/it/keepalive.rs to scale C-core's 5-minute window down.

Push notifications: configs live in the SDK's in-memory store and the SDK's
BasePushNotificationSender POSTs every later task event to each config's URL.
The extended agent card is configured (it adds the skill "extended-only").

Behaviour is chosen by the first text part of the incoming message:
  hello / anything else  direct Message (no task): text "echo: <text>".
  task                   completed Task with one artifact "result": a text part
                         and a data part with nested JSON (ints, floats, list...).
  stream                 submitted Task -> working status -> 3 artifact chunks of
                         artifact "stream-artifact" (append=false, true, true;
                         last_chunk on the 3rd) -> completed. 0.1 s between events.
  input                  Task -> input-required. A follow-up message with the same
                         taskId (any text) completes it: "got: <text>".
  slow[:SECONDS]         Task -> working, then a working status update (metadata
                         {"tick": n}) every 0.2 s for SECONDS (default 30), then
                         completed. Cancelable; SubscribeToTask works meanwhile.
  fail / reject          Task ending in TASK_STATE_FAILED / TASK_STATE_REJECTED.
  error:<NAME>           raises the SDK error before any event. NAME is one of
                         TaskNotFound, TaskNotCancelable, PushNotificationNotSupported,
                         UnsupportedOperation, ContentTypeNotSupported,
                         InvalidAgentResponse, ExtendedAgentCardNotConfigured,
                         ExtensionSupportRequired, VersionNotSupported, InvalidParams,
                         InternalError (an "Error" suffix is accepted too).
  late-error:<NAME>      submitted Task + working status, then raises <NAME>
                         (shows how mid-stream errors are framed).
  boom                   raises a plain RuntimeError("boom").
  headers                direct Message whose text is a sorted-keys JSON object
                         (also in message metadata) with what the agent saw:
                         binding, a2a-version, a2a-extensions, authorization,
                         traceparent, x-request-id, requested_extensions,
                         activated_extensions, tenant.

Extensions: the card declares EXTENSIONS below. For every message, the requested
extensions that the card declares are "activated" and reported back in the
`A2A-Extensions` HTTP response header / `a2a-extensions` gRPC initial metadata
(a2a-sdk 1.3.0 has no built-in activation mechanism; this agent adds one).
"""

import argparse
import asyncio
import json
import logging
import os
import signal
import socket
import sys
import uuid

import grpc
import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.routing import Mount

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
from a2a.server.routes import (
    DefaultServerCallContextBuilder,
    create_agent_card_routes,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.server.tasks import (
    BasePushNotificationSender, InMemoryPushNotificationConfigStore, InMemoryTaskStore, TaskUpdater,
)
from a2a.helpers import new_data_part, new_text_part
from a2a.types import a2a_pb2_grpc
from a2a.types.a2a_pb2 import (
    AgentCapabilities, AgentCard, AgentExtension, AgentInterface, AgentSkill,
    Message, Role, Task, TaskState, TaskStatus,
)
from a2a.utils import errors as a2a_errors

JSONRPC_PATH = '/jsonrpc'
JSONRPC03_PATH = '/v03/jsonrpc'
REST_PATH = '/rest'
EXTENSIONS = ['https://a2a-gateway.test/ext/echo/v1', 'https://a2a-gateway.test/ext/trace/v1']
REPORTED_HEADERS = ['a2a-version', 'a2a-extensions', 'authorization', 'traceparent', 'x-request-id']
ERRORS = {
    name: getattr(a2a_errors, name + 'Error')
    for name in [
        'TaskNotFound', 'TaskNotCancelable', 'PushNotificationNotSupported',
        'UnsupportedOperation', 'ContentTypeNotSupported', 'InvalidAgentResponse',
        'ExtendedAgentCardNotConfigured', 'ExtensionSupportRequired',
        'VersionNotSupported', 'InvalidParams', 'Internal',
    ]
}
ERRORS['InternalError'] = ERRORS['Internal']
TASK_DATA = {
    'answer': 42, 'pi': 3.14159, 'negative': -7, 'big': 9007199254740993,
    'nested': {'list': [1, 2.5, 'three', True, None], 'empty': {}, 'flag': False},
}


def make_error(name: str) -> Exception:
    cls = ERRORS.get(name.removesuffix('Error')) or ERRORS.get(name)
    if cls is None:
        return ValueError(f'unknown error name {name!r}')
    return cls(message=f'test agent raised {cls.__name__}')


def first_text(message: Message | None) -> str:
    for part in message.parts if message else []:
        if part.HasField('text'):
            return part.text
    return ''


def context_id_of(ctx: RequestContext) -> str:
    # a2a-sdk 1.3.0 gives a follow-up message that names a taskId but no contextId a
    # fresh ctx.context_id; events must keep the task's own contextId.
    return ctx.current_task.context_id if ctx.current_task else ctx.context_id


def agent_message(ctx: RequestContext, text: str, task_id: str | None = None) -> Message:
    return Message(
        role=Role.ROLE_AGENT, message_id=str(uuid.uuid4()), context_id=context_id_of(ctx),
        task_id=task_id, parts=[new_text_part(text)],
    )


def seen_headers(ctx: RequestContext) -> dict:
    """Service parameters and auth as the SDK hands them to the agent."""
    state = ctx.call_context.state
    if 'grpc_context' in state:
        binding = 'grpc'
        pairs = [(k.lower(), v if isinstance(v, str) else v.decode())
                 for k, v in state['grpc_context'].invocation_metadata() or ()]
    else:
        binding = 'jsonrpc' if 'method' in state else 'rest'
        pairs = state.get('raw_headers') or list(state.get('headers', {}).items())
    report: dict = {'binding': binding, 'tenant': ctx.call_context.tenant}
    for name in REPORTED_HEADERS:
        values = [v for k, v in pairs if k == name]
        report[name] = ', '.join(values) if values else None
    report['requested_extensions'] = sorted(ctx.requested_extensions)
    report['activated_extensions'] = sorted(state.get('activated_extensions', []))
    return report


async def activate_extensions(ctx: RequestContext) -> None:
    """Mark requested+declared extensions as activated and report them back."""
    active = sorted(ctx.requested_extensions & set(EXTENSIONS))
    state = ctx.call_context.state
    if not active:
        return
    state['activated_extensions'] = active  # HTTP: read by ExtensionHeaderMiddleware
    grpc_ctx = state.get('grpc_context')
    if grpc_ctx is not None:
        await grpc_ctx.send_initial_metadata((('a2a-extensions', ','.join(active)),))


class TestAgentExecutor(AgentExecutor):
    async def execute(self, ctx: RequestContext, queue: EventQueue) -> None:
        await activate_extensions(ctx)
        text = first_text(ctx.message)
        updater = TaskUpdater(queue, ctx.task_id, context_id_of(ctx))
        current = ctx.current_task
        if current is not None and current.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            await updater.complete(agent_message(ctx, f'got: {text}', ctx.task_id))
            return
        cmd, _, arg = text.partition(':')
        if cmd == 'error':
            raise make_error(arg)
        if text == 'boom':
            raise RuntimeError('boom')
        if text == 'headers':
            report = seen_headers(ctx)
            msg = agent_message(ctx, json.dumps(report, sort_keys=True))
            msg.metadata.update({k: v for k, v in report.items()})
            await queue.enqueue_event(msg)
            return
        if cmd not in ('task', 'stream', 'input', 'slow', 'fail', 'reject', 'late-error'):
            await queue.enqueue_event(agent_message(ctx, f'echo: {text}'))
            return

        # Task-based behaviours: the Task itself must be the first event.
        await queue.enqueue_event(Task(
            id=ctx.task_id, context_id=ctx.context_id,
            status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED), history=[ctx.message],
        ))
        if cmd == 'task':
            await updater.start_work()
            await updater.add_artifact(
                [new_text_part('the answer'), new_data_part(TASK_DATA)],
                artifact_id='result-artifact', name='result', last_chunk=True)
            await updater.complete(agent_message(ctx, 'task done', ctx.task_id))
        elif cmd == 'stream':
            await asyncio.sleep(0.1)
            await updater.start_work(agent_message(ctx, 'working on stream', ctx.task_id))
            for i, chunk in enumerate(['chunk-1 ', 'chunk-2 ', 'chunk-3']):
                await asyncio.sleep(0.1)
                await updater.add_artifact(
                    [new_text_part(chunk)], artifact_id='stream-artifact', name='stream',
                    append=i > 0, last_chunk=i == 2)
            await asyncio.sleep(0.1)
            await updater.complete(agent_message(ctx, 'stream done', ctx.task_id))
        elif cmd == 'input':
            await updater.requires_input(agent_message(ctx, 'need more input', ctx.task_id))
        elif cmd == 'slow':
            seconds = float(arg) if arg else 30.0
            await updater.start_work(agent_message(ctx, 'slow started', ctx.task_id))
            for tick in range(1, int(seconds / 0.2) + 1):
                await asyncio.sleep(0.2)
                await updater.update_status(TaskState.TASK_STATE_WORKING, metadata={'tick': tick})
            await updater.complete(agent_message(ctx, 'slow done', ctx.task_id))
        elif cmd == 'fail':
            await updater.failed(agent_message(ctx, 'failed on purpose', ctx.task_id))
        elif cmd == 'reject':
            await updater.reject(agent_message(ctx, 'rejected on purpose', ctx.task_id))
        elif cmd == 'late-error':
            await updater.start_work()
            await asyncio.sleep(0.1)
            raise make_error(arg)

    async def cancel(self, ctx: RequestContext, queue: EventQueue) -> None:
        updater = TaskUpdater(queue, ctx.task_id, context_id_of(ctx))
        await updater.cancel(agent_message(ctx, 'canceled', ctx.task_id))


class CallContextBuilder(DefaultServerCallContextBuilder):
    """Default HTTP context plus the raw header list; remembers the context in the ASGI
    scope so ExtensionHeaderMiddleware can see which extensions were activated."""

    def build(self, request):
        ctx = super().build(request)
        ctx.state['raw_headers'] = [(k.lower(), v) for k, v in request.headers.items()]
        request.scope['a2a.call_context'] = ctx
        return ctx


class ExtensionHeaderMiddleware:
    """Adds `A2A-Extensions: <activated>` to HTTP responses (JSON-RPC and REST)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope['type'] != 'http':
            return await self.app(scope, receive, send)

        async def send_with_header(event):
            if event['type'] == 'http.response.start':
                ctx = scope.get('a2a.call_context')
                active = ctx.state.get('activated_extensions') if ctx else None
                if active:
                    event['headers'] = [*event.get('headers', []),
                                        (b'a2a-extensions', ','.join(active).encode())]
            await send(event)

        await self.app(scope, receive, send_with_header)


def build_cards(grpc_addr: str, http_base: str) -> tuple[AgentCard, AgentCard]:
    card = AgentCard(
        name='a2a-gateway reference peer', description='Deterministic a2a-sdk 1.3.0 test agent',
        version='1.0.0',
        supported_interfaces=[
            AgentInterface(url=http_base + JSONRPC_PATH, protocol_binding='JSONRPC', protocol_version='1.0'),
            AgentInterface(url=http_base + REST_PATH, protocol_binding='HTTP+JSON', protocol_version='1.0'),
            AgentInterface(url=grpc_addr, protocol_binding='GRPC', protocol_version='1.0'),
        ],
        capabilities=AgentCapabilities(
            streaming=True, push_notifications=True, extended_agent_card=True,
            extensions=[AgentExtension(uri=u, description='test extension') for u in EXTENSIONS],
        ),
        default_input_modes=['text/plain', 'application/json'],
        default_output_modes=['text/plain', 'application/json'],
        skills=[AgentSkill(id='echo', name='echo', description='Echoes and test triggers',
                           tags=['test'], examples=['hello', 'task', 'stream'])],
    )
    extended = AgentCard()
    extended.CopyFrom(card)
    extended.skills.append(AgentSkill(id='extended-only', name='extended-only',
                                      description='Only in the extended card', tags=['test']))
    return card, extended


def bind(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(('127.0.0.1', port))
    except OSError as e:
        sys.exit(f'agent.py: cannot bind HTTP port {port}: {e}')
    sock.listen(128)
    sock.setblocking(False)
    return sock


class QuietServer(uvicorn.Server):
    def capture_signals(self):  # we install our own SIGTERM/SIGINT handlers
        import contextlib
        return contextlib.nullcontext()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--grpc-port', type=int, default=0)
    parser.add_argument('--http-port', type=int, default=0)
    parser.add_argument('--log-level', default='critical',
                        help='uvicorn and a2a-sdk log level (default: critical; the error '
                             'triggers make the SDK log tracebacks at ERROR)')
    args = parser.parse_args()
    logging.basicConfig(level=args.log_level.upper(), format='agent.py %(levelname)s %(name)s: %(message)s')

    http_sock = bind(args.http_port)
    http_port = http_sock.getsockname()[1]
    grpc_options = [('grpc.so_reuseport', 0)]
    if os.environ.get('A2A_TEST_MIN_PING_MS'):
        grpc_options.append(('grpc.http2.min_ping_interval_without_data_ms',
                             int(os.environ['A2A_TEST_MIN_PING_MS'])))
    if os.environ.get('A2A_TEST_MAX_PING_STRIKES'):
        grpc_options.append(('grpc.http2.max_ping_strikes',
                             int(os.environ['A2A_TEST_MAX_PING_STRIKES'])))
    grpc_server = grpc.aio.server(options=grpc_options)
    try:
        grpc_port = grpc_server.add_insecure_port(f'127.0.0.1:{args.grpc_port}')
    except RuntimeError as e:
        sys.exit(f'agent.py: cannot bind gRPC port {args.grpc_port}: {e}')
    grpc_addr, http_base = f'127.0.0.1:{grpc_port}', f'http://127.0.0.1:{http_port}'

    card, extended = build_cards(grpc_addr, http_base)
    push_store = InMemoryPushNotificationConfigStore()
    push_http = httpx.AsyncClient(timeout=5)
    handler = DefaultRequestHandler(
        agent_executor=TestAgentExecutor(), task_store=InMemoryTaskStore(), agent_card=card,
        push_config_store=push_store, push_sender=BasePushNotificationSender(push_http, push_store),
        extended_agent_card=extended,
    )
    builder = CallContextBuilder()
    routes = [
        *create_agent_card_routes(card),
        *create_jsonrpc_routes(handler, JSONRPC_PATH, context_builder=builder),
        *create_jsonrpc_routes(handler, JSONRPC03_PATH, context_builder=builder,
                               enable_v0_3_compat=True),
        Mount(REST_PATH, routes=create_rest_routes(handler, context_builder=builder)),
    ]
    app = ExtensionHeaderMiddleware(Starlette(routes=routes))
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), grpc_server)
    await grpc_server.start()

    server = QuietServer(uvicorn.Config(app, log_level=args.log_level, lifespan='off',
                                        timeout_graceful_shutdown=0.5))
    serve_task = asyncio.create_task(server.serve(sockets=[http_sock]))
    while not server.started:
        if serve_task.done():
            serve_task.result()
            sys.exit('agent.py: HTTP server exited during startup')
        await asyncio.sleep(0.01)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f'READY grpc={grpc_addr} http=127.0.0.1:{http_port} '
          f'jsonrpc={JSONRPC_PATH} rest={REST_PATH} jsonrpc03={JSONRPC03_PATH}', flush=True)

    await stop.wait()
    server.should_exit = True  # open SSE streams get timeout_graceful_shutdown, then are cut
    await asyncio.gather(grpc_server.stop(grace=0.3), asyncio.wait({serve_task}, timeout=2))
    try:
        await asyncio.wait_for(handler.aclose(), timeout=1)
    except asyncio.TimeoutError:
        pass
    await push_http.aclose()


if __name__ == '__main__':
    asyncio.run(main())
