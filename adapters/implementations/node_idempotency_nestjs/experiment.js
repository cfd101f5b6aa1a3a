// The @node-idempotency/nestjs behaviours behind the matrix's results, without the kit.
//
// Needs the Redis server of `./setup start`: `node experiment.js [redis://127.0.0.1:6392]`.
// The app is server.js's own (createApp: the same module, interceptor and Redis storage),
// with effects that count task files in a temporary folder, may take 300 ms, or SIGKILL
// the process right after the effect. Prints what it observed and exits 1 if the library
// did not behave as the README says.
'use strict';

const childProcess = require('child_process');
const crypto = require('crypto');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { createClient } = require('redis');
const { createApp, taskWriter } = require('./server');

const redisUrl = process.argv[2] || 'redis://127.0.0.1:6392';
const child = process.argv[3]; // 'crash' or 'crash-short-ttl': the process that dies after its effect
const stateDir = process.env.EXPERIMENT_STATE_DIR || fs.mkdtempSync(path.join(os.tmpdir(), 'node-idempotency-'));
const prefix = process.env.EXPERIMENT_PREFIX || `experiment-${crypto.randomBytes(4).toString('hex')}`;
const SHORT_TTL_MS = 1000;
const write = taskWriter(stateDir);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const effects = () => (fs.existsSync(path.join(stateDir, 'tasks')) ? fs.readdirSync(path.join(stateDir, 'tasks')).length : 0);

async function serve(effect, options = {}) {
  const app = await createApp(effect, redisUrl, { cacheKeyPrefix: prefix, ...options });
  await app.listen(0, '127.0.0.1');
  return { app, url: `http://127.0.0.1:${app.getHttpServer().address().port}/tasks` };
}

async function post(url, key, body) {
  const headers = { 'Content-Type': 'application/json' };
  if (key !== undefined) headers['Idempotency-Key'] = key;
  const response = await fetch(url, { method: 'POST', headers, body });
  return { status: response.status, replayed: response.headers.get('idempotent-replayed'), body: await response.json() };
}

/** A child process whose effect SIGKILLs it before the library stores the response; the
 * answer it never gave, then the retries on a server of this process. */
