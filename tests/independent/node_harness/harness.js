#!/usr/bin/env node
'use strict';
/**
 * An independent retryproof-harness/1 runtime in Node.js (standard library only),
 * written from spec/ alone. It exists to check that the kit judges a third-party
 * runtime correctly: this one should be conformant, and each `--defect NAME` (or
 * RETRYPROOF_NODE_DEFECT=NAME) plants one mistake a careless vendor might ship.
 *
 * State under RETRYPROOF_STATE_DIR:
 *   tasks/TASK-NNNN.json   one task object {task_id, client_submission_id, request_digest, task}
 *   receipts/<id>.json     one receipt per client_submission_id (schemas/receipt.json)
 *   reports/<id>.json      one report per write_report client_submission_id
 * Files are created with temp + fsync + link + directory fsync, or replaced with
 * temp + fsync + rename + directory fsync.
 */
const fs = require('fs');
const fsp = fs.promises;
const path = require('path');
const {
  SCHEMA_VERSION, ContractError, JsonSyntaxError, parseStrict, canonicalTask, digestOf, isObject,
} = require('./digest');

const PROTOCOL = 'retryproof-harness/1';
const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
const TASK_ID_PATTERN = /^TASK-[0-9]+$/;
const WAIT_FOR_HOLDER_MS = 5000;
const FAILPOINT_NAMES = [
  'write_task.after_reserve', 'write_task.after_task_write',
  'write_task.after_task_created', 'write_task.after_commit',
];

/**
 * The deliberate mistakes, one per broken copy:
 * - conflict-overwrites-digest: a digest_mismatch conflict answers correctly but
 *   rebinds the receipt to the new digest, so the id now "belongs" to the second request.
 * - recovery-fresh-number: resuming a reservation whose task object is absent
 *   allocates a new task number instead of the preallocated one.
 * - busy-not-waiting: a call whose id is held by another call in flight answers
 *   in_progress at once instead of waiting for the holder and reusing.
 */
const DEFECTS = ['conflict-overwrites-digest', 'recovery-fresh-number', 'busy-not-waiting'];

class ProtocolError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

function chooseDefect() {
  const at = process.argv.indexOf('--defect');
  const name = at >= 0 ? process.argv[at + 1] : process.env.RETRYPROOF_NODE_DEFECT || '';
  if (name && !DEFECTS.includes(name)) {
    process.stderr.write(`unknown defect ${JSON.stringify(name)}; known: ${DEFECTS.join(', ')}\n`);
    process.exit(2);
  }
  return name || null;
}

function parseFailpoints(text) {
  const armed = new Map();
  for (const item of (text || '').split(',').filter(Boolean)) {
    const [name, action] = item.split('=');
    if (!FAILPOINT_NAMES.includes(name) || !['crash', 'fail'].includes(action)) {
      process.stderr.write(`ignoring failpoint ${JSON.stringify(item)}\n`);
      continue;
    }
    armed.set(name, action);
  }
  return armed;
}

const DEFECT = chooseDefect();
const FAILPOINTS = parseFailpoints(process.env.RETRYPROOF_FAILPOINTS);

/** Called right after the step `name` is durable. */
function failpoint(name) {
  const action = FAILPOINTS.get(name);
  if (action === 'crash') process.kill(process.pid, 'SIGKILL');
  if (action === 'fail') {
    const err = new Error(`EIO: injected I/O error at ${name}`);
    err.code = 'EIO';
    throw err;
  }
}

// ---------------------------------------------------------------- durable files

async function fsyncDir(dir) {
  const fh = await fsp.open(dir, 'r');
  try { await fh.sync(); } finally { await fh.close(); }
}

async function writeSynced(file, text, flags) {
  const fh = await fsp.open(file, flags);
  try {
    await fh.writeFile(text);
    await fh.sync();
  } finally { await fh.close(); }
}

let tempCounter = 0;
const tempBeside = (file) => path.join(path.dirname(file), `.tmp-${process.pid}-${++tempCounter}-${path.basename(file)}`);

/**
 * Exclusive create that never exposes a torn file: the whole text is written and fsynced
 * under a temp name, then linked into place (EEXIST if the file exists), then the
 * directory is fsynced. An O_EXCL create of the file itself, killed before its write,
 * would leave an empty receipt or task file behind (KILL-NEMESIS found that).
 */
