"""Conversation helpers shared by the SDK client scripts (client_conversation.py,
client_from_card.py, client_v03.py): the request builder, the step check, event kinds as
short names, and the step runner with its report lines."""

import asyncio
import sys
import uuid

from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest, TaskState


class StepFailed(Exception):
    pass


def request(text, task_id=None, return_immediately=False):
    req = SendMessageRequest(message=Message(
        message_id=str(uuid.uuid4()), role=Role.ROLE_USER, task_id=task_id, parts=[Part(text=text)]))
    req.configuration.return_immediately = return_immediately
    return req


def check(cond, what):
    if not cond:
        raise StepFailed(what)


def kind(ev):
    which = ev.WhichOneof('payload')
    if which == 'status_update':
        return 'status:' + TaskState.Name(ev.status_update.status.state).removeprefix('TASK_STATE_')
    if which == 'task':
        return 'task:' + TaskState.Name(ev.task.status.state).removeprefix('TASK_STATE_')
    return which


async def collect(aiter):
    return [ev async for ev in aiter]


async def run_steps(steps):
    """Runs (name, step) pairs in order, each within 60 s, printing `step N: NAME: ok` or
    `FAIL step N (NAME): ...` (to stderr); True when every step passed."""
    for n, (name, step) in enumerate(steps, 1):
        try:
            await asyncio.wait_for(step(), 60)
        except Exception as e:  # noqa: BLE001
            reason = ' | '.join(str(e).splitlines())
            print(f'FAIL step {n} ({name}): {type(e).__name__}: {reason}', file=sys.stderr)
            return False
        print(f'step {n}: {name}: ok', flush=True)
    return True
