'use strict';
/**
 * write-task-v1 from spec/retryproof.yaml `digest`, written from the spec alone:
 * a strict JSON reader (duplicate keys reported, lone surrogates kept so they can be
 * refused), RFC 8785 serialization, and the task canonicalization rules.
 */
const crypto = require('crypto');

const SCHEMA_VERSION = 'write-task-v1';
const SCALARS = ['sender', 'recipient', 'subject', 'body', 'priority', 'thread_key', 'parent', 'risk_level'];
const ARRAYS = ['references', 'depends_on'];
const FIELDS = new Set([...SCALARS, ...ARRAYS]);

/** A task that breaks the contract: invalid_request naming the offending part. */
class ContractError extends Error {
  constructor(field, message) {
    super(`${field}: ${message}`);
    this.field = field;
  }
}

class JsonSyntaxError extends Error {}

/**
 * Parse JSON text (RFC 8259) without losing what JSON.parse hides: every duplicate
 * key is reported by its path, and every integer literal beyond 2**53 - 1 (which has
 * no exact I-JSON value) by its path. Objects have no prototype, so a key such as
 * "__proto__" is just a key.
 */
function parseStrict(text) {
  let i = 0;
  const duplicates = [];
  const unsafeIntegers = [];
  const fail = (what) => { throw new JsonSyntaxError(`${what} at offset ${i}`); };
  const ws = () => { while (i < text.length && ' \t\n\r'.includes(text[i])) i++; };

  function value(path) {
    ws();
    const c = text[i];
    if (c === '{') return object(path);
    if (c === '[') return array(path);
    if (c === '"') return string();
    if (c === '-' || (c >= '0' && c <= '9')) return number(path);
    for (const [word, v] of [['true', true], ['false', false], ['null', null]]) {
      if (text.startsWith(word, i)) { i += word.length; return v; }
    }
    return fail('unexpected character');
  }

  function object(path) {
    i++;
    const out = Object.create(null);
    const seen = new Set();
    ws();
    if (text[i] === '}') { i++; return out; }
    for (;;) {
      ws();
      if (text[i] !== '"') fail('expected a key');
      const key = string();
      ws();
      if (text[i] !== ':') fail('expected :');
      i++;
      const v = value([...path, key]);
      if (seen.has(key)) duplicates.push([...path, key]);
      seen.add(key);
      out[key] = v;
      ws();
      if (text[i] === ',') { i++; continue; }
      if (text[i] === '}') { i++; return out; }
      fail('expected , or }');
    }
  }

  function array(path) {
    i++;
    const out = [];
    ws();
    if (text[i] === ']') { i++; return out; }
    for (;;) {
      out.push(value([...path, out.length]));
      ws();
      if (text[i] === ',') { i++; continue; }
      if (text[i] === ']') { i++; return out; }
      fail('expected , or ]');
    }
  }

  const SHORT = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };
  function string() {
    i++;
    let out = '';
    for (;;) {
      if (i >= text.length) fail('unterminated string');
      const c = text[i];
      if (c === '"') { i++; return out; }
      if (c < ' ') fail('raw control character in string');
      if (c !== '\\') { out += c; i++; continue; }
      const e = text[i + 1];
      if (e in SHORT) { out += SHORT[e]; i += 2; continue; }
      if (e !== 'u' || !/^[0-9a-fA-F]{4}$/.test(text.slice(i + 2, i + 6))) fail('bad escape');
      // Each \uXXXX is one UTF-16 unit: a pair joins by itself, a lone half stays lone.
      out += String.fromCharCode(parseInt(text.slice(i + 2, i + 6), 16));
      i += 6;
    }
  }

  function number(path) {
    const m = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/.exec(text.slice(i, i + 400));
    if (!m) fail('bad number');
    i += m[0].length;
    const n = Number(m[0]);
    if (!Number.isFinite(n)) fail('number out of range');
    if (!m[2] && !m[3] && !Number.isSafeInteger(n)) unsafeIntegers.push(path);
    return n;
  }

  const result = value([]);
  ws();
  if (i !== text.length) fail('trailing text');
  return { value: result, duplicates, unsafeIntegers };
}

/** RFC 8785: sorted keys (UTF-16 code units), ECMAScript number and string forms. */
function canonicalJson(v) {
  if (v === null) return 'null';
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw new TypeError('non-finite number has no RFC 8785 form');
    return Object.is(v, -0) ? '0' : String(v);
  }
  if (typeof v === 'string') return canonicalString(v);
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  const keys = Object.keys(v).sort();
  return `{${keys.map((k) => `${canonicalString(k)}:${canonicalJson(v[k])}`).join(',')}}`;
}

const ESCAPES = { '"': '\\"', '\\': '\\\\', '\b': '\\b', '\t': '\\t', '\n': '\\n', '\f': '\\f', '\r': '\\r' };
function canonicalString(s) {
  if (!s.isWellFormed()) throw new TypeError('a lone surrogate has no UTF-8 form');
  let out = '"';
  for (const ch of s) {
    if (ch in ESCAPES) out += ESCAPES[ch];
    else if (ch < ' ') out += `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`;
    else out += ch; // DEL, U+2028, U+2029, U+0085 and non-BMP stay literal
  }
  return `${out}"`;
}

function normalizeText(s, field) {
  if (!s.isWellFormed()) throw new ContractError(field, 'holds a lone surrogate (not Unicode)');
  return s.replace(/\r\n/g, '\n').replace(/\r/g, '\n').normalize('NFC');
}

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * The canonical object of a task: all ten keys, absent/null scalars null,
 * absent/null arrays [], every string line-ending normalized then NFC.
 * `duplicateKeys` are the task keys its JSON text named twice.
 */
function canonicalTask(task, duplicateKeys = []) {
  if (!isObject(task)) throw new ContractError('task', 'must be an object');
  if (duplicateKeys.length) throw new ContractError(`task.${duplicateKeys[0]}`, 'key given twice');
  for (const key of Object.keys(task)) {
    if (!FIELDS.has(key)) throw new ContractError(`task.${JSON.stringify(key).slice(1, -1)}`, 'unknown field');
  }
  const out = {};
  for (const k of SCALARS) {
    const v = task[k];
    if (v === undefined || v === null) out[k] = null;
    else if (typeof v === 'string') out[k] = normalizeText(v, `task.${k}`);
    else throw new ContractError(`task.${k}`, 'must be a string or null');
  }
  for (const k of ARRAYS) {
    const v = task[k];
    if (v === undefined || v === null) { out[k] = []; continue; }
    if (!Array.isArray(v)) throw new ContractError(`task.${k}`, 'must be an array of strings or null');
    out[k] = v.map((item, n) => {
      if (typeof item !== 'string') throw new ContractError(`task.${k}[${n}]`, 'must be a string');
      return normalizeText(item, `task.${k}[${n}]`);
    });
  }
  return out;
}

function digestOf(canonical) {
  const bytes = Buffer.from(canonicalJson(canonical), 'utf8');
  return `sha256:${crypto.createHash('sha256').update(bytes).digest('hex')}`;
}

module.exports = {
  SCHEMA_VERSION, ContractError, JsonSyntaxError, parseStrict, canonicalJson, canonicalTask, digestOf, isObject,
};
