"""A Python A2A client that needs nothing but the gateway's base URL.

    python examples/client.py [BASE_URL]        # default: http://127.0.0.1:8080

Tested with a2a-sdk 1.3.0 (the version tests/peers/requirements.txt pins) against
`a2a-gateway --demo`. The SDK reads the agent card at BASE_URL/.well-known/agent-card.json,
picks the gateway's JSON-RPC interface from it and talks to that.
"""

import asyncio
import sys

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest, TaskState


def say(text):
    message = Message(message_id=f"example-{text}", role=Role.ROLE_USER, parts=[Part(text=text)])
    return SendMessageRequest(message=message)


async def main(base_url):
    async with httpx.AsyncClient(timeout=30) as http:
        card = await A2ACardResolver(http, base_url).get_agent_card()
        print(f"card: {card.name}, interface {card.supported_interfaces[0].url}")
        config = dict(httpx_client=http, supported_protocol_bindings=["JSONRPC"])
        client = ClientFactory(ClientConfig(streaming=False, **config)).create(card)

        # "hello": the demo agent answers with a message.
        async for event in client.send_message(say("hello")):
            print(f"reply: {event.message.parts[0].text}")

        # "task": a completed task with an artifact.
        async for event in client.send_message(say("task")):
            print(f"task: {TaskState.Name(event.task.status.state)}, "
                  f"artifact {event.task.artifacts[0].parts[0].text!r}")

        # "stream": Server-Sent Events through the gateway, one event at a time.
        streaming = ClientFactory(ClientConfig(streaming=True, **config)).create(card)
        async for event in streaming.send_message(say("stream")):
            print(f"event: {event.WhichOneof('payload')}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080"))
