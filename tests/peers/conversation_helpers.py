"""Conversation helpers shared by client_conversation.py and client_from_card.py: the
request builder, the step check, and event kinds as short names."""

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
