"""Full A2A conversation against a JSON-RPC endpoint, using the a2a-sdk 1.3.0 client.

    python client_conversation.py http://127.0.0.1:PORT/jsonrpc
    python client_conversation.py --grpc 127.0.0.1:PORT      # the SDK's gRPC client instead

The endpoint must behave like tests/peers/agent.py (directly, or through the
gateway). Prints one line per step and `OK <n> steps` at the end; at the first
failure prints `FAIL step <n> (<name>): <reason>` to stderr and exits 1.

How the SDK client is built (no agent-card fetch, JSON-RPC only):
    card = minimal_agent_card(url, ['JSONRPC'])      # AgentInterface(url, 'JSONRPC')
    card.capabilities.streaming = True                # else send_message never streams
    client = ClientFactory(ClientConfig(streaming=..., httpx_client=...)).create(card)
The factory's httpx client sends `A2A-Version: 1.0` on every request. Calls take
the proto request types (a2a.types.a2a_pb2) and return protos; JSON-RPC errors
are raised as the matching a2a.utils.errors class (TaskNotFoundError, ...).
"""

import asyncio
import json
import sys

import httpx

from a2a.client import ClientCallContext, ClientConfig, ClientFactory, minimal_agent_card
from a2a.helpers import get_message_text
from a2a.types.a2a_pb2 import (
    CancelTaskRequest, DeleteTaskPushNotificationConfigRequest, GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest, GetTaskRequest, ListTaskPushNotificationConfigsRequest,
    ListTasksRequest, SubscribeToTaskRequest, TaskPushNotificationConfig, TaskState,
)
from a2a.utils.errors import A2AError, TaskNotCancelableError, TaskNotFoundError
from conversation_helpers import StepFailed, check, collect, kind, request, run_steps

EXT = 'https://a2a-gateway.test/ext/echo/v1'



