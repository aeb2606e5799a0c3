"""`effector` in Python: a job that performs one side effect through the host.

The same job as the Rust guest guests/effector (same params, same output
bytes, same error classes and messages, same log lines), written against
wit/job.wit (package paddock:job@0.1.0, world `job`) for componentize-py
0.25.1. Build it with scripts/build-foreign-guests.sh.

How each host answer becomes the job's result:

| host answer                                  | job result                                      |
|----------------------------------------------|-------------------------------------------------|
| `done(body)` / `replayed(body)`              | ok `{"outcome":"done"/"replayed","body":"..."}` |
| `failed(reason)`                             | err(permanent)                                  |
| `unknown(reason)`                            | err(unknown)                                    |
| `lease-lost`, `circuit-open`                 | err(transient)                                  |
| `not-granted`, `key-conflict`, `invalid`, `budget-exhausted` | err(permanent)                  |

Every message is a one-line JSON object: `{"outcome":...,"body":...}` for an
outcome, `{"error":"<effect-error case>","detail":...}` for an effect error.

Params: `connector`, `action`, `key` (strings, required), `payload` (string,
sent as UTF-8 bytes, default empty), `compensates` (string, optional).
Optional `mode`: "invoke" (default) or "query", which calls
`effects.query(connector, key)` instead and returns the recorded outcome
(`{"outcome":"none"}` when there is no record) without performing anything.

Steps before the effect (mode "invoke" only): `steps` (integer, default 0)
and `spin_per_step` (integer, default 0: busy-loop iterations per step).
When `steps` is given the job resumes from its checkpoint (a u32 step
counter, little-endian), saves a checkpoint after every step, invokes the
effect, then saves one more checkpoint (`steps + 1`: the effect was
answered), and its output gains `"resumed_from":K,"attempt":N`. A refused
checkpoint (lease-lost, pause, cancel) ends the run with a transient /
permanent error.

Params that are not valid JSON are refused with the same error class and
message prefix (`params: invalid JSON`) as the Rust guest, but in
the words of Python's json module.
"""

import json
import re
import unicodedata

from componentize_py_types import Err
import wit_world
from wit_world.imports import checkpoint, context, effects, log
from wit_world.imports.types import Control, ErrorClass, JobError

U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1
MAX_DEPTH = 64  # nesting limit of the params document, as in the Rust guest


def error(class_: ErrorClass, message: str) -> Err:
    """The exception that makes `run` return err(job-error)."""
    return Err(JobError(class_, message))


def invalid(message: str) -> Err:
    return error(ErrorClass.INVALID_INPUT, message)


# ------------------------------------------------------------------ JSON --


def dumps(value) -> str:
    """One-line JSON, escaped byte for byte like the Rust guest: only `"`,
    `\\` and control characters are escaped, `\\b` and `\\f` as `\\u0008`,
    `\\u000c`; everything else is written as UTF-8."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return re.sub(
        r"\\(.)",
        lambda m: {"b": "\\u0008", "f": "\\u000c"}.get(m.group(1), m.group(0)),
        text,
    )


class _NotU64:
    """A JSON number that is not a non-negative integer without fraction or
    exponent (the only kind `steps` and `spin_per_step` accept)."""


def _int(text: str):
    # Twenty digits are already past u64; longer ones need not be converted.
    return int(text) if not text.startswith("-") and len(text) <= 20 else _NotU64()


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _depth_error(text: str):
    """Where the nesting goes past MAX_DEPTH, or None (checked before parsing,
    so that a deep document cannot exhaust the stack)."""
    depth, in_string, escaped = 0, False, False
    for i, c in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return len(text[:i].encode())
        elif c in "]}":
            depth -= 1
    return None


def _has_lone_surrogate(value) -> bool:
    if isinstance(value, str):
        return any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    if isinstance(value, list):
        return any(_has_lone_surrogate(v) for v in value)
    if isinstance(value, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v) for k, v in value.items())
    return False


def parse_params(text: str) -> dict:
    at = _depth_error(text)
    if at is not None:
        raise invalid(f"params: invalid JSON at byte {at}: nested too deeply")
    try:
        params = json.loads(
            text, parse_int=_int, parse_float=lambda _: _NotU64(), parse_constant=_no_constant
        )
    except json.JSONDecodeError as e:
        raise invalid(f"params: invalid JSON at byte {len(text[:e.pos].encode())}: {e.msg}")
    except ValueError as e:
        raise invalid(f"params: invalid JSON: {e}")
    if _has_lone_surrogate(params):
        raise invalid("params: invalid JSON: lone surrogate")
    if not isinstance(params, dict):
        raise invalid("params must be a JSON object")
    return params


_DEBUG_NAMED = {"\0": "\\0", "\t": "\\t", "\r": "\\r", "\n": "\\n", "\\": "\\\\", '"': '\\"'}
# Written as \u{..} by Rust's `{:?}`: unprintable characters (and spaces
# other than U+0020) and combining marks.
_DEBUG_ESCAPED = {"Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn", "Mn", "Me"}


def rust_debug(s: str) -> str:
    """`s` quoted the way Rust's `{:?}` quotes a string (for one message)."""
    out = ['"']
    for c in s:
        if c in _DEBUG_NAMED:
            out.append(_DEBUG_NAMED[c])
        elif c != " " and unicodedata.category(c) in _DEBUG_ESCAPED:
            out.append(f"\\u{{{ord(c):x}}}")
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


# ---------------------------------------------------------------- params --


