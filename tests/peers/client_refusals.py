"""What the a2a-sdk 1.3.0 client shows its user when the gateway refuses a call.

    python client_refusals.py BASE_URL CALLS

Resolves the card at BASE_URL (the card is public), makes the SDK's JSON-RPC client from it
and sends `hello` CALLS times, one after the other, printing one line per call:
    OK
    RAISED <exception class> <the exception as str> | data=<its .data, if it has one>
Exit 0 once every call has been made; 1 if the card or the client could not be made.
"""

import asyncio
import sys

import httpx

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from conversation_helpers import collect, request


async def main(base_url, calls):
    async with httpx.AsyncClient(timeout=30) as http:
        try:
            card = await asyncio.wait_for(A2ACardResolver(http, base_url).get_agent_card(), 60)
            config = ClientConfig(streaming=False, httpx_client=http,
                                  supported_protocol_bindings=['JSONRPC'])
            client = ClientFactory(config).create(card)
        except Exception as e:  # noqa: BLE001
            print(f'FAIL card/client: {type(e).__name__}: {e}', file=sys.stderr)
            return 1
        for _ in range(calls):
            try:
                await asyncio.wait_for(collect(client.send_message(request('hello'))), 60)
                print('OK', flush=True)
            except Exception as e:  # noqa: BLE001
                text = ' '.join(str(e).split())
                data = getattr(e, 'data', None)
                print(f'RAISED {type(e).__name__} {text} | data={data!r}', flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(asyncio.run(main(sys.argv[1], int(sys.argv[2]))))