async def conversation(unary, streaming):
    """Yields (step name, coroutine) pairs; state flows through `ctx`."""
    ctx = {}

    async def hello():
        [ev] = await collect(unary.send_message(request('hello')))
        check(ev.HasField('message'), f'expected a Message, got {kind(ev)}')
        check(get_message_text(ev.message) == 'echo: hello', f'text {get_message_text(ev.message)!r}')

    async def task():
        [ev] = await collect(unary.send_message(request('task')))
        check(ev.HasField('task'), f'expected a Task, got {kind(ev)}')
        t = ev.task
        check(t.status.state == TaskState.TASK_STATE_COMPLETED, f'state {TaskState.Name(t.status.state)}')
        data = t.artifacts[0].parts[1].data.struct_value
        check(data['answer'] == 42 and data['nested']['list'][1] == 2.5, f'artifact data {data}')
        ctx['task'] = t

    async def get_task():
        t = await unary.get_task(GetTaskRequest(id=ctx['task'].id, history_length=1))
        check(t.id == ctx['task'].id and len(t.history) <= 1, f'GetTask returned {t.id} / {len(t.history)} msgs')

    async def list_tasks():
        r = await unary.list_tasks(ListTasksRequest(context_id=ctx['task'].context_id))
        check([t.id for t in r.tasks] == [ctx['task'].id], f'ListTasks ids {[t.id for t in r.tasks]}')

    async def push_crud():
        tid = ctx['task'].id
        cfg = await unary.create_task_push_notification_config(TaskPushNotificationConfig(
            task_id=tid, id='cfg-1', url='http://127.0.0.1:9/hook', token='tok'))
        check(cfg.id == 'cfg-1' and cfg.task_id == tid, f'created {cfg}')
        got = await unary.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=tid, id='cfg-1'))
        check(got.token == 'tok', f'got {got}')
        lst = await unary.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=tid))
        check([c.id for c in lst.configs] == ['cfg-1'], f'list {lst}')
        await unary.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=tid, id='cfg-1'))
        lst = await unary.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=tid))
        check(len(lst.configs) == 0, f'list after delete {lst}')

    async def stream():
        kinds = [kind(ev) for ev in await collect(streaming.send_message(request('stream')))]
        want = ['task:SUBMITTED', 'status:WORKING', 'artifact_update', 'artifact_update',
                'artifact_update', 'status:COMPLETED']
        check(kinds == want, f'stream events {kinds}')

    async def input_required():
        [ev] = await collect(unary.send_message(request('input')))
        check(ev.task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, f'first turn {kind(ev)}')
        [ev2] = await collect(unary.send_message(request('more', task_id=ev.task.id)))
        check(ev2.task.id == ev.task.id and ev2.task.status.state == TaskState.TASK_STATE_COMPLETED,
              f'second turn {kind(ev2)}')

    async def slow_subscribe_cancel():
        [ev] = await collect(unary.send_message(request('slow:20', return_immediately=True)))
        check(ev.HasField('task'), f'expected a Task, got {kind(ev)}')
        tid = ev.task.id
        sub = streaming.subscribe(SubscribeToTaskRequest(id=tid))
        first, second = await anext(sub), await anext(sub)
        check(first.HasField('task') and first.task.id == tid, f'subscribe first event {kind(first)}')
        check(kind(second) == 'status:WORKING', f'subscribe second event {kind(second)}')
        t = await unary.cancel_task(CancelTaskRequest(id=tid))
        check(t.status.state == TaskState.TASK_STATE_CANCELED, f'cancel -> {TaskState.Name(t.status.state)}')
        rest = await asyncio.wait_for(collect(sub), 10)
        check(len(rest) < 20, f'subscription did not end after cancel ({len(rest)} more events)')
        ctx['canceled'] = tid

    async def cancel_terminal():
        try:
            await unary.cancel_task(CancelTaskRequest(id=ctx['canceled']))
        except TaskNotCancelableError:
            return
        raise StepFailed('canceling a canceled task did not raise TaskNotCancelableError')

    async def get_unknown():
        try:
            await unary.get_task(GetTaskRequest(id='no-such-task'))
        except TaskNotFoundError:
            return
        raise StepFailed('GetTask(no-such-task) did not raise TaskNotFoundError')

    async def agent_error():
        try:
            await collect(unary.send_message(request('error:ContentTypeNotSupported')))
        except A2AError as e:
            check(type(e).__name__ == 'ContentTypeNotSupportedError', f'raised {type(e).__name__}')
            return
        raise StepFailed('error:ContentTypeNotSupported did not raise')

    async def headers():
        call = ClientCallContext(service_parameters={'A2A-Extensions': EXT, 'X-Request-Id': 'conv-1'})
        [ev] = await collect(unary.send_message(request('headers'), context=call))
        seen = json.loads(get_message_text(ev.message))
        check(seen['a2a-version'] == '1.0', f'A2A-Version seen by agent: {seen["a2a-version"]!r}')
        check(seen['requested_extensions'] == [EXT], f'extensions seen by agent: {seen}')
        check(seen['x-request-id'] == 'conv-1', f'x-request-id seen by agent: {seen}')

    async def extended_card():
        card = await unary.get_extended_agent_card(GetExtendedAgentCardRequest())
        check('extended-only' in [s.id for s in card.skills], f'skills {[s.id for s in card.skills]}')

    return [('send hello -> message', hello), ('send task -> completed task', task),
            ('get task', get_task), ('list tasks by context', list_tasks),
            ('push config create/get/list/delete', push_crud), ('stream', stream),
            ('input-required + follow-up', input_required),
            ('slow: subscribe + cancel', slow_subscribe_cancel),
            ('cancel terminal -> TaskNotCancelable', cancel_terminal),
            ('get unknown -> TaskNotFound', get_unknown),
            ('agent error -> ContentTypeNotSupported', agent_error),
            ('service parameters reach agent', headers), ('extended agent card', extended_card)]


async def main(url, binding):
    card = minimal_agent_card(url, [binding])
    card.capabilities.streaming = True
    async with httpx.AsyncClient(timeout=60) as http:
        def config(streaming):
            if binding == 'JSONRPC':
                return ClientConfig(streaming=streaming, httpx_client=http)
            import grpc
            return ClientConfig(streaming=streaming, supported_protocol_bindings=['GRPC'],
                                grpc_channel_factory=grpc.aio.insecure_channel)
        unary = ClientFactory(config(False)).create(card)
        streaming = ClientFactory(config(True)).create(card)
        steps = await conversation(unary, streaming)
        if not await run_steps(steps):
            return 1
    print(f'OK {len(steps)} steps')
    return 0


if __name__ == '__main__':
    if len(sys.argv) == 2:
        sys.exit(asyncio.run(main(sys.argv[1], 'JSONRPC')))
    if len(sys.argv) == 3 and sys.argv[1] == '--grpc':
        sys.exit(asyncio.run(main(sys.argv[2], 'GRPC')))
    sys.exit('usage: client_conversation.py JSONRPC_URL | --grpc HOST:PORT')