def str_param(params: dict, key: str, required: bool):
    if key not in params:
        if required:
            raise invalid(f"param `{key}` is required")
        return None
    v = params[key]
    if v is None and not required:
        return None
    if not isinstance(v, str):
        raise invalid(f"param `{key}` must be a string")
    return v


def int_param(params: dict, key: str, maximum: int):
    """An optional non-negative integer param."""
    v = params.get(key)
    if v is None:
        return None
    if type(v) is int and 0 <= v <= maximum:
        return v
    raise invalid(f"param `{key}` must be an integer from 0 to {maximum}")


# ------------------------------------------------------------ checkpoint --


def save(step: int) -> None:
    """Save checkpoint `step`; an error unless the host says proceed."""
    answer = checkpoint.save(step.to_bytes(4, "little"))
    if answer == Control.PROCEED:
        return
    if answer == Control.LEASE_LOST:
        log.log(log.Level.WARN, f"effector: lease lost saving step {step}")
        raise error(ErrorClass.TRANSIENT, f"lease lost at step {step}; checkpoint not saved")
    if answer == Control.PAUSE_REQUESTED:
        raise error(ErrorClass.TRANSIENT, f"paused at step {step}")
    raise error(ErrorClass.PERMANENT, f"cancelled at step {step}")


def run_steps(steps: int, spin_per_step: int) -> int:
    """Resume from the checkpoint and run the steps up to `steps`. Returns the
    step the run resumed from."""
    state = checkpoint.load()
    if state is None:
        resumed_from = 0
    elif len(state) != 4:
        raise error(
            ErrorClass.PERMANENT, f"corrupt checkpoint: expected 4 bytes, got {len(state)}"
        )
    else:
        resumed_from = int.from_bytes(state, "little")
    step = resumed_from
    while step < steps:
        acc = 0
        for i in range(spin_per_step):
            acc = (acc + i) & U64_MAX
        step += 1
        save(step)
    return resumed_from


# --------------------------------------------------------------- answers --


def outcome_json(kind: str, body: str) -> dict:
    return {"outcome": kind, "body": body}


def map_outcome(outcome: effects.Outcome) -> dict:
    """The output object for done/replayed; raises the matching job error
    otherwise."""
    if isinstance(outcome, effects.Outcome_Done):
        return outcome_json("done", outcome.value.decode("utf-8", "replace"))
    if isinstance(outcome, effects.Outcome_Replayed):
        return outcome_json("replayed", outcome.value.decode("utf-8", "replace"))
    if isinstance(outcome, effects.Outcome_Failed):
        raise error(ErrorClass.PERMANENT, dumps(outcome_json("failed", outcome.value)))
    raise error(ErrorClass.UNKNOWN, dumps(outcome_json("unknown", outcome.value)))


EFFECT_ERRORS = {
    effects.EffectError_NotGranted: (ErrorClass.PERMANENT, "not-granted"),
    effects.EffectError_KeyConflict: (ErrorClass.PERMANENT, "key-conflict"),
    effects.EffectError_LeaseLost: (ErrorClass.TRANSIENT, "lease-lost"),
    effects.EffectError_CircuitOpen: (ErrorClass.TRANSIENT, "circuit-open"),
    effects.EffectError_BudgetExhausted: (ErrorClass.PERMANENT, "budget-exhausted"),
    effects.EffectError_Invalid: (ErrorClass.PERMANENT, "invalid"),
}


def map_effect_error(e) -> Err:
    class_, case = EFFECT_ERRORS[type(e)]
    detail = getattr(e, "value", "")  # lease-lost carries nothing
    return error(class_, dumps({"error": case, "detail": detail}))


# ------------------------------------------------------------------- run --


def invoke(inv, params: dict, connector: str, key: str) -> bytes:
    action = str_param(params, "action", True)
    payload = str_param(params, "payload", False) or ""
    compensates = str_param(params, "compensates", False)
    steps = int_param(params, "steps", U32_MAX - 1)
    spin_per_step = int_param(params, "spin_per_step", U64_MAX) or 0
    resumed_from = run_steps(steps, spin_per_step) if steps is not None else None
    body = payload.encode()
    log.log(
        log.Level.INFO,
        f"effector: invoke {connector}/{action} key={key} ({len(body)} payload bytes)",
    )
    req = effects.Request(connector, action, key, body, compensates)
    result, failure = None, None
    try:
        result = map_outcome(effects.invoke(req))
    except Err as e:
        failure = e if isinstance(e.value, JobError) else map_effect_error(e.value)
    if steps is None:
        if failure is not None:
            raise failure
        return dumps(result).encode()
    # The effect was answered (whatever the answer): record it, then report
    # where this run started.
    save(steps + 1)
    if failure is not None:
        raise failure
    result["resumed_from"] = resumed_from
    result["attempt"] = inv.attempt
    return dumps(result).encode()


def query(connector: str, key: str) -> bytes:
    log.log(log.Level.INFO, f"effector: query {connector} key={key}")
    try:
        outcome = effects.query(connector, key)
    except Err as e:
        raise map_effect_error(e.value)
    if outcome is None:
        return dumps({"outcome": "none"}).encode()
    return dumps(map_outcome(outcome)).encode()


class WitWorld(wit_world.WitWorld):
    def run(self) -> bytes:
        inv = context.current()
        params = parse_params(inv.params)
        connector = str_param(params, "connector", True)
        key = str_param(params, "key", True)
        mode = str_param(params, "mode", False)
        if mode is None:
            mode = "invoke"
        if mode == "invoke":
            return invoke(inv, params, connector, key)
        if mode == "query":
            return query(connector, key)
        raise invalid(f'param `mode` must be "invoke" or "query", not {rust_debug(mode)}')
