// The Express app around express-idempotency: one route, POST /tasks.
//
// Configured as the library's README shows: the idempotency middleware with the
// Redis data adapter (express-idempotency-redis-adapter, the library's own durable
// backend that runs offline), the default intent validator and response validator;
// the route asks the service isHit() and returns when the middleware already answered.
// Listens on 127.0.0.1:$PORT; Redis at $REDIS_URL, its keys under $REDIS_NAMESPACE.
//
// The route is the application: it writes the task as one JSON file in
// $RETRYPROOF_STATE_DIR/tasks/ (the format of the kit's shared task store, written
// durably: fsynced file, rename, fsynced directory) with the Idempotency-Key it came
// with, and answers 201 with its identity. It computes nothing the library does not:
// no validation, no digest. The harness validates a task and sends its digest
// (X-Request-Digest), which the app records; a caller through binding.yaml sends none,
// and the kit computes digests from the listed tasks itself.
'use strict';

const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const { createClient } = require('@redis/client');
const express = require('express');
const idempotency = require('express-idempotency');
const RedisAdapter = require('express-idempotency-redis-adapter').default;

const stateDir = process.env.RETRYPROOF_STATE_DIR;
const tasksDir = path.join(stateDir, 'tasks');
const failpoints = Object.fromEntries(
  (process.env.RETRYPROOF_FAILPOINTS || '')
    .split(',')
    .filter(Boolean)
    .map((item) => item.split('=')),
);

function failpoint(name) {
  if (failpoints[name] === 'crash') process.kill(process.pid, 'SIGKILL');
  if (failpoints[name] === 'fail') throw Object.assign(new Error(`failpoint ${name}`), { code: 'EIO' });
}

function fsyncPath(target, flags) {
  const fd = fs.openSync(target, flags);
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

function writeTask(taskId, record) {
  fs.mkdirSync(tasksDir, { recursive: true });
  const temp = path.join(tasksDir, `.tmp-${crypto.randomUUID()}`);
  fs.writeFileSync(temp, JSON.stringify(record));
  fsyncPath(temp, 'r');
  fs.renameSync(temp, path.join(tasksDir, `${taskId}.json`));
  fsyncPath(tasksDir, 'r');
}

// The client the adapter uses, with every key under `namespace:`. The Redis server is
// shared by every scenario of a run (one per `setup start`), as one Redis serves many
// deployments; the adapter has no key prefix option, so the app gives it this client.
// The library's keys are the callers' Idempotency-Key values, unchanged.
function namespaced(client, namespace) {
  const key = (name) => `${namespace}:${name}`;
  return {
    connect: () => client.connect(),
    disconnect: () => client.disconnect(),
    get isOpen() {
      return client.isOpen;
    },
    get isReady() {
      return client.isReady;
    },
    get: (name) => client.get(key(name)),
    set: (name, value, options) => client.set(key(name), value, options),
    del: (name) => client.del(key(name)),
  };
}

async function main() {
  if (!process.env.REDIS_NAMESPACE) throw new Error('REDIS_NAMESPACE is not set (serve.py or the harness sets it)');
  // The adapter's own client would only offer disconnect(), which drops pending commands;
  // with our client a SIGTERM can quit() after them (see below).
  const client = createClient({ url: process.env.REDIS_URL });
  const adapter = new RedisAdapter({ connectionInstance: namespaced(client, process.env.REDIS_NAMESPACE) });
  await adapter.connect();
  const app = express();
  app.use(express.json());
  app.use(idempotency.idempotency({ dataAdapter: adapter }));
  app.post('/tasks', (req, res) => {
    if (idempotency.getSharedIdempotencyService().isHit(req)) return;
    const taskId = `T-${crypto.randomBytes(8).toString('hex')}`;
    const digest = req.get('X-Request-Digest') ?? null;
    try {
      writeTask(taskId, {
        task_id: taskId,
        task: req.body,
        client_submission_id: req.get('Idempotency-Key') ?? null,
        request_digest: digest,
      });
      failpoint('write_task.after_task_write');
    } catch (error) {
      res.status(500).json({ error: String(error) });
      return;
    }
    // The library stores the response only after res.send() has written it, so no
    // moment has the record committed and the answer unsent. This is the nearest:
    // everything the library commits before answering is durable, and the answer has
    // not left. A kill here is the same every run, where the harness's own point
    // (after the answer reached it) raced node's update of the record.
    failpoint('write_task.after_commit');
    res.status(201).json({
      task_id: taskId,
      task_path: `tasks/${taskId}.json`,
      request_digest: digest,
      caller: req.get('X-Retryproof-Call'),
    });
  });
  // The library passes its refusals (409 in progress, 417 misuse) to next(error), with
  // the status set; express.json() passes a body it cannot parse with error.status 400.
  app.use((error, req, res, next) => {
    const status = res.statusCode >= 400 ? res.statusCode : error.status || 500;
    res.status(status).json({ error: String(error.message || error) });
  });
  const server = app.listen(Number(process.env.PORT), '127.0.0.1');
  // A graceful stop, as a production app does it: no new requests, then quit Redis after
  // the commands already sent (the library stores a response after sending it).
  process.on('SIGTERM', () => server.close(() => client.quit().finally(() => process.exit(0))));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
