// Evaluates flags through a Switchyard agent with OpenFeature's own server
// SDK and OFREP provider. node_test.go drives it: one JSON command per line
// on stdin, one JSON answer per line on stdout.
//
//   {"type":"boolean","flag":"recommend","keys":["u1","u2"],"default":false}
//   {"type":"object","flag":"recommend:fallback","default":{}}
//
// Each answer is a list of the client's evaluation details, one per key
// (one without a targeting key when keys is absent).
import { createInterface } from 'node:readline';
import { OpenFeature } from '@openfeature/server-sdk';
import { OFREPProvider } from '@openfeature/ofrep-provider';

await OpenFeature.setProviderAndWait(new OFREPProvider({ baseUrl: process.env.OFREP_URL }));
const client = OpenFeature.getClient();

async function evaluate(cmd, targetingKey) {
  const ctx = targetingKey === undefined ? {} : { targetingKey };
  const d = cmd.type === 'object'
    ? await client.getObjectDetails(cmd.flag, cmd.default, ctx)
    : await client.getBooleanDetails(cmd.flag, cmd.default, ctx);
  return { value: d.value, reason: d.reason, variant: d.variant ?? '', errorCode: d.errorCode ?? '',
    errorMessage: d.errorMessage ?? '', metadata: d.flagMetadata };
}

console.log(JSON.stringify({ ready: true }));
for await (const line of createInterface({ input: process.stdin })) {
  const cmd = JSON.parse(line);
  const out = [];
  for (const key of cmd.keys ?? [undefined]) {
    out.push(await evaluate(cmd, key));
  }
  console.log(JSON.stringify(out));
}
await OpenFeature.close();
