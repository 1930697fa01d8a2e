// A JavaScript A2A client that needs nothing but the gateway's base URL.
//
//   node examples/client.mjs [BASE_URL]        # default: http://127.0.0.1:8080/
//
// Tested with @a2a-js/sdk 1.3.0 (the version tests/peers/js/package.json pins) on Node 20
// against `a2a-gateway --demo`. The SDK reads the agent card at
// BASE_URL/.well-known/agent-card.json, picks the gateway's JSON-RPC interface and talks
// to it. It resolves the card path relative to the base URL, so the base must end in `/`
// (without it, http://gw/agents/billing would fetch http://gw/agents/.well-known/...).

import { randomUUID } from 'node:crypto';

import { SendMessageRequest, taskStateToJSON } from '@a2a-js/sdk';
import { ClientFactory } from '@a2a-js/sdk/client';

const say = (text) => SendMessageRequest.fromJSON({
  message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] },
});

const arg = process.argv[2] ?? 'http://127.0.0.1:8080/';
const base = arg.endsWith('/') ? arg : `${arg}/`;
const client = await new ClientFactory().createFromUrl(base);
console.log(`card: ${client.agentCard.name}, interface ${client.agentCard.supportedInterfaces[0].url}`);

// "hello": the demo agent answers with a message.
const reply = await client.sendMessage(say('hello'));
console.log(`reply: ${reply.parts[0].content.value}`);

// "task": a completed task with an artifact.
const task = await client.sendMessage(say('task'));
console.log(`task: ${taskStateToJSON(task.status.state)}, artifact '${task.artifacts[0].parts[0].content.value}'`);

// "stream": Server-Sent Events through the gateway, one event at a time.
for await (const event of client.sendMessageStream(say('stream'))) {
  console.log(`event: ${event.payload.$case}`);
}
