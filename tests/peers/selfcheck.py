"""Self-check of the reference peer: every trigger on every binding.

    python selfcheck.py            # spawns agent.py on free ports, checks, stops it

Talks raw HTTP (JSON-RPC, REST) with httpx and gRPC with the SDK's generated stubs,
so it also checks the wire forms docs/compatibility.md documents. Prints one line per check
and "selfcheck: N passed, 0 failed" at the end; exits non-zero on any failure.
"""

import asyncio
import json
import os
import sys
import time

import grpc
import httpx
from google.protobuf.json_format import MessageToDict, ParseDict
from google.rpc import error_details_pb2, status_pb2

from a2a.types import a2a_pb2 as pb
from a2a.types import a2a_pb2_grpc

HERE = os.path.dirname(os.path.abspath(__file__))
V = {'A2A-Version': '1.0'}
ERROR_REASONS = {
    'TaskNotFound': 'TASK_NOT_FOUND', 'TaskNotCancelable': 'TASK_NOT_CANCELABLE',
    'PushNotificationNotSupported': 'PUSH_NOTIFICATION_NOT_SUPPORTED',
    'UnsupportedOperation': 'UNSUPPORTED_OPERATION',
    'ContentTypeNotSupported': 'CONTENT_TYPE_NOT_SUPPORTED',
    'InvalidAgentResponse': 'INVALID_AGENT_RESPONSE',
    'ExtendedAgentCardNotConfigured': 'EXTENDED_AGENT_CARD_NOT_CONFIGURED',
    'ExtensionSupportRequired': 'EXTENSION_SUPPORT_REQUIRED',
    'VersionNotSupported': 'VERSION_NOT_SUPPORTED', 'InvalidParams': 'INVALID_PARAMS',
    'InternalError': 'INTERNAL_ERROR',
}
EXT = 'https://a2a-gateway.test/ext/echo/v1'


class RpcError(Exception):
    """Normalized error: reason = ErrorInfo.reason, or a binding-specific code."""

    def __init__(self, reason, raw):
        super().__init__(f'{reason}: {raw}')
        self.reason, self.raw = reason, raw


def message(text, task_id=None):
    m = {'messageId': f'sc-{time.monotonic_ns()}', 'role': 'ROLE_USER', 'parts': [{'text': text}]}
    if task_id:
        m['taskId'] = task_id
    return {'message': m}


def http_error(body):
    for d in body.get('data') or body.get('details') or []:
        if d.get('@type', '').endswith('google.rpc.ErrorInfo'):
            return RpcError(d['reason'], body)
    return RpcError(str(body.get('status') or body.get('code')), body)


async def sse_events(lines):
    event, data = 'message', []
    async for line in lines:
        if line == '':
            if data:
                yield event, '\n'.join(data)
            event, data = 'message', []
        elif line.startswith('event:'):
            event = line[6:].strip()
        elif line.startswith('data:'):
            data.append(line[5:].lstrip(' '))


class JsonRpc:
    name = 'jsonrpc'

    def __init__(self, client, url):
        self.c, self.url, self.n = client, url, 0

    def _body(self, method, params):
        self.n += 1
        return {'jsonrpc': '2.0', 'id': self.n, 'method': method, 'params': params}

    async def call(self, method, params, headers=None):
        r = await self.c.post(self.url, json=self._body(method, params), headers={**V, **(headers or {})})
        body = r.json()
        if 'error' in body:
            raise http_error(body['error'])
        return body['result'], r.headers

    async def stream(self, method, params):
        async with self.c.stream('POST', self.url, json=self._body(method, params), headers=V) as r:
            if not r.headers['content-type'].startswith('text/event-stream'):
                raise http_error(json.loads(await r.aread())['error'])
            async for event, data in sse_events(_lines(r)):
                body = json.loads(data)
                if event == 'error' or 'error' in body:
                    raise http_error(body['error'])
                yield body['result']


async def _lines(response):
    async for line in response.aiter_lines():
        yield line.rstrip('\r')


