// The NestJS app around @node-idempotency/nestjs: one route, POST /tasks.
//
// Configured as the library's README shows: NodeIdempotencyModule.forRootAsync with the
// Redis storage adapter (storage.adapter 'redis', its options the redis client's), and the
// route decorated @Idempotent(). The library's defaults stand (the Idempotency-Key header,
// 256 characters at most, a record kept 24 hours) but one: cacheKeyPrefix, the library's
// option for the records' namespace, names the kit's state directory, because the Redis
// server of ./setup start outlives every scenario's fresh state directory (see README.md).
// Written in plain JavaScript: Nest's decorators are applied as the functions they are.
//
// The route is the application: it checks the task's shape (400 otherwise, Nest's own
// BadRequestException), writes it as one JSON file in $RETRYPROOF_STATE_DIR/tasks/ (the
// format of the kit's shared task store, durably: fsynced file, rename, fsynced directory)
// and answers 201 with its identity. Listens on 127.0.0.1:$RETRYPROOF_PORT; Redis at
// $REDIS_URL. SIGTERM is Nest's own graceful shutdown (enableShutdownHooks).
'use strict';

require('reflect-metadata');
const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const { BadRequestException, Controller, HttpCode, Module, Post, Req } = require('@nestjs/common');
const { NestFactory } = require('@nestjs/core');
const { Idempotent, NodeIdempotencyModule } = require('@node-idempotency/nestjs');

const KEY_HEADER = 'idempotency-key'; // the library's default header, as it reads it (lower case)

// The application's task model: the write-task-v1 fields, each a string or null (the
// arrays: of strings, or null). The application's own validation, no idempotency decision.
const SCALARS = ['sender', 'recipient', 'subject', 'body', 'priority', 'thread_key', 'parent', 'risk_level'];
const ARRAYS = ['references', 'depends_on'];

function invalidField(task) {
  if (task === null || typeof task !== 'object' || Array.isArray(task)) return 'the body is not a JSON object';
  for (const [name, value] of Object.entries(task)) {
    if (value === null) continue;
    if (SCALARS.includes(name)) {
      if (typeof value !== 'string') return `${name} is not a string`;
    } else if (ARRAYS.includes(name)) {
      if (!Array.isArray(value) || value.some((item) => typeof item !== 'string')) return `${name} is not an array of strings`;
    } else {
      return `unknown field ${name}`;
    }
  }
  return null;
}

function fsyncPath(target) {
  const fd = fs.openSync(target, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/** The effect: the request's task as one durable JSON file in stateDir/tasks/; its identity. */
function taskWriter(stateDir) {
  const tasksDir = path.join(stateDir, 'tasks');
  return (request) => {
    const taskId = `T-${crypto.randomBytes(8).toString('hex')}`;
    const record = {
      task_id: taskId,
      task: request.body,
      client_submission_id: request.headers[KEY_HEADER] ?? null,
      // The app computes no write-task-v1 digest (the library fingerprints the body its
      // own way); the kit judges the listing by the stored task.
      request_digest: null,
    };
    fs.mkdirSync(tasksDir, { recursive: true });
    const temp = path.join(tasksDir, `.tmp-${crypto.randomUUID()}`);
    fs.writeFileSync(temp, JSON.stringify(record));
    fsyncPath(temp);
    fs.renameSync(temp, path.join(tasksDir, `${taskId}.json`));
    fsyncPath(tasksDir);
    return { task_id: taskId, task_path: `tasks/${taskId}.json` };
  };
}

/** The Nest application: POST /tasks runs `effect(request)` (sync or async) on a valid
 * task, behind the library on the Redis at `redisUrl`; `options` are the module's
 * IdempotencyOptions (experiment.js builds this same app with effects of its own). */
function createApp(effect, redisUrl, options) {
  class TasksController {
    create(request) {
      const problem = invalidField(request.body);
      if (problem) throw new BadRequestException(problem);
      return effect(request);
    }
  }
  // As TypeScript compiles `@Controller('tasks') class { @Post() @HttpCode(201) @Idempotent() create(@Req() request) }`.
  Req()(TasksController.prototype, 'create', 0);
  Reflect.decorate(
    [Post(), HttpCode(201), Idempotent()],
    TasksController.prototype,
    'create',
    Object.getOwnPropertyDescriptor(TasksController.prototype, 'create'),
  );
  Reflect.decorate([Controller('tasks')], TasksController);

  class AppModule {}
  Reflect.decorate(
    [
      Module({
        imports: [
          NodeIdempotencyModule.forRootAsync({
            storage: { adapter: 'redis', options: { url: redisUrl } },
            ...options,
          }),
        ],
        controllers: [TasksController],
      }),
    ],
    AppModule,
  );
  return NestFactory.create(AppModule, { abortOnError: false, logger: ['error', 'warn'] });
}

async function main() {
  const stateDir = process.env.RETRYPROOF_STATE_DIR;
  const app = await createApp(taskWriter(stateDir), process.env.REDIS_URL, {
    cacheKeyPrefix: `node-idempotency:${stateDir}`,
  });
  app.enableShutdownHooks(['SIGTERM']);
  await app.listen(Number(process.env.RETRYPROOF_PORT), '127.0.0.1');
}

module.exports = { createApp, taskWriter };

if (require.main === module) {
  main().catch((error) => {
    console.error(error);
    process.exit(1);
  });
}