async function crashThenRetry(url, key, mode) {
  const env = { ...process.env, EXPERIMENT_STATE_DIR: stateDir, EXPERIMENT_PREFIX: prefix };
  const dying = childProcess.spawn(process.execPath, [__filename, redisUrl, mode], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise((resolve) => dying.stdout.once('data', (data) => resolve(String(data).trim())));
  const lost = await post(`http://127.0.0.1:${port}/tasks`, key, '{"subject":"a"}').catch((error) => error.cause?.code || 'lost');
  await new Promise((resolve) => (dying.exitCode === null ? dying.once('exit', resolve) : resolve()));
  return lost;
}

async function main() {
  let ok = true;
  const redis = createClient({ url: redisUrl });
  await redis.connect();
  const slow = async (request) => {
    await sleep(300);
    return write(request);
  };
  const { app, url } = await serve(slow);

  // 1. Eight at once with one key: one effect; the others 409 until it is stored, then its replay.
  let before = effects();
  const answers = await Promise.all(Array.from({ length: 8 }, () => post(url, 'k1', '{"subject":"a"}')));
  const statuses = answers.map((answer) => answer.status).sort();
  const retried = await post(url, 'k1', '{"subject":"a"}');
  console.log(`1. eight concurrent calls with one key: statuses ${statuses}, effects ${effects() - before}; a retry after: ${retried.status} Idempotent-Replayed ${retried.replayed}, the first task ${retried.body.task_id === answers.find((answer) => answer.status === 201)?.body.task_id}`);
  ok = ok && effects() - before === 1 && statuses.filter((status) => status === 409).length === 7 && retried.replayed === 'true';

  // 2. The same task with its keys in another order: another fingerprint, 422.
  before = effects();
  const orders = [await post(url, 'k2', '{"subject":"a","body":"b"}'), await post(url, 'k2', '{"body":"b","subject":"a"}')];
  console.log(`2. the same task, keys reordered: statuses ${orders.map((answer) => answer.status)} (${orders[1].body.message}), effects ${effects() - before}`);
  ok = ok && orders[1].status === 422 && effects() - before === 1;

  // 3. Keys: the empty one is no key (two effects, no replay); any character is a key; over 256 is refused.
  before = effects();
  const empty = [await post(url, '', '{"subject":"a"}'), await post(url, '', '{"subject":"a"}')];
  const odd = [await post(url, '../a b/é', '{"subject":"a"}'), await post(url, '../a b/é', '{"subject":"a"}')];
  const long = await post(url, 'x'.repeat(257), '{"subject":"a"}');
  console.log(`3. the empty key twice: statuses ${empty.map((answer) => answer.status)}, replayed ${empty.map((answer) => answer.replayed ?? 'absent')}; '../a b/é' twice: ${odd.map((answer) => answer.status)}, replayed ${odd[1].replayed}; 257 characters: ${long.status} (${long.body.message}); effects ${effects() - before}`);
  ok = ok && effects() - before === 3 && empty[1].replayed === null && odd[1].replayed === 'true' && long.status === 400;

  // 4. The process dies after its effect, before the library stored the response: the key
  // stays IN_PROGRESS for the record's whole TTL (24 h by default), every retry is 409.
  before = effects();
  const lost = await crashThenRetry(url, 'k4', 'crash');
  const retries = [];
  for (let attempt = 0; attempt < 3; attempt += 1) {
    retries.push((await post(url, 'k4', '{"subject":"a"}')).status);
    await sleep(1000);
  }
  const record = JSON.parse(await redis.get(`${prefix}:POST:/tasks:k4`));
  const ttl = await redis.pTTL(`${prefix}:POST:/tasks:k4`);
  console.log(`4. SIGKILL after the effect (answer: ${lost}); three retries on a new process over 3 s: ${retries}; the record: ${record.status}, expires in ${(ttl / 3600000).toFixed(2)} h; effects ${effects() - before}`);
  ok = ok && retries.every((status) => status === 409) && record.status === 'IN_PROGRESS' && ttl > 23 * 3600000 && effects() - before === 1;

  // 5. The same with cacheTTLMS of 1 s: when the IN_PROGRESS record expires, the retry runs
  // the handler again -- a second effect for one key (at the default TTL, a day later).
  const short = await serve(write, { cacheTTLMS: SHORT_TTL_MS });
  before = effects();
  await crashThenRetry(short.url, 'k5', 'crash-short-ttl');
  const early = (await post(short.url, 'k5', '{"subject":"a"}')).status;
  await sleep(SHORT_TTL_MS + 500);
  const late = await post(short.url, 'k5', '{"subject":"a"}');
  console.log(`5. the same with cacheTTLMS ${SHORT_TTL_MS}: a retry at once ${early}, after the TTL ${late.status} Idempotent-Replayed ${late.replayed ?? 'absent'}; effects ${effects() - before}`);
  ok = ok && early === 409 && late.status === 201 && late.replayed === null && effects() - before === 2;

  console.log(ok ? 'as described' : 'NOT as described: the library behaves differently from the README');
  await app.close();
  await short.app.close();
  await redis.quit();
  fs.rmSync(stateDir, { recursive: true, force: true });
  process.exit(ok ? 0 : 1);
}

async function dyingChild() {
  const afterEffect = (request) => {
    write(request);
    process.kill(process.pid, 'SIGKILL'); // inside the handler: the interceptor never stores the response
  };
  const { url } = await serve(afterEffect, child === 'crash-short-ttl' ? { cacheTTLMS: SHORT_TTL_MS } : {});
  console.log(new URL(url).port);
}

(child ? dyingChild() : main()).catch((error) => {
  console.error(error);
  process.exit(2);
});
