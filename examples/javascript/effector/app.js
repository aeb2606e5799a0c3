// `effector` in JavaScript: a job that performs one side effect through the host.
//
// The same job as the Rust guest guests/effector (same params, same output
// bytes, same error classes and messages, same log lines), written against
// wit/job.wit (package paddock:job@0.1.0, world `job`) as an ES module for
// @bytecodealliance/componentize-js 0.23.0. Build it with
// scripts/build-foreign-guests.sh.
//
// How each host answer becomes the job's result:
//
// | host answer                                  | job result                                      |
// |----------------------------------------------|-------------------------------------------------|
// | `done(body)` / `replayed(body)`              | ok `{"outcome":"done"/"replayed","body":"..."}` |
// | `failed(reason)`                             | err(permanent)                                  |
// | `unknown(reason)`                            | err(unknown)                                    |
// | `lease-lost`, `circuit-open`                 | err(transient)                                  |
// | `not-granted`, `key-conflict`, `invalid`, `budget-exhausted` | err(permanent)                  |
//
// Every message is a one-line JSON object: `{"outcome":...,"body":...}` for an
// outcome, `{"error":"<effect-error case>","detail":...}` for an effect error.
//
// Params: `connector`, `action`, `key` (strings, required), `payload` (string,
// sent as UTF-8 bytes, default empty), `compensates` (string, optional).
// Optional `mode`: "invoke" (default) or "query", which calls
// `effects.query(connector, key)` instead and returns the recorded outcome
// (`{"outcome":"none"}` when there is no record) without performing anything.
//
// Steps before the effect (mode "invoke" only): `steps` (integer, default 0)
// and `spin_per_step` (integer, default 0: busy-loop iterations per step).
// When `steps` is given the job resumes from its checkpoint (a u32 step
// counter, little-endian), saves a checkpoint after every step, invokes the
// effect, then saves one more checkpoint (`steps + 1`: the effect was
// answered), and its output gains `"resumed_from":K,"attempt":N`. A refused
// checkpoint (lease-lost, pause, cancel) ends the run with a transient /
// permanent error.
//
// Bindings (componentize-js): records are objects with camelCase fields,
// enums are kebab-case strings, variants are `{ tag, val }`, `option<T>` is
// T or undefined, `list<u8>` is a Uint8Array. An imported function returning
// `result` throws a ComponentError whose `.payload` is its error; `run`
// returns its `ok` value and throws a plain job-error object for `err` (an
// `Error` thrown from `run` traps).
//
// One difference from the Rust guest the bindings impose: a string the host
// passes in loses a leading U+FEFF (byte order mark), so params starting with
// one are parsed rather than refused.

import { current } from 'paddock:job/context@0.1.0';
import { load, save as saveCheckpoint } from 'paddock:job/checkpoint@0.1.0';
import { invoke as invokeEffect, query as queryEffect } from 'paddock:job/effects@0.1.0';
import { log } from 'paddock:job/log@0.1.0';

const U32_MAX = 0xffffffffn;
const U64_MAX = 0xffffffffffffffffn;
const MAX_DEPTH = 64; // nesting limit of the params document, as in the Rust guest

const utf8 = new TextEncoder();
const utf8Lossy = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });

/** Thrown to make `run` return err(job-error). */
class JobError {
  constructor(cls, message) {
    this.class = cls;
    this.message = message;
  }
}

const error = (cls, message) => new JobError(cls, message);
const invalid = (message) => error('invalid-input', message);

// ------------------------------------------------------------------ JSON --

/** `s` as a JSON string literal, escaped byte for byte like the Rust guest:
 * only `"`, `\` and control characters are escaped. */
function quote(s) {
  let out = '"';
  for (const c of s) {
    const n = c.codePointAt(0);
    if (c === '"') out += '\\"';
    else if (c === '\\') out += '\\\\';
    else if (c === '\n') out += '\\n';
    else if (c === '\r') out += '\\r';
    else if (c === '\t') out += '\\t';
    else if (n < 0x20) out += '\\u' + n.toString(16).padStart(4, '0');
    else out += c;
  }
  return out + '"';
}

/** A one-line JSON object from [key, value] pairs (strings and integers). */
function object(members) {
  return '{' + members.map(([k, v]) => quote(k) + ':' + (typeof v === 'string' ? quote(v) : String(v))).join(',') + '}';
}