class Rest:
    name = 'rest'
    ROUTES = {
        'SendMessage': ('POST', '/message:send'), 'GetTask': ('GET', '/tasks/{id}'),
        'CancelTask': ('POST', '/tasks/{id}:cancel'), 'ListTasks': ('GET', '/tasks'),
        'CreateTaskPushNotificationConfig': ('POST', '/tasks/{taskId}/pushNotificationConfigs'),
        'GetTaskPushNotificationConfig': ('GET', '/tasks/{taskId}/pushNotificationConfigs/{id}'),
        'ListTaskPushNotificationConfigs': ('GET', '/tasks/{taskId}/pushNotificationConfigs'),
        'DeleteTaskPushNotificationConfig': ('DELETE', '/tasks/{taskId}/pushNotificationConfigs/{id}'),
        'GetExtendedAgentCard': ('GET', '/extendedAgentCard'),
        'SendStreamingMessage': ('POST', '/message:stream'),
        'SubscribeToTask': ('POST', '/tasks/{id}:subscribe'),
    }

    def __init__(self, client, base):
        self.c, self.base = client, base

    def _req(self, method, params):
        verb, path = self.ROUTES[method]
        params = dict(params)
        for key in ('id', 'taskId'):
            if '{%s}' % key in path:
                path = path.replace('{%s}' % key, params.pop(key))
        if verb in ('GET', 'DELETE'):
            return verb, self.base + path, {'params': params}
        return verb, self.base + path, {'json': params}

    async def call(self, method, params, headers=None):
        verb, url, kw = self._req(method, params)
        r = await self.c.request(verb, url, headers={**V, **(headers or {})}, **kw)
        if r.status_code != 200:
            raise http_error(r.json()['error'])
        return r.json(), r.headers

    async def stream(self, method, params):
        verb, url, kw = self._req(method, params)
        async with self.c.stream(verb, url, headers=V, **kw) as r:
            if r.status_code != 200:
                raise http_error(json.loads(await r.aread())['error'])
            async for event, data in sse_events(_lines(r)):
                body = json.loads(data)
                if event == 'error':
                    raise http_error(body['error'])
                yield body


class Grpc:
    name = 'grpc'
    TYPES = {
        'SendMessage': pb.SendMessageRequest, 'GetTask': pb.GetTaskRequest,
        'CancelTask': pb.CancelTaskRequest, 'ListTasks': pb.ListTasksRequest,
        'CreateTaskPushNotificationConfig': pb.TaskPushNotificationConfig,
        'GetTaskPushNotificationConfig': pb.GetTaskPushNotificationConfigRequest,
        'ListTaskPushNotificationConfigs': pb.ListTaskPushNotificationConfigsRequest,
        'DeleteTaskPushNotificationConfig': pb.DeleteTaskPushNotificationConfigRequest,
        'GetExtendedAgentCard': pb.GetExtendedAgentCardRequest,
        'SendStreamingMessage': pb.SendMessageRequest, 'SubscribeToTask': pb.SubscribeToTaskRequest,
    }

    def __init__(self, channel):
        self.stub = a2a_pb2_grpc.A2AServiceStub(channel)

    @staticmethod
    def _error(e):
        for k, v in e.trailing_metadata() or ():
            if k == 'grpc-status-details-bin':
                st = status_pb2.Status.FromString(v)
                for d in st.details:
                    info = error_details_pb2.ErrorInfo()
                    if d.Unpack(info):
                        return RpcError(info.reason, (e.code().name, e.details()))
        return RpcError(e.code().name, e.details())

    async def call(self, method, params, headers=None):
        req = ParseDict(params, self.TYPES[method]())
        md = tuple((k.lower(), v) for k, v in {**V, **(headers or {})}.items())
        call = getattr(self.stub, method)(req, metadata=md)
        try:
            resp = await call
        except grpc.aio.AioRpcError as e:
            raise self._error(e) from None
        return MessageToDict(resp), dict(await call.initial_metadata() or ())

    async def stream(self, method, params):
        req = ParseDict(params, self.TYPES[method]())
        try:
            async for resp in getattr(self.stub, method)(req, metadata=(('a2a-version', '1.0'),)):
                yield MessageToDict(resp)
        except grpc.aio.AioRpcError as e:
            raise self._error(e) from None