async function createDurable(file, obj) {
  const tmp = tempBeside(file);
  await writeSynced(tmp, `${JSON.stringify(obj)}\n`, 'wx');
  try {
    await fsp.link(tmp, file);
  } finally {
    await fsp.unlink(tmp);
  }
  await fsyncDir(path.dirname(file));
}

/** temp + fsync + rename + fsync of the directory. */
async function replaceDurable(file, obj) {
  const tmp = tempBeside(file);
  await writeSynced(tmp, `${JSON.stringify(obj)}\n`, 'wx');
  await fsp.rename(tmp, file);
  await fsyncDir(path.dirname(file));
}

async function readJson(file) {
  let text;
  try { text = await fsp.readFile(file, 'utf8'); } catch (err) {
    if (err.code === 'ENOENT') return null;
    throw err;
  }
  try { return JSON.parse(text); } catch (err) {
    throw new ProtocolError('internal_error', `corrupt state file ${path.basename(file)}: ${err.message}`);
  }
}

// ---------------------------------------------------------------- per-id exclusion

/**
 * A FIFO lock per key inside this process. Each holder's slot is a promise the next
 * waiter chains on; a waiter gives up after `waitMs` with in_progress but keeps its
 * place in the chain (released as soon as its predecessor is) so order is never broken.
 */
class KeyedLock {
  constructor() { this.tails = new Map(); }

  async run(key, fn, waitMs) {
    if (DEFECT === 'busy-not-waiting' && this.tails.has(key)) {
      throw new ProtocolError('in_progress', `${key} is held by another call`);
    }
    const previous = this.tails.get(key) || Promise.resolve();
    let release;
    const mine = new Promise((resolve) => { release = resolve; });
    const tail = previous.then(() => mine);
    this.tails.set(key, tail);
    tail.then(() => { if (this.tails.get(key) === tail) this.tails.delete(key); });

    let timer;
    const acquired = await Promise.race([
      previous.then(() => true),
      new Promise((resolve) => { timer = setTimeout(() => resolve(false), waitMs); }),
    ]);
    clearTimeout(timer);
    if (!acquired) {
      previous.then(release);
      throw new ProtocolError('in_progress', `the holder of ${key} did not finish within ${waitMs / 1000} s`);
    }
    try { return await fn(); } finally { release(); }
  }
}

// ---------------------------------------------------------------- the runtime

const now = () => Date.now() / 1000;
const isTaskDoc = (doc) => isObject(doc) && typeof doc.task_id === 'string'
  && typeof doc.request_digest === 'string' && isObject(doc.task);

class Runtime {
  constructor(root) {
    this.root = root;
    this.dirs = { tasks: path.join(root, 'tasks'), receipts: path.join(root, 'receipts'), reports: path.join(root, 'reports') };
    this.locks = new KeyedLock();
    this.nextNumber = 1;
  }

  async init() {
    for (const dir of Object.values(this.dirs)) await fsp.mkdir(dir, { recursive: true });
    await fsyncDir(this.root);
    // Numbers held by a task file or preallocated by a receipt are never handed out again.
    const numbers = [];
    for (const name of await fsp.readdir(this.dirs.tasks)) {
      const m = /^TASK-([0-9]+)\.json$/.exec(name);
      if (m) numbers.push(Number(m[1]));
    }
    for (const name of await fsp.readdir(this.dirs.receipts)) {
      if (name.startsWith('.')) continue;
      const receipt = await readJson(path.join(this.dirs.receipts, name)).catch(() => null);
      const m = receipt && /^TASK-([0-9]+)$/.exec(receipt.task_id);
      if (m) numbers.push(Number(m[1]));
    }
    this.nextNumber = Math.max(0, ...numbers) + 1;
  }

  /** Synchronous, so two async calls in this process never get one number. */
  allocate() {
    const taskId = `TASK-${String(this.nextNumber++).padStart(4, '0')}`;
    return { task_id: taskId, task_path: `tasks/${taskId}.json` };
  }

  receiptFile(id) { return path.join(this.dirs.receipts, `${id}.json`); }

  taskFile(taskPath) { return path.join(this.root, taskPath); }

  async readReceipt(id) { return readJson(this.receiptFile(id)); }