/** A JSON value as the params parser keeps it: numbers keep their source
 * text (to tell 5 from 5.0, and integers past 2^53 apart). */
class JsonNumber {
  constructor(text) {
    this.text = text;
  }
  /** A non-negative integer written without fraction or exponent, as a BigInt. */
  asU64() {
    if (!/^[0-9]+$/.test(this.text)) return undefined;
    const n = BigInt(this.text);
    return n <= U64_MAX ? n : undefined;
  }
}

/** Parse the params document over its UTF-8 bytes, with the grammar, limits
 * and error messages of the Rust guest's parser (guests/minijson). Objects
 * become Maps (a later duplicate key wins). */
function parseJson(text) {
  const s = utf8.encode(text);
  let i = 0;
  let depth = 0;
  const err = (what) => new Error(`invalid JSON at byte ${i}: ${what}`);
  const peek = () => (i < s.length ? s[i] : undefined);
  const isDigit = (b) => b !== undefined && b >= 0x30 && b <= 0x39;
  const ws = () => {
    while ([0x20, 0x09, 0x0a, 0x0d].includes(peek())) i++;
  };
  const lit = (word, v) => {
    for (let k = 0; k < word.length; k++) {
      if (s[i + k] !== word.charCodeAt(k)) throw err('unexpected token');
    }
    i += word.length;
    return v;
  };
  const digits = () => {
    const start = i;
    while (isDigit(peek())) i++;
    return i - start;
  };
  const number = () => {
    const start = i;
    if (peek() === 0x2d) i++; // -
    if (peek() === 0x30) i++;
    else if (isDigit(peek())) digits();
    else throw err('bad number');
    if (peek() === 0x2e) {
      i++;
      if (digits() === 0) throw err('bad fraction');
    }
    if (peek() === 0x65 || peek() === 0x45) {
      i++;
      if (peek() === 0x2b || peek() === 0x2d) i++;
      if (digits() === 0) throw err('bad exponent');
    }
    return new JsonNumber(String.fromCharCode(...s.subarray(start, i)));
  };
  const hex4 = () => {
    if (i + 4 > s.length) throw err('short \\u escape');
    const h = String.fromCharCode(...s.subarray(i, i + 4));
    if (!/^[0-9a-fA-F]{4}$/.test(h)) throw err('bad \\u escape');
    i += 4;
    return parseInt(h, 16);
  };
  const string = () => {
    i++; // opening quote
    const out = [];
    for (;;) {
      const b = peek();
      if (b === undefined) throw err('unterminated string');
      i++;
      if (b === 0x22) break;
      if (b === 0x5c) {
        const e = peek();
        if (e === undefined) throw err('unterminated escape');
        i++;
        const simple = { 0x22: 0x22, 0x5c: 0x5c, 0x2f: 0x2f, 0x62: 0x08, 0x66: 0x0c, 0x6e: 0x0a, 0x72: 0x0d, 0x74: 0x09 };
        if (e in simple) {
          out.push(simple[e]);
        } else if (e === 0x75) {
          const hi = hex4();
          let cp = hi;
          if (hi >= 0xd800 && hi < 0xdc00) {
            if (s[i] !== 0x5c || s[i + 1] !== 0x75) throw err('lone surrogate');
            i += 2;
            const lo = hex4();
            if (!(lo >= 0xdc00 && lo < 0xe000)) throw err('bad surrogate pair');
            cp = 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00);
          } else if (hi >= 0xdc00 && hi < 0xe000) {
            throw err('lone surrogate');
          }
          out.push(...utf8.encode(String.fromCodePoint(cp)));
        } else {
          throw err('bad escape');
        }
      } else if (b <= 0x1f) {
        throw err('control character in string');
      } else {
        out.push(b);
      }
    }
    return utf8Lossy.decode(new Uint8Array(out));
  };
  const nested = (f) => {
    if (depth >= MAX_DEPTH) throw err('nested too deeply');
    depth++;
    i++; // the opening bracket
    ws();
    try {
      return f();
    } finally {
      depth--;
    }
  };
  const value = () => {
    const b = peek();
    if (b === undefined) throw err('unexpected end');
    if (b === 0x6e) return lit('null', null);
    if (b === 0x74) return lit('true', true);
    if (b === 0x66) return lit('false', false);
    if (b === 0x22) return string();
    if (b === 0x2d || isDigit(b)) return number();
    if (b === 0x5b) {
      return nested(() => {
        const items = [];
        if (peek() === 0x5d) {
          i++;
          return items;
        }
        for (;;) {
          ws();
          items.push(value());
          ws();
          if (peek() === 0x2c) i++;
          else if (peek() === 0x5d) {
            i++;
            return items;
          } else throw err("expected ',' or ']'");
        }
      });
    }
    if (b === 0x7b) {
      return nested(() => {
        const members = new Map();
        if (peek() === 0x7d) {
          i++;
          return members;
        }
        for (;;) {
          ws();
          if (peek() !== 0x22) throw err('expected a string key');
          const k = string();
          ws();
          if (peek() !== 0x3a) throw err("expected ':'");
          i++;
          ws();
          members.set(k, value());
          ws();
          if (peek() === 0x2c) i++;
          else if (peek() === 0x7d) {
            i++;
            return members;
          } else throw err("expected ',' or '}'");
        }
      });
    }
    throw err('unexpected character');
  };
  ws();
  const v = value();
  ws();
  if (i !== s.length) throw err('trailing characters');
  return v;
}

