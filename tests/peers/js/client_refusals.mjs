// What the official A2A JS SDK client (@a2a-js/sdk) shows its user when the gateway refuses
// a call. The twin of ../client_refusals.py.
//
//   node client_refusals.mjs BASE_URL CALLS
//
// Resolves the card at BASE_URL, makes the SDK's JSON-RPC client from it and sends `hello`
// CALLS times, one after the other, printing one line per call:
//   OK
//   RAISED <error class> <error.message> | code=<error.code, if any> data=<error.data, if any>
// Exit 0 once every call has been made; 1 if the card or the client could not be made.

import { randomUUID } from 'node:crypto';

import { SendMessageRequest } from '@a2a-js/sdk';
import { ClientFactory, JsonRpcTransportFactory } from '@a2a-js/sdk/client';

const [base, calls] = [process.argv[2], Number(process.argv[3])];
setTimeout(() => {
  console.error('FAIL: the run took more than 2 min');
  process.exit(1);
}, 120_000).unref();

let client;
try {
  // The resolver resolves the card path relative to the base: keep its last segment.
  const factory = new ClientFactory({ transports: [new JsonRpcTransportFactory()] });
  client = await factory.createFromUrl(base.endsWith('/') ? base : `${base}/`);
} catch (e) {
  console.error(`FAIL card/client: ${e?.name}: ${e?.message}`);
  process.exit(1);
}
for (let i = 0; i < calls; i++) {
  try {
    await client.sendMessage(SendMessageRequest.fromJSON({
      message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hello' }] },
    }));
    console.log('OK');
  } catch (e) {
    const text = String(e?.message).split(/\s+/).join(' ');
    const extra = [];
    if (e?.code !== undefined) extra.push(`code=${e.code}`);
    if (e?.data !== undefined) extra.push(`data=${JSON.stringify(e.data)}`);
    console.log(`RAISED ${e?.constructor?.name} ${text} | ${extra.join(' ')}`);
  }
}