def kinds(events):
    out = []
    for e in events:
        (k, v), = e.items()
        if k == 'statusUpdate':
            out.append('status:' + v['status']['state'].removeprefix('TASK_STATE_'))
        elif k == 'artifactUpdate':
            out.append('artifact' + ('+append' if v.get('append') else '') + ('+last' if v.get('lastChunk') else ''))
        elif k == 'task':
            out.append('task:' + v['status']['state'].removeprefix('TASK_STATE_'))
        else:
            out.append(k)
    return out


async def expect_error(coro, reason):
    try:
        await coro
    except RpcError as e:
        assert e.reason == reason, f'expected {reason}, got {e.reason}: {e.raw}'
        return
    raise AssertionError(f'expected error {reason}, got success')


async def check_binding(b, report):
    async def send(text, task_id=None):
        result, _ = await b.call('SendMessage', message(text, task_id))
        return result

    async def check(name, fn):
        try:
            await fn()
            report(True, f'{b.name:7} {name}')
        except Exception as e:  # noqa: BLE001
            report(False, f'{b.name:7} {name}: {type(e).__name__}: {e}')

    async def hello():
        r = await send('hello')
        assert r['message']['parts'][0]['text'] == 'echo: hello', r

    async def task():
        t = (await send('task'))['task']
        assert t['status']['state'] == 'TASK_STATE_COMPLETED', t
        data = t['artifacts'][0]['parts'][1]['data']
        assert data['answer'] == 42 and data['nested']['list'][1] == 2.5, data
        got, _ = await b.call('GetTask', {'id': t['id']})
        assert got['id'] == t['id'] and got['status']['state'] == 'TASK_STATE_COMPLETED'
        listed, _ = await b.call('ListTasks', {'contextId': t['contextId']})
        assert [x['id'] for x in listed['tasks']] == [t['id']], listed
        await expect_error(b.call('CancelTask', {'id': t['id']}), 'TASK_NOT_CANCELABLE')
        await expect_error(anext(b.stream('SubscribeToTask', {'id': t['id']})), 'UNSUPPORTED_OPERATION')
        # push config CRUD
        cfg = {'taskId': t['id'], 'id': 'cfg-1', 'url': 'http://127.0.0.1:9/hook', 'token': 'tok'}
        created, _ = await b.call('CreateTaskPushNotificationConfig', cfg)
        assert created['id'] == 'cfg-1' and created['url'] == cfg['url'], created
        got, _ = await b.call('GetTaskPushNotificationConfig', {'taskId': t['id'], 'id': 'cfg-1'})
        assert got['token'] == 'tok', got
        lst, _ = await b.call('ListTaskPushNotificationConfigs', {'taskId': t['id']})
        assert [c['id'] for c in lst['configs']] == ['cfg-1'], lst
        await b.call('DeleteTaskPushNotificationConfig', {'taskId': t['id'], 'id': 'cfg-1'})
        lst, _ = await b.call('ListTaskPushNotificationConfigs', {'taskId': t['id']})
        assert not lst.get('configs'), lst

    async def stream():
        t0, times, events = time.monotonic(), [], []
        async for ev in b.stream('SendStreamingMessage', message('stream')):
            events.append(ev)
            times.append(time.monotonic() - t0)
        assert kinds(events) == ['task:SUBMITTED', 'status:WORKING', 'artifact', 'artifact+append',
                                 'artifact+append+last', 'status:COMPLETED'], kinds(events)
        assert times[-1] - times[0] > 0.3, f'not incremental: {times}'

    async def input_required():
        t = (await send('input'))['task']
        assert t['status']['state'] == 'TASK_STATE_INPUT_REQUIRED', t
        t2 = (await send('more', task_id=t['id']))['task']
        assert t2['id'] == t['id'] and t2['status']['state'] == 'TASK_STATE_COMPLETED', t2
        assert t2['status']['message']['parts'][0]['text'] == 'got: more', t2

    async def slow_cancel_subscribe():
        stream = b.stream('SendStreamingMessage', message('slow:20'))
        first = await anext(stream)
        task_id = first['task']['id']
        sub = b.stream('SubscribeToTask', {'id': task_id})
        sub_first = await anext(sub)
        assert 'task' in sub_first and sub_first['task']['id'] == task_id, sub_first
        sub_next = await anext(sub)
        assert sub_next['statusUpdate']['status']['state'] == 'TASK_STATE_WORKING', sub_next
        canceled, _ = await b.call('CancelTask', {'id': task_id})
        assert canceled['status']['state'] == 'TASK_STATE_CANCELED', canceled
        for s in (stream, sub):  # both streams must end promptly
            rest = [e async for e in s]
            assert len(rest) < 20, f'stream did not end after cancel: {kinds(rest)}'
        got, _ = await b.call('GetTask', {'id': task_id})
        assert got['status']['state'] == 'TASK_STATE_CANCELED', got

    async def fail_reject():
        for text, state in (('fail', 'TASK_STATE_FAILED'), ('reject', 'TASK_STATE_REJECTED')):
            t = (await send(text))['task']
            assert t['status']['state'] == state, t

    async def errors():
        for name, reason in ERROR_REASONS.items():
            await expect_error(send('error:' + name), reason)
            await expect_error(anext(b.stream('SendStreamingMessage', message('error:' + name))), reason)
        boom = {'grpc': 'UNKNOWN', 'rest': 'INTERNAL', 'jsonrpc': '-32603'}[b.name]
        await expect_error(send('boom'), boom)
        await expect_error(b.call('GetTask', {'id': 'no-such-task'}), 'TASK_NOT_FOUND')

    async def late_error():
        events = []
        try:
            async for ev in b.stream('SendStreamingMessage', message('late-error:TaskNotCancelable')):
                events.append(ev)
        except RpcError as e:
            assert e.reason == 'TASK_NOT_CANCELABLE', e
            assert kinds(events) == ['task:SUBMITTED', 'status:WORKING'], kinds(events)
            return
        raise AssertionError('no error')

    async def headers():
        hdrs = {'A2A-Extensions': EXT + ', urn:unknown', 'Authorization': 'Bearer t0k',
                'traceparent': '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
                'X-Request-Id': 'req-7'}
        result, resp_headers = await b.call('SendMessage', message('headers'), headers=hdrs)
        seen = json.loads(result['message']['parts'][0]['text'])
        assert seen['binding'] == b.name and seen['a2a-version'] == '1.0', seen
        assert seen['authorization'] == 'Bearer t0k' and seen['x-request-id'] == 'req-7', seen
        assert seen['requested_extensions'] == [EXT, 'urn:unknown'], seen
        assert seen['activated_extensions'] == [EXT], seen
        assert resp_headers.get('a2a-extensions') == EXT, dict(resp_headers)

    async def extended_card():
        card, _ = await b.call('GetExtendedAgentCard', {})
        assert 'extended-only' in [s['id'] for s in card['skills']], card

    for name, fn in [('hello', hello), ('task+get+list+cancel/subscribe terminal+push CRUD', task),
                     ('stream', stream), ('input-required follow-up', input_required),
                     ('slow: subscribe + cancel', slow_cancel_subscribe), ('fail/reject', fail_reject),
                     ('error:<NAME> x11 + boom + GetTask unknown', errors), ('late-error', late_error),
                     ('headers + extension activation', headers), ('extended card', extended_card)]:
        await check(name, fn)


async def main():
    proc = await asyncio.create_subprocess_exec(
        sys.executable, os.path.join(HERE, 'agent.py'), '--grpc-port', '0', '--http-port', '0',
        stdout=asyncio.subprocess.PIPE)
    try:
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode().strip()
        assert line.startswith('READY '), f'bad READY line: {line!r}'
        ready = dict(kv.split('=', 1) for kv in line.split()[1:])
        print('agent:', line)
        results = []

        def report(ok, text):
            results.append(ok)
            print(('ok   ' if ok else 'FAIL ') + text, flush=True)

        http = f"http://{ready['http']}"
        async with httpx.AsyncClient(timeout=60) as client, \
                grpc.aio.insecure_channel(ready['grpc']) as channel:
            for b in (JsonRpc(client, http + ready['jsonrpc']), Rest(client, http + ready['rest']),
                      Grpc(channel)):
                await check_binding(b, report)
        failed = results.count(False)
        print(f'selfcheck: {results.count(True)} passed, {failed} failed')
        return 1 if failed else 0
    finally:
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 5)
        except asyncio.TimeoutError:
            proc.kill()


if __name__ == '__main__':
    sys.exit(asyncio.run(main()))
