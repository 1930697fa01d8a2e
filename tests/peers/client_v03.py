"""The reference SDK's v0.3 client (a2a-sdk 1.3.0's compat JSON-RPC transport) through the
gateway, discovering the agent from the gateway's card.

    python client_v03.py http://127.0.0.1:PORT        (the gateway's base URL)

The card is fetched as a v0.3 client asks for it (`A2A-Version: 0.3`); the SDK maps the v0.3
card's `url`/`preferredTransport`/`protocolVersion` to an interface of version 0.3, for which
its ClientFactory builds CompatJsonRpcTransport, which speaks v0.3 JSON-RPC (`message/send`,
`tasks/get`, ..., `kind`-tagged objects). The conversation is client_conversation.py's, less
the steps v0.3 has no method for. Prints one line per step and `OK <n> steps`; at the first
failure `FAIL step <n> (<name>): <reason>` on stderr and exit 1.
"""

import asyncio
import sys

import httpx

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.compat.v0_3.jsonrpc_transport import CompatJsonRpcTransport
from client_conversation import conversation
from conversation_helpers import run_steps

NOT_IN_V03 = {'list tasks by context'}  # v0.3 has no tasks/list


async def main(base):
    async with httpx.AsyncClient(timeout=60) as http:
        card = await A2ACardResolver(http, base).get_agent_card(
            http_kwargs={'headers': {'A2A-Version': '0.3'}})
        interfaces = [(i.url, i.protocol_binding, i.protocol_version) for i in card.supported_interfaces]
        print(f'card interfaces: {interfaces}', flush=True)
        unary = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
        streaming = ClientFactory(ClientConfig(streaming=True, httpx_client=http)).create(card)
        transport = type(unary._transport).__name__  # noqa: SLF001
        if not isinstance(unary._transport, CompatJsonRpcTransport):  # noqa: SLF001
            print(f'FAIL step 0 (discovery): the SDK chose {transport}, not its v0.3 transport',
                  file=sys.stderr)
            return 1
        steps = [(name, step) for name, step in await conversation(unary, streaming)
                 if name not in NOT_IN_V03]
        if not await run_steps(steps):
            return 1
    print(f'OK {len(steps)} steps over {transport}')
    return 0


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit('usage: client_v03.py GATEWAY_BASE_URL')
    sys.exit(asyncio.run(main(sys.argv[1])))