  /** absent | matches | foreign, from the object at task_path (the digest is recomputed). */
  async taskState(taskPath, digest) {
    const doc = await readJson(this.taskFile(taskPath)).catch((err) => {
      if (err instanceof ProtocolError) return {};
      throw err;
    });
    if (doc === null) return 'absent';
    if (!isTaskDoc(doc)) return 'foreign';
    try {
      return digestOf(canonicalTask(doc.task)) === digest && doc.request_digest === digest ? 'matches' : 'foreign';
    } catch (err) {
      return 'foreign';
    }
  }

  // ------------------------------------------------------------ write_task

  /** `taskDuplicates`: task keys the request's JSON text named twice. */
  async writeTask(args, taskDuplicates) {
    onlyKeys(args, ['client_submission_id', 'task', 'invocation']);
    const legacy = !Object.hasOwn(args, 'client_submission_id');
    if (!legacy) checkSubmissionId(args.client_submission_id);
    if (!Object.hasOwn(args, 'task')) throw new ProtocolError('invalid_request', 'task is required');
    checkInvocation(args.invocation);
    let canonical;
    try {
      canonical = canonicalTask(args.task, taskDuplicates);
    } catch (err) {
      if (err instanceof ContractError) throw new ProtocolError('invalid_request', err.message);
      throw err;
    }
    const digest = digestOf(canonical);
    if (legacy) return this.writeLegacy(canonical, digest);
    const id = args.client_submission_id;
    return this.locks.run(`task:${id}`, () => this.writeIdempotent(id, canonical, digest), WAIT_FOR_HOLDER_MS);
  }

  async writeLegacy(canonical, digest) {
    const identity = this.allocate();
    await createDurable(this.taskFile(identity.task_path), {
      ...identity, client_submission_id: null, request_digest: digest, task: canonical,
    });
    return {
      disposition: 'created', action_taken: true, ...identity, client_submission_id: null,
      request_digest: digest, digest_schema_version: SCHEMA_VERSION, idempotent: false,
    };
  }

  async writeIdempotent(id, canonical, digest) {
    let receipt = await this.readReceipt(id);
    if (receipt === null) {
      const t = now();
      receipt = {
        client_submission_id: id, digest_schema_version: SCHEMA_VERSION, request_digest: digest,
        ...this.allocate(), state: 'reserved', reserved_at: t, updated_at: t,
      };
      await createDurable(this.receiptFile(id), receipt);
      failpoint('write_task.after_reserve');
      return this.advance(receipt, canonical, false);
    }
    if (receipt.digest_schema_version !== SCHEMA_VERSION) return conflict(receipt, digest, 'digest_schema_mismatch');
    if (receipt.request_digest !== digest) {
      const answer = conflict(receipt, digest, 'digest_mismatch');
      if (DEFECT === 'conflict-overwrites-digest') {
        await replaceDurable(this.receiptFile(id), { ...receipt, request_digest: digest, updated_at: now() });
      }
      return answer;
    }
    return this.advance(receipt, canonical, true);
  }

  /** Drive a receipt whose digest is this call's to committed; `resumed` when it came from disk. */
  async advance(receipt, canonical, resumed) {
    const digest = receipt.request_digest;
    let wrote = false;
    if (receipt.state === 'reserved') {
      let found = await this.taskState(receipt.task_path, digest);
      if (found === 'absent' && resumed && DEFECT === 'recovery-fresh-number') {
        receipt = { ...receipt, ...this.allocate(), updated_at: now() };
        await replaceDurable(this.receiptFile(receipt.client_submission_id), receipt);
      }
      if (found === 'foreign') return conflict(receipt, digest, 'task_path_occupied');
      if (found === 'absent') {
        await createDurable(this.taskFile(receipt.task_path), {
          task_id: receipt.task_id, task_path: receipt.task_path,
          client_submission_id: receipt.client_submission_id, request_digest: digest, task: canonical,
        });
        wrote = true;
        failpoint('write_task.after_task_write');
        found = 'matches';
      }
      receipt = { ...receipt, state: 'task_created', updated_at: now() };
      await replaceDurable(this.receiptFile(receipt.client_submission_id), receipt);
      failpoint('write_task.after_task_created');
    } else {
      const found = await this.taskState(receipt.task_path, digest);
      if (found === 'absent') return conflict(receipt, digest, 'task_missing');
      if (found === 'foreign') return conflict(receipt, digest, 'task_path_occupied');
    }
    if (receipt.state === 'task_created') {
      const result = {
        disposition: 'created', action_taken: true, task_id: receipt.task_id, task_path: receipt.task_path,
        client_submission_id: receipt.client_submission_id, request_digest: digest,
        digest_schema_version: SCHEMA_VERSION, idempotent: true,
      };
      receipt = { ...receipt, state: 'committed', updated_at: now(), result };
      await replaceDurable(this.receiptFile(receipt.client_submission_id), receipt);
      failpoint('write_task.after_commit');
    }
    // created exactly when this call wrote the task object; otherwise the first result, reused.
    return wrote ? receipt.result : { ...receipt.result, disposition: 'reused', action_taken: false };
  }