// What Rust's `{:?}` writes as `\u{..}`: controls, spaces other than U+0020,
// line/paragraph separators, format characters, private use and combining
// marks (their common blocks: close enough for an error message; this engine
// has no Unicode property escapes in regular expressions).
const DEBUG_ESCAPED = [
  [0x00, 0x1f], [0x7f, 0xa0], [0xad, 0xad], [0x300, 0x36f], [0x483, 0x489], [0x600, 0x605],
  [0x61c, 0x61c], [0x6dd, 0x6dd], [0x70f, 0x70f], [0x1680, 0x1680], [0x180e, 0x180e],
  [0x1ab0, 0x1aff], [0x1dc0, 0x1dff], [0x2000, 0x200f], [0x2028, 0x202f], [0x205f, 0x2064],
  [0x2066, 0x206f], [0x20d0, 0x20ff], [0x3000, 0x3000], [0xe000, 0xf8ff], [0xfe00, 0xfe0f],
  [0xfe20, 0xfe2f], [0xfeff, 0xfeff], [0xfff9, 0xfffb], [0xe0001, 0xe0001], [0xe0020, 0xe007f],
  [0xe0100, 0xe01ef], [0xf0000, 0x10ffff],
];

/** `s` quoted the way Rust's `{:?}` quotes a string (for one message). */
function rustDebug(s) {
  const named = { '\0': '\\0', '\t': '\\t', '\r': '\\r', '\n': '\\n', '\\': '\\\\', '"': '\\"' };
  let out = '"';
  for (const c of s) {
    const n = c.codePointAt(0);
    if (Object.hasOwn(named, c)) out += named[c];
    else if (DEBUG_ESCAPED.some(([lo, hi]) => n >= lo && n <= hi)) out += `\\u{${n.toString(16)}}`;
    else out += c;
  }
  return out + '"';
}

// ---------------------------------------------------------------- params --

function strParam(params, key, required) {
  if (!params.has(key)) {
    if (required) throw invalid(`param \`${key}\` is required`);
    return undefined;
  }
  const v = params.get(key);
  if (v === null && !required) return undefined;
  if (typeof v !== 'string') throw invalid(`param \`${key}\` must be a string`);
  return v;
}

/** An optional non-negative integer param, as a BigInt. */
function intParam(params, key, max) {
  const v = params.get(key);
  if (v === undefined || v === null) return undefined;
  const n = v instanceof JsonNumber ? v.asU64() : undefined;
  if (n === undefined || n > max) {
    throw invalid(`param \`${key}\` must be an integer from 0 to ${max}`);
  }
  return n;
}

// ------------------------------------------------------------ checkpoint --

/** Save checkpoint `step`; an error unless the host says proceed. */
function save(step) {
  const state = new Uint8Array(4);
  new DataView(state.buffer).setUint32(0, step, true);
  switch (saveCheckpoint(state)) {
    case 'proceed':
      return;
    case 'lease-lost':
      log('warn', `effector: lease lost saving step ${step}`);
      throw error('transient', `lease lost at step ${step}; checkpoint not saved`);
    case 'pause-requested':
      throw error('transient', `paused at step ${step}`);
    default: // cancel-requested
      throw error('permanent', `cancelled at step ${step}`);
  }
}

/** Resume from the checkpoint and run the steps up to `steps`. Returns the
 * step the run resumed from. */
