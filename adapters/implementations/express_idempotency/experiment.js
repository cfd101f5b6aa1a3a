// The express-idempotency behaviours behind the matrix's failures, without the kit.
//
// Needs the Redis server of `./setup start`: `node experiment.js [redis://127.0.0.1:6391]`.
// An app configured as server.js (the middleware with the Redis adapter, the route
// asking isHit()) counts its effects; the script prints what it observed and exits 1
// if the library did not behave as the README says.
'use strict';

const childProcess = require('child_process');
const crypto = require('crypto');
const express = require('express');
const idempotency = require('express-idempotency');
const RedisAdapter = require('express-idempotency-redis-adapter').default;

const run = process.env.EXPERIMENT_RUN || `experiment-${crypto.randomBytes(4).toString('hex')}`;
let effects = 0;
let slowMs = 0;
let failOnce = false;
const redisUrl = process.argv[2] || 'redis://127.0.0.1:6391';
// In a child app (parts 5 and 6): --crash-before-effect or --crash-after-response, where its route dies.
const crashChild = process.argv[3];

async function main() {
  const adapter = new RedisAdapter({ connectionConfig: { url: redisUrl } });
  await adapter.connect();
  const app = express();
  app.use(express.json());
  app.use(idempotency.idempotency({ dataAdapter: adapter }));
  app.post('/tasks', async (req, res) => {
    if (idempotency.getSharedIdempotencyService().isHit(req)) return;
    if (crashChild === '--crash-before-effect') process.kill(process.pid, 'SIGKILL');
    effects += 1;
    await new Promise((resolve) => setTimeout(resolve, slowMs));
    if (crashChild === '--crash-after-response') {
      res.status(201).json({ task: effects });
      setImmediate(() => process.kill(process.pid, 'SIGKILL')); // the process dies right after answering
      return;
    }
    if (failOnce) {
      failOnce = false;
      res.status(500).json({ error: 'I/O error after the effect' });
      return;
    }
    res.status(201).json({ task: effects });
  });
  app.use((error, req, res, next) => res.json({ error: error.message }));
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  if (crashChild) {
    console.log(server.address().port);
    return;
  }
  const url = `http://127.0.0.1:${server.address().port}/tasks`;
  const post = async (key, body, target = url) =>
    (await fetch(target, { method: 'POST', headers: { 'Content-Type': 'application/json', 'Idempotency-Key': `${run}-${key}` }, body })).status;
  let ok = true;

  slowMs = 300;
  let statuses = await Promise.all([1, 2, 3, 4].map(() => post('k1', '{"subject":"a"}')));
  console.log(`1. four concurrent duplicates: statuses ${statuses}, effects ${effects}`);
  ok = ok && effects > 1;
  slowMs = 0;

  effects = 0;
  slowMs = 300;
  const first = post('k2', '{"subject":"a"}');
  await new Promise((resolve) => setTimeout(resolve, 100));
  const started = Date.now();
  const second = await post('k2', '{"subject":"a"}');
  console.log(`2. a duplicate while the first runs: status ${second} after ${Date.now() - started} ms, first ${await first}`);
  ok = ok && second === 409;
  slowMs = 0;

  effects = 0;
  statuses = [await post('k3', '{"subject":"a\\r\\nb"}'), await post('k3', '{"subject":"a\\nb"}')];
  console.log(`3. the same task with CRLF, then LF line endings: statuses ${statuses}, effects ${effects}`);
  ok = ok && statuses[1] === 417 && effects === 1;

  effects = 0;
  failOnce = true;
  statuses = [await post('k4', '{"subject":"a"}'), await post('k4', '{"subject":"a"}')];
  console.log(`4. an error response after the effect, then the retry: statuses ${statuses}, effects ${effects}`);
  ok = ok && statuses[0] === 500 && statuses[1] === 201 && effects === 2;

  // Parts 5 and 6: an app process that dies in its route; the retry goes to this one.
  const crashed = async (key, mode) => {
    const child = childProcess.spawn(process.execPath, [__filename, redisUrl, mode], {
      env: { ...process.env, EXPERIMENT_RUN: run },
    });
    const childPort = await new Promise((resolve) => child.stdout.once('data', (data) => resolve(String(data).trim())));
    const answered = await post(key, '{"subject":"a"}', `http://127.0.0.1:${childPort}/tasks`).catch(() => 'none');
    await new Promise((resolve) => child.once('exit', resolve));
    return answered;
  };

  effects = 0;
  let answered = await crashed('k5', '--crash-after-response');
  let retried = await post('k5', '{"subject":"a"}');
  console.log(`5. the process dies right after answering ${answered}; the retry on a new process: status ${retried}, effects there ${effects}`);
  ok = ok && answered === 201 && retried === 409 && effects === 0;

  effects = 0;
  answered = await crashed('k6', '--crash-before-effect');
  retried = await post('k6', '{"subject":"a"}');
  console.log(`6. the process dies in the route before the effect (answer: ${answered}); the retry: status ${retried}, effects here ${effects} (none there)`);
  ok = ok && answered === 'none' && retried === 409 && effects === 0;

  effects = 0;
  const bare = async (key) =>
    (await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json', 'Idempotency-Key': key }, body: '{"subject":"a"}' })).status;
  statuses = [await bare(''), await bare('')];
  console.log(`7. an empty Idempotency-Key, twice: statuses ${statuses}, effects ${effects}`);
  ok = ok && statuses[0] === 201 && statuses[1] === 201 && effects === 2;

  console.log(ok ? 'as described' : 'NOT as described: the library behaves differently from the README');
  await new Promise((resolve) => setTimeout(resolve, 300)); // the library's response hooks finish
  server.close();
  await adapter.disconnect();
  process.exit(ok ? 0 : 1);
}

main().catch((error) => {
  console.error(error);
  process.exit(2);
});