  // ------------------------------------------------------------ reading state

  async listTasks(args) {
    onlyKeys(args, []);
    // The files are read all at once: read one after another, a listing spanned as many
    // turns of the event loop as there are tasks, and the calls it raced answered meanwhile.
    const names = (await fsp.readdir(this.dirs.tasks)).filter((name) => /^TASK-[0-9]+\.json$/.test(name)).sort();
    const docs = await Promise.all(names.map((name) => readJson(path.join(this.dirs.tasks, name)).catch(() => null)));
    const tasks = [];
    names.forEach((name, index) => {
      const doc = docs[index];
      if (!isTaskDoc(doc)) return; // a foreign object is not a task
      tasks.push({
        task_id: doc.task_id, task_path: `tasks/${name}`,
        client_submission_id: doc.client_submission_id, request_digest: doc.request_digest,
      });
    });
    return { tasks };
  }

  async readTask(args) {
    onlyKeys(args, ['task_id']);
    requireString(args, 'task_id');
    const doc = TASK_ID_PATTERN.test(args.task_id)
      ? await readJson(this.taskFile(`tasks/${args.task_id}.json`)).catch(() => null) : null;
    if (!isTaskDoc(doc)) throw new ProtocolError('not_found', `no task ${args.task_id}`);
    return {
      task_id: doc.task_id, task: doc.task, client_submission_id: doc.client_submission_id,
      request_digest: doc.request_digest,
    };
  }

  async diagnose(args) {
    onlyKeys(args, ['client_submission_id', 'stale_after_s']);
    checkSubmissionId(args.client_submission_id);
    if (typeof args.stale_after_s !== 'number' || args.stale_after_s < 0) {
      throw new ProtocolError('invalid_request', 'stale_after_s must be a number >= 0');
    }
    const receipt = await this.readReceipt(args.client_submission_id);
    if (receipt === null) {
      return {
        state: 'absent', task_id: null, task_path: null, task_exists: false,
        digest_matches: null, age_s: null, stalled: false,
      };
    }
    const found = await this.taskState(receipt.task_path, receipt.request_digest);
    const age = Math.max(0, now() - receipt.updated_at);
    return {
      state: receipt.state, task_id: receipt.task_id, task_path: receipt.task_path,
      task_exists: found !== 'absent', digest_matches: found === 'absent' ? null : found === 'matches',
      age_s: age, stalled: receipt.state !== 'committed' && age >= args.stale_after_s,
    };
  }

  // ------------------------------------------------------------ test hooks

  async tamper(args) {
    const actions = {
      remove_task: ['task_id'],
      occupy_task_path: ['client_submission_id'],
      set_receipt_schema: ['client_submission_id', 'digest_schema_version'],
    };
    if (!Object.hasOwn(actions, args.action)) throw new ProtocolError('invalid_request', 'unknown tamper action');
    onlyKeys(args, ['action', ...actions[args.action]]);
    if (args.action === 'remove_task') {
      requireString(args, 'task_id');
      if (!TASK_ID_PATTERN.test(args.task_id)) throw new ProtocolError('not_found', `no task ${args.task_id}`);
      const file = this.taskFile(`tasks/${args.task_id}.json`);
      try { await fsp.unlink(file); } catch (err) {
        if (err.code === 'ENOENT') throw new ProtocolError('not_found', `no task ${args.task_id}`);
        throw err;
      }
      await fsyncDir(this.dirs.tasks);
      return {};
    }
    checkSubmissionId(args.client_submission_id);
    const id = args.client_submission_id;
    return this.locks.run(`task:${id}`, async () => {
      const receipt = await this.readReceipt(id);
      if (receipt === null) throw new ProtocolError('not_found', `no receipt for ${id}`);
      if (args.action === 'occupy_task_path') {
        await replaceDurable(this.taskFile(receipt.task_path), { foreign: 'placed by tamper occupy_task_path' });
      } else {
        requireString(args, 'digest_schema_version');
        await replaceDurable(this.receiptFile(id), { ...receipt, digest_schema_version: args.digest_schema_version });
      }
      return {};
    }, WAIT_FOR_HOLDER_MS);
  }