function runSteps(steps, spinPerStep) {
  const state = load();
  let resumedFrom = 0;
  if (state !== undefined && state !== null) {
    if (state.length !== 4) {
      throw error('permanent', `corrupt checkpoint: expected 4 bytes, got ${state.length}`);
    }
    resumedFrom = new DataView(state.buffer, state.byteOffset, 4).getUint32(0, true);
  }
  // Past 2^53 iterations the count is approximate: the loop runs for ever
  // either way.
  const spin = Number(spinPerStep);
  let step = resumedFrom;
  while (step < steps) {
    let acc = 0;
    for (let i = 0; i < spin; i++) acc = (acc + i) % 0x100000000;
    step += 1;
    save(step);
  }
  return resumedFrom;
}

// --------------------------------------------------------------- answers --

/** The output members for done/replayed; throws the matching job error
 * otherwise. */
function mapOutcome(outcome) {
  switch (outcome.tag) {
    case 'done':
    case 'replayed':
      return [['outcome', outcome.tag], ['body', utf8Lossy.decode(outcome.val)]];
    case 'failed':
      throw error('permanent', object([['outcome', 'failed'], ['body', outcome.val]]));
    default: // unknown
      throw error('unknown', object([['outcome', 'unknown'], ['body', outcome.val]]));
  }
}

const EFFECT_ERRORS = {
  'not-granted': 'permanent',
  'key-conflict': 'permanent',
  'lease-lost': 'transient',
  'circuit-open': 'transient',
  'budget-exhausted': 'permanent',
  invalid: 'permanent',
};

/** The job error for an effect error thrown by an import (rethrows anything
 * else: a bug traps, as in the Rust guest). */
function mapEffectError(thrown) {
  if (thrown instanceof JobError) return thrown;
  const e = thrown !== null && typeof thrown === 'object' && 'payload' in thrown ? thrown.payload : thrown;
  if (e === null || typeof e !== 'object' || !(e.tag in EFFECT_ERRORS)) throw thrown;
  return error(EFFECT_ERRORS[e.tag], object([['error', e.tag], ['detail', e.val ?? '']]));
}

// ------------------------------------------------------------------- run --

function invoke(inv, params, connector, key) {
  const action = strParam(params, 'action', true);
  const payload = strParam(params, 'payload', false) ?? '';
  const compensates = strParam(params, 'compensates', false);
  const steps = intParam(params, 'steps', U32_MAX - 1n);
  const spinPerStep = intParam(params, 'spin_per_step', U64_MAX) ?? 0n;
  const resumedFrom = steps === undefined ? undefined : runSteps(Number(steps), spinPerStep);
  const body = utf8.encode(payload);
  log('info', `effector: invoke ${connector}/${action} key=${key} (${body.length} payload bytes)`);
  let result;
  let failure;
  try {
    result = mapOutcome(invokeEffect({ connector, action, idempotencyKey: key, payload: body, compensates }));
  } catch (e) {
    failure = mapEffectError(e);
  }
  if (steps === undefined) {
    if (failure) throw failure;
    return utf8.encode(object(result));
  }
  // The effect was answered (whatever the answer): record it, then report
  // where this run started.
  save(Number(steps) + 1);
  if (failure) throw failure;
  return utf8.encode(object([...result, ['resumed_from', resumedFrom], ['attempt', inv.attempt]]));
}

function query(connector, key) {
  log('info', `effector: query ${connector} key=${key}`);
  let outcome;
  try {
    outcome = queryEffect(connector, key);
  } catch (e) {
    throw mapEffectError(e);
  }
  if (outcome === undefined || outcome === null) return utf8.encode(object([['outcome', 'none']]));
  return utf8.encode(object(mapOutcome(outcome)));
}

/** Do the job once: `ok(bytes)` is returned, `err(job-error)` thrown. */
export function run() {
  const inv = current();
  let params;
  try {
    params = parseJson(inv.params);
  } catch (e) {
    throw invalid(`params: ${e.message}`);
  }
  if (!(params instanceof Map)) throw invalid('params must be a JSON object');
  const connector = strParam(params, 'connector', true);
  const key = strParam(params, 'key', true);
  const mode = strParam(params, 'mode', false) ?? 'invoke';
  if (mode === 'invoke') return invoke(inv, params, connector, key);
  if (mode === 'query') return query(connector, key);
  throw invalid(`param \`mode\` must be "invoke" or "query", not ${rustDebug(mode)}`);
}
