// The Powertools side of `make bench`'s peer section.
//
// cmd/bench starts this script once and drives it over stdin/stdout, one
// JSON object per line each way, so that both sides run the same workload
// on the same DynamoDB Local in interleaved rounds. Each command gets one
// answer line: {"ok": true, ...} or {"ok": false, "error": "..."}.
//
// The handler is what a Lambda function made idempotent with Powertools
// for AWS Lambda (TypeScript) looks like: makeIdempotent over a handler
// taking (event, context), DynamoDBPersistenceLayer on its own table, the
// idempotency key taken from the notification's identifying fields. Its
// "send" is a no-op that counts per key; when a phase loses responses, the
// first send to a key counts and then throws, as a provider call whose
// response never came back.
//
// Commands:
//
//	{"cmd":"run","endpoint":U,"table":T,"events":[...],"concurrency":16,"lose":false}
//	    -> {"ok":true,"outcomes":{...},"sends":n,"duplicate_sends":n,"seconds":s}
//	{"cmd":"tput","kind":"powertools"|"raw","endpoint":U,"table":T,"template":EVENT|ITEM,
//	 "prefix":P,"seconds":s,"concurrency":16}
//	    -> {"ok":true,"n":count,"seconds":s,"lat_us":[...]}
//	{"cmd":"versions"} -> {"ok":true,"versions":{...}}
import { createInterface } from 'node:readline';
import { readFileSync } from 'node:fs';
import { DynamoDBClient, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';

// The key fields of a notification: what sendonce derives its key from.
const KEY_PATH = '[tenant_id, event_id, recipient.id, channel, template]';

const sends = new Map(); // natural key -> sends
let lose = false;

const naturalKey = (e) => `${e.tenant_id}/${e.event_id}/${e.recipient?.id}/${e.channel}/${e.template}`;

// send is the no-op provider call.
function send(event, phase) {
  const k = naturalKey(event);
  const prev = sends.get(k) ?? 0;
  sends.set(k, prev + 1);
  phase.sends++;
  if (prev > 0) phase.duplicateSends++;
  if (lose && prev === 0) {
    throw new Error('provider response lost after the provider accepted');
  }
  return { message_id: `msg-${phase.sends}-${k.length}` };
}

const clients = new Map();
function client(endpoint) {
  let c = clients.get(endpoint);
  if (!c) {
    c = new DynamoDBClient({
      endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
      maxAttempts: 3,
    });
    clients.set(endpoint, c);
  }
  return c;
}

// A Lambda context: makeIdempotent registers it, as in a real function,
// so records carry their in-progress expiry.
const lambdaContext = {
  functionName: 'bench-powertools',
  awsRequestId: 'bench',
  getRemainingTimeInMillis: () => 30_000,
};

const handlers = new Map();
let current = { sends: 0, duplicateSends: 0 };
function handler(endpoint, table) {
  const id = `${endpoint} ${table}`;
  let h = handlers.get(id);
  if (!h) {
    const persistenceStore = new DynamoDBPersistenceLayer({ tableName: table, awsSdkV3Client: client(endpoint) });
    const config = new IdempotencyConfig({ eventKeyJmesPath: KEY_PATH, throwOnNoIdempotencyKey: true });
    h = makeIdempotent(async (event, _context) => send(event, current), { persistenceStore, config });
    handlers.set(id, h);
  }
  return h;
}

// pool runs task(i) for i in [0, n) with at most width in flight.
async function pool(n, width, task) {
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < n; i = next++) await task(i);
  };
  await Promise.all(Array.from({ length: Math.min(width, n) }, worker));
}

function outcomeOf(err) {
  if (!err) return 'ok';
  if (err.name === 'IdempotencyAlreadyInProgressError') return 'in_progress';
  if (err.message?.startsWith('provider response lost')) return 'lost_response';
  return `error: ${err.name}: ${err.message}`;
}

async function run(cmd) {
  const h = handler(cmd.endpoint, cmd.table);
  current = { sends: 0, duplicateSends: 0 };
  lose = !!cmd.lose;
  const outcomes = {};
  const t0 = process.hrtime.bigint();
  try {
    await pool(cmd.events.length, cmd.concurrency, async (i) => {
      let err;
      try {
        await h(cmd.events[i], lambdaContext);
      } catch (e) {
        err = e;
      }
      const o = outcomeOf(err);
      outcomes[o] = (outcomes[o] ?? 0) + 1;
    });
  } finally {
    lose = false;
  }
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  return { outcomes, sends: current.sends, duplicate_sends: current.duplicateSends, seconds };
}

// tput runs fresh first sends (or raw puts) for cmd.seconds and reports
// the count and each call's latency.
async function tput(cmd) {
  let op;
  if (cmd.kind === 'powertools') {
    const h = handler(cmd.endpoint, cmd.table);
    current = { sends: 0, duplicateSends: 0 };
    op = async (i) => h({ ...cmd.template, event_id: `${cmd.prefix}-${i}` }, lambdaContext);
  } else if (cmd.kind === 'raw') {
    const c = client(cmd.endpoint);
    op = async (i) => c.send(new PutItemCommand({
      TableName: cmd.table,
      Item: { ...cmd.template, pk: { S: `${cmd.prefix}-${i}` } },
      ConditionExpression: 'attribute_not_exists(#pk)',
      ExpressionAttributeNames: { '#pk': 'pk' },
    }));
  } else {
    throw new Error(`unknown kind ${cmd.kind}`);
  }
  const lat = [];
  let next = 0;
  const t0 = process.hrtime.bigint();
  const deadline = t0 + BigInt(Math.round(cmd.seconds * 1e9));
  const worker = async () => {
    while (process.hrtime.bigint() < deadline) {
      const i = next++;
      const s = process.hrtime.bigint();
      await op(i);
      lat.push(Number(process.hrtime.bigint() - s) / 1e3);
    }
  };
  await Promise.all(Array.from({ length: cmd.concurrency }, worker));
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  if (cmd.kind === 'powertools' && current.duplicateSends > 0) {
    throw new Error(`${current.duplicateSends} duplicate sends of fresh keys`);
  }
  return { n: lat.length, seconds, lat_us: lat.map(Math.round) };
}

function versions() {
  const v = (name) => JSON.parse(readFileSync(new URL(`./node_modules/${name}/package.json`, import.meta.url), 'utf8')).version;
  return {
    node: process.version,
    '@aws-lambda-powertools/idempotency': v('@aws-lambda-powertools/idempotency'),
    '@aws-sdk/client-dynamodb': v('@aws-sdk/client-dynamodb'),
  };
}

const commands = { run, tput, versions: async () => ({ versions: versions() }) };

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of rl) {
  if (!line.trim()) continue;
  let answer;
  try {
    const cmd = JSON.parse(line);
    const f = commands[cmd.cmd];
    if (!f) throw new Error(`unknown command ${cmd.cmd}`);
    answer = { ok: true, ...(await f(cmd)) };
  } catch (e) {
    answer = { ok: false, error: `${e.name}: ${e.message}` };
  }
  process.stdout.write(`${JSON.stringify(answer)}\n`);
}