  // ------------------------------------------------------------ write_report

  async writeReport(args) {
    onlyKeys(args, ['client_submission_id', 'task_id', 'content']);
    checkSubmissionId(args.client_submission_id);
    requireString(args, 'task_id');
    if (typeof args.content !== 'string') throw new ProtocolError('invalid_request', 'content must be a string');
    const id = args.client_submission_id;
    return this.locks.run(`report:${id}`, async () => {
      const file = path.join(this.dirs.reports, `${id}.json`);
      const existing = await readJson(file);
      if (existing !== null) {
        if (existing.task_id === args.task_id && existing.content === args.content) {
          return { report_id: existing.report_id, deduplicated: true };
        }
        throw new ProtocolError('invalid_request', `report id ${id} is bound to another task_id or content`);
      }
      await this.readTask({ task_id: args.task_id });
      const record = { report_id: `REPORT-${id}`, client_submission_id: id, task_id: args.task_id, content: args.content };
      await createDurable(file, record);
      return { report_id: record.report_id, deduplicated: false };
    }, WAIT_FOR_HOLDER_MS);
  }

  async listReports(args) {
    onlyKeys(args, []);
    const reports = [];
    for (const name of (await fsp.readdir(this.dirs.reports)).sort()) {
      if (name.startsWith('.')) continue;
      const record = await readJson(path.join(this.dirs.reports, name));
      reports.push({ report_id: record.report_id, task_id: record.task_id });
    }
    return { reports };
  }
}

// ---------------------------------------------------------------- argument checks

function onlyKeys(args, allowed) {
  for (const key of Object.keys(args)) {
    if (!allowed.includes(key)) throw new ProtocolError('invalid_request', `unknown argument ${JSON.stringify(key)}`);
  }
}

function requireString(args, key) {
  if (typeof args[key] !== 'string' || args[key] === '') {
    throw new ProtocolError('invalid_request', `${key} must be a non-empty string`);
  }
}

function checkSubmissionId(id) {
  if (typeof id !== 'string' || !ID_PATTERN.test(id)) {
    throw new ProtocolError('invalid_submission_id', 'client_submission_id does not match the pattern');
  }
}

function checkInvocation(inv) {
  if (inv === undefined) return;
  const ok = isObject(inv)
    && ['trace_id', 'call_time', 'connection_id'].every((k) => inv[k] === undefined || typeof inv[k] === 'string')
    && (inv.retry_count === undefined || (Number.isSafeInteger(inv.retry_count) && inv.retry_count >= 0));
  if (!ok) throw new ProtocolError('invalid_request', 'invocation has a field of the wrong type');
}

function conflict(receipt, digest, reason) {
  return {
    disposition: 'conflict', action_taken: false, task_id: receipt.task_id, task_path: receipt.task_path,
    client_submission_id: receipt.client_submission_id, request_digest: digest,
    digest_schema_version: SCHEMA_VERSION, idempotent: true,
    conflict: {
      reason, receipt_request_digest: receipt.request_digest,
      receipt_digest_schema_version: receipt.digest_schema_version,
    },
  };
}

// ---------------------------------------------------------------- protocol server

function hello(args) {
  onlyKeys(args, ['protocol']);
  if (args.protocol !== PROTOCOL) throw new ProtocolError('invalid_request', `this harness speaks ${PROTOCOL}`);
  return {
    protocol: PROTOCOL,
    implementation: {
      name: DEFECT ? `node-independent-${DEFECT}` : 'node-independent', version: '0.1.0', language: 'javascript',
    },
    capabilities: ['write_task', 'legacy', 'diagnose', 'tamper', 'write_report'],
    tamper_actions: ['remove_task', 'occupy_task_path', 'set_receipt_schema'],
    failpoints: FAILPOINT_NAMES,
    digest_schema_version: SCHEMA_VERSION,
  };
}

function send(obj) {
  process.stdout.write(`${JSON.stringify(obj)}\n`);
}

/** Turn one line into a request, or answer why it is not one. */
function decodeRequest(bytes) {
  let parsed;
  try {
    parsed = parseStrict(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch (err) {
    if (err instanceof JsonSyntaxError || err instanceof TypeError) return { bad: `not JSON: ${err.message}` };
    throw err;
  }
  const msg = parsed.value;
  if (!isObject(msg)) return { bad: 'a request is a JSON object' };
  const keys = Object.keys(msg).sort().join(',');
  if (keys !== 'args,id,op' || !Number.isSafeInteger(msg.id) || typeof msg.op !== 'string' || !isObject(msg.args)) {
    return { bad: 'a request is {id: integer, op: string, args: object}' };
  }
  const outside = parsed.duplicates.filter((p) => p[0] !== 'args' || p.length === 1);
  if (outside.length) return { bad: `duplicate key ${outside[0].join('.')}` };
  if (parsed.unsafeIntegers.some((p) => p[0] !== 'args')) return { bad: 'integer outside the I-JSON range' };
  return { request: msg, duplicates: parsed.duplicates, unsafeIntegers: parsed.unsafeIntegers };
}

async function main() {
  const root = process.env.RETRYPROOF_STATE_DIR;
  if (!root) {
    process.stderr.write('RETRYPROOF_STATE_DIR is not set\n');
    process.exit(2);
  }
  const runtime = new Runtime(root);
  await runtime.init();
  const handlers = {
    hello: (a) => hello(a),
    write_task: (a, dups) => runtime.writeTask(a, dups),
    list_tasks: (a) => runtime.listTasks(a),
    read_task: (a) => runtime.readTask(a),
    diagnose: (a) => runtime.diagnose(a),
    tamper: (a) => runtime.tamper(a),
    write_report: (a) => runtime.writeReport(a),
    list_reports: (a) => runtime.listReports(a),
  };
  const inFlight = new Set();
  let closing = false;

  async function answer(decoded) {
    const { request: { id, op, args } } = decoded;
    try {
      if (op === 'shutdown') {
        onlyKeys(args, []);
        closing = true;
        await Promise.allSettled([...inFlight]);
        send({ id, ok: true, result: {} });
        process.exit(0);
      }
      if (!Object.hasOwn(handlers, op)) throw new ProtocolError('unknown_op', `op ${JSON.stringify(op)} is not served`);
      const taskDups = [];
      for (const p of decoded.duplicates) {
        if (op === 'write_task' && p.length === 3 && p[1] === 'task') taskDups.push(p[2]);
        else throw new ProtocolError('invalid_request', `duplicate key ${p.slice(1).join('.')}`);
      }
      if (decoded.unsafeIntegers.length) {
        throw new ProtocolError('invalid_request', `integer outside the I-JSON range at ${decoded.unsafeIntegers[0].slice(1).join('.')}`);
      }
      send({ id, ok: true, result: await handlers[op](args, taskDups) });
    } catch (err) {
      if (err instanceof ProtocolError) {
        send({ id, ok: false, error: { code: err.code, message: err.message } });
      } else {
        process.stderr.write(`${err.stack || err}\n`);
        const code = typeof err.code === 'string' && /^E[A-Z]+$/.test(err.code) ? 'io_error' : 'internal_error';
        send({ id, ok: false, error: { code, message: String(err.message || err) } });
      }
    }
  }

  function onLine(bytes) {
    if (closing) return;
    if (/^[ \t\r]*$/.test(bytes.toString('latin1'))) return; // empty or whitespace-only: no answer
    const decoded = decodeRequest(bytes);
    if (decoded.bad) {
      send({ id: null, ok: false, error: { code: 'bad_message', message: decoded.bad } });
      return;
    }
    const call = answer(decoded);
    inFlight.add(call);
    call.finally(() => inFlight.delete(call));
  }

  let pending = Buffer.alloc(0);
  process.stdin.on('data', (chunk) => {
    pending = Buffer.concat([pending, chunk]);
    let nl;
    while ((nl = pending.indexOf(0x0a)) >= 0) {
      onLine(pending.subarray(0, nl));
      pending = pending.subarray(nl + 1);
    }
  });
  process.stdin.on('end', async () => {
    if (pending.length) onLine(pending);
    await Promise.allSettled([...inFlight]);
    process.exit(0);
  });
}

main().catch((err) => {
  process.stderr.write(`${err.stack || err}\n`);
  process.exit(1);
});
