"""Predictor: the request path every laya runtime shares: validate, tokenise, batch, call the forward, decode.

A runtime (the torch Agent, the ONNX agent) subclasses `Predictor` and supplies `tok`, `cfg`, the
calibration attributes and `_infer(batch) -> (logits [N, K] fp32, act probabilities [N, n_act])`: the logits
a numpy array or a host torch tensor, the act probabilities a numpy array or nested lists of floats.
"""

from __future__ import annotations

import contextlib
import threading
import time
import warnings
from typing import Any

import numpy as np

from . import hooks as hooks_mod
from . import stage_clock
from .answers import (Calibration, DecodePlan, apply_min_confidence, check_flag, check_min_confidence,
                      clamp_temperatures, decode_planned, positive_int, resolve_lang_temperatures)
from .calibrate import (apply_calibration_payload, calibration_payload_for, read_calibration_json,
                        write_calibration, check_records as _check_records)
from .hooks import HookRegistry, PredictContext
from .long import predict_long
from .questions import Question, keeps_tail, render_state, render_states
from .question_sets import question_set
from .sequence import (Batch, Row, build_head, collate, config_head_max_len, config_max_len, encode, encode_view,
                       rows_for, scrub_mask, tokenizer_view)
from .structured import StructuredDecisions


NO_SCOPE = contextlib.nullcontext()  # (reusable: it keeps no state)


def check_batch_invariant(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"batch_invariant must be True or False, got {value!r}")
    return value


class Predictor(HookRegistry, StructuredDecisions):
    MODEL_NAME = "laya-rl-agent"

    tok: Any
    cfg: dict
    temperature: list
    temperature_by_options: dict
    lang_temperatures: dict
    binning_map: dict | None
    model_id_or_path: Any
    subfolder: str | None
    parallel_options = False  # the parallel option layout (spec 3.9): Agent only, eager forward only
    # True: every row runs alone at its own length, so a row's numbers never depend on its batch company
    batch_invariant = False
    collate_arrays = False  # True: batches of numpy arrays (a runtime without torch)

    def _infer(self, batch: Batch) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def _max_positions(self) -> int | None:
        """The longest row the encoder accepts (None = no limit known)."""
        return None

    def _chunks_scope(self) -> Any:
        """A context around all forwards of one call that runs several chunks (the torch Agent keeps
        autocast casts alive). _answer asks only for such calls; one forward needs none."""
        return contextlib.nullcontext()

    def _setup_hooks(self, hooks: Any, on_predict_start: Any, on_predict_end: Any, hooks_raise: bool,
                     hooks_concurrent: bool, hooks_timeout: float | None) -> None:
        self.hooks = hooks_mod.with_callables(hooks_mod.as_hooks(hooks), on_predict_start, on_predict_end)
        self.hooks_raise = hooks_raise
        self.hooks_concurrent = hooks_concurrent
        self.hooks_timeout = hooks_mod.validate_timeout(hooks_timeout)
        self._hooks_lock = None if hooks_concurrent else threading.RLock()

    # ---- the public predict API ------------------------------------------------------------------

    def predict(self, state: Any, questions: dict, lang: str | None = None, hooks: Any = None,
                on_predict_start: Any = None, on_predict_end: Any = None, hooks_raise: bool | None = None,
                hooks_timeout: float | None = None, max_len: int | None = None, head_max_len: int | None = None,
                min_confidence: Any = None) -> dict:
        if state is None:
            raise TypeError("state must be a str, dict or list, got None")
        return self.predict_batch([state], questions, lang=lang, hooks=hooks, on_predict_start=on_predict_start,
                                  on_predict_end=on_predict_end, hooks_raise=hooks_raise,
                                  hooks_timeout=hooks_timeout, max_len=max_len, head_max_len=head_max_len,
                                  min_confidence=min_confidence)[0]

    system_one = predict

    def predict_long(self, state: Any, questions: dict, window: int | None = None, stride: int | None = None,
                     aggregate: str = "auto", batch_size: int | None = None, lang: str | None = None,
                     hooks: Any = None, on_predict_start: Any = None, on_predict_end: Any = None,
                     hooks_raise: bool | None = None, hooks_timeout: float | None = None) -> dict:
        """A state longer than one row, answered by sliding windows (laya.long, spec §2.6)."""
        return predict_long(self, state, questions, window=window, stride=stride, aggregate=aggregate,
                            batch_size=batch_size, lang=lang, hooks=hooks, on_predict_start=on_predict_start,
                            on_predict_end=on_predict_end, hooks_raise=hooks_raise, hooks_timeout=hooks_timeout)

    def predict_batch(self, states: Any, questions: dict, batch_size: int | None = None, lang: str | None = None,
                      hooks: Any = None, on_predict_start: Any = None, on_predict_end: Any = None,
                      hooks_raise: bool | None = None, hooks_timeout: float | None = None,
                      max_len: int | None = None, head_max_len: int | None = None, sort_by_length: bool = False,
                      min_confidence: Any = None) -> list[dict]:
        if isinstance(states, (str, bytes, dict)) or not hasattr(states, "__iter__"):
            raise TypeError(f"states must be a list of states, got {type(states).__name__}; "
                            "use predict() for a single state")
        states = list(states)
        if not isinstance(questions, dict):
            raise TypeError(f"questions must be a dict {{id: definition}}, got {type(questions).__name__}")
        if batch_size is not None:
            batch_size = positive_int(batch_size, "batch_size")
        check_flag(sort_by_length, "sort_by_length")
        if lang is not None and not isinstance(lang, str):
            raise TypeError(f"lang must be a language code string such as 'de', got {type(lang).__name__}")
        min_confidence = check_min_confidence(min_confidence)
        hooks_timeout = hooks_mod.validate_timeout(hooks_timeout)
        if hooks is None and on_predict_start is None and on_predict_end is None and not self.hooks \
                and not hooks_mod.has_default_hooks():
            # Nothing would see a PredictContext: answer without building one (the common case).
            return self._answer(states, questions, batch_size, lang, max_len, head_max_len, sort_by_length,
                                min_confidence)
        call_hooks = [*hooks_mod.default_hooks(), *self.hooks,
                      *hooks_mod.with_callables(hooks_mod.as_hooks(hooks), on_predict_start, on_predict_end)]
        raise_errors = self.hooks_raise if hooks_raise is None else hooks_raise
        timeout = self.hooks_timeout if hooks_timeout is None else hooks_timeout
        ctx = PredictContext(states=states, questions=questions, model=self.MODEL_NAME, agent=self,
                             max_len=max_len, head_max_len=head_max_len)
        hooks_mod.fire(call_hooks, "on_predict_start", ctx, raise_errors, timeout, self._hooks_lock)
        if not ctx.skipped:
            try:
                ctx.results = self._answer(ctx.states, ctx.questions, batch_size, lang, ctx.max_len,
                                           ctx.head_max_len, sort_by_length, min_confidence)
            except Exception as e:
                ctx.error = e
                hooks_mod.fire(call_hooks, "on_error", ctx, False, timeout, self._hooks_lock)
                raise
        ctx.usage = hooks_mod.aggregate_usage(ctx.results)  # (a skipped call's too: end hooks read it)
        ctx.elapsed_ms = (time.perf_counter() - ctx.started_at) * 1000.0
        hooks_mod.fire(call_hooks, "on_predict_end", ctx, raise_errors, timeout, self._hooks_lock)
        return ctx.results

    def _answer(self, states: list, questions: dict, batch_size: int | None, lang: str | None,
                max_len: int | None, head_max_len: int | None, sort_by_length: bool,
                min_confidence: Any) -> list[dict]:
        texts = render_states(states)
        qset = question_set(questions)
        qs = qset.qs
        if not states:
            return []
        if not qs:
            return [{"model": self.MODEL_NAME, "answers": {}, "usage": {"input_tokens": 0, "output_tokens": 0}}
                    for _ in states]
        max_len, head_max_len = self._row_limits(max_len, head_max_len)
        tok = self.tok
        view = tokenizer_view(tok)
        mask, sep = view.mask_token, view.sep_id
        # Per question, once per call: its head and how its answers decode (both mostly from the cached set).
        pairs = tuple(zip(qs, qset.heads_for(view, tok, head_max_len)))
        cal, plans = self._plans(qset, lang)
        k = len(qs)
        n = len(states)
        results: list[dict | None] = [None] * n
        chunk = n if batch_size is None else batch_size
        sorting = sort_by_length and batch_size is not None and 1 < batch_size < n
        window = 8 * chunk if sorting else n
        clock = stage_clock.current()  # the serving worker's per-stage timing; a no-op elsewhere
        with self._chunks_scope() if chunk < n else NO_SCOPE:
            for start in range(0, n, window):
                stop = min(n, start + window)
                # one tokenizer call for the whole window: parallel in Rust, and no per-call setup each;
                # a literal mask token in user text becomes a space (scrub_mask)
                ids = encode_view(tok, view, [t.replace(mask, " ") if mask and mask in t else t
                                              for t in texts[start:stop]])
                encoded = []  # (state tokens, rows) of states start, start + 1, ...
                for i, state_ids in zip(range(start, stop), ids):
                    encoded.append((len(state_ids), rows_for(pairs, state_ids, keeps_tail(states[i]), max_len,
                                                             sep, head_max_len)))
                idx = range(start, stop)
                if sorting:  # similar lengths share a batch: less padding; results go back in input order
                    idx = sorted(idx, key=lambda i: max(len(r.ids) for r in encoded[i - start][1]))
                for c in range(0, len(idx), chunk):
                    part = idx[c:c + chunk]
                    rows = [r for i in part for r in encoded[i - start][1]]
                    logits, act = self._forward_rows(rows, view.pad_id, clock)
                    for j, i in enumerate(part):
                        offset = j * k
                        results[i] = self._result(qs, encoded[i - start], logits[offset:offset + k],
                                                  act[offset:offset + k], cal, lang, min_confidence, plans=plans)
                    clock.lap_decode()
        return results  # type: ignore[return-value]

    def _forward_rows(self, rows: list[Row], pad_id: int, clock: Any = stage_clock.OFF) -> tuple[list, list]:
        """(logits, act probabilities) of rows as lists, one forward for all, or one per row when batch_invariant."""
        groups = [[r] for r in rows] if self.batch_invariant and len(rows) > 1 else [rows]
        logits: list = []
        act: list = []
        for group in groups:
            batch = collate(group, pad_id, self.parallel_options, self.collate_arrays)
            clock.lap_prep()
            z, a = self._infer(batch)
            clock.lap_forward()
            logits += z.tolist()
            act += a if isinstance(a, list) else a.tolist()
            clock.lap_decode()
        return logits, act

    def decision_logits(self, state: Any, questions: dict, max_len: int | None = None,
                        head_max_len: int | None = None) -> list[list[float]]:
        """Each question's raw decision logits for one state (slot order, before temperatures), from the same
        rows and forward as predict, without hooks: what calibration and evaluation fit on."""
        qs = question_set(questions).qs
        if not qs:
            return []
        max_len, head_max_len = self._row_limits(max_len, head_max_len)
        _, rows = self._rows(render_state(state), keeps_tail(state), list(qs), max_len, head_max_len)
        logits, _ = self._forward_rows(rows, tokenizer_view(self.tok).pad_id)
        return [z[:q.k] for q, z in zip(qs, logits)]

    def _row_limits(self, max_len: int | None, head_max_len: int | None) -> tuple[int, int]:
        """(max_len, head_max_len) of a call: the caller's, else the checkpoint config's; checked."""
        cfg = self.cfg
        max_len = positive_int(max_len if max_len is not None else config_max_len(cfg), "max_len")
        head_max_len = positive_int(head_max_len if head_max_len is not None else config_head_max_len(cfg),
                                    "head_max_len")
        limit = self._max_positions()
        if limit is not None and max_len > limit:
            raise ValueError(f"max_len={max_len} exceeds the encoder's max_position_embeddings={limit}; "
                             f"use max_len <= {limit}")
        return max_len, head_max_len

    def _plans(self, qset: Any, lang: str | None) -> tuple[Calibration | None, Any]:
        """(calibration, DecodePlans) of a call; without a language, the last call's plans when they still apply."""
        if lang:
            cal = Calibration(self.temperature, self.temperature_by_options, self.lang_temperatures,
                              self.binning_map)
            return cal, qset.plans(cal, lang)
        return None, qset.plans_for(self.temperature, self.temperature_by_options, self.lang_temperatures,
                                    self.binning_map)

    def _rows(self, text: str, keep_tail: bool, qs: list[Question], max_len: int,
              head_max_len: int) -> tuple[int, list[Row]]:
        return self._rows_from_ids(encode(self.tok, scrub_mask(self.tok, text)), keep_tail, qs, max_len, head_max_len)

    def _rows_from_ids(self, state_ids: list[int], keep_tail: bool, qs: list[Question], max_len: int,
                       head_max_len: int, heads: list | None = None) -> tuple[int, list[Row]]:
        """(state tokens, one row per question); `heads` = the questions' heads when the caller has them."""
        tok = self.tok
        if heads is None:
            heads = [build_head(tok, q, head_max_len) for q in qs]
        return len(state_ids), rows_for(tuple(zip(qs, heads)), state_ids, keep_tail, max_len,
                                        tokenizer_view(tok).sep_id, head_max_len)

    def _result(self, qs: list[Question], encoded: tuple[int, list[Row]], logits: list, act: list,
                cal: Calibration, lang: str | None, min_confidence: Any, plans: list | None = None) -> dict:
        """One state's result; `plans` = the questions' DecodePlans when the caller has them."""
        state_tokens, rows = encoded
        if plans is None:
            plans = [DecodePlan(q, cal, lang) for q in qs]
        answers = {}
        for q, plan, z, a in zip(qs, plans, logits, act):
            answer = decode_planned(plan, z, a[0])
            if min_confidence is not None:
                apply_min_confidence(answer, min_confidence)
            answers[q.qid] = answer
        # the usage fields in one pass over the rows (dropped counts are >= 0: 0 when none was truncated)
        tokens = dropped = 0
        truncated = []
        collapsed = None
        for q, r in zip(qs, rows):
            tokens += len(r.ids)
            lost = r.state_tokens_dropped
            if lost > 0:
                truncated.append(q.qid)
                if lost > dropped:
                    dropped = lost
            head = r.head
            k = len(q.option_texts)  # (q.k)
            if head.tokens_per_option is not None or head.distinct < k:
                if collapsed is None:
                    collapsed = {}
                collapsed[q.qid] = {"total": k, "distinct": head.distinct,
                                    "tokens_per_option": head.tokens_per_option}
        usage = {"input_tokens": tokens, "output_tokens": 0, "state_tokens": state_tokens,
                 "state_tokens_dropped": dropped, "truncated": dropped > 0, "truncated_questions": truncated}
        if collapsed is not None:
            usage["options"] = collapsed
        return {"model": self.MODEL_NAME, "answers": answers, "usage": usage}

    # ---- calibration ----------------------------------------------------------------------------

    def _setup_calibration(self, lang_temperatures: Any, calibration: str | None, **prefix: str) -> None:
        """Temperatures from the checkpoint config (clamped), per-language tables, then a calibration file."""
        self.temperature_raw = self.cfg.get("temperature", [1.0, 1.0, 1.0])
        self.temperature_by_options_raw = self.cfg.get("temperature_by_options", {})
        self.temperature, self.temperature_by_options = clamp_temperatures(
            self.temperature_raw, self.temperature_by_options_raw, **prefix)
        self.binning_map = None
        self.lang_temperatures = resolve_lang_temperatures(lang_temperatures, self.temperature, **prefix,
                                                           base_map=self.temperature_by_options)
        if calibration is not None:
            self.load_calibration(calibration)

    def fit_temperatures(self, records: Any, compute_ece: bool = False, seed: int = 0) -> dict:
        """Fit temperatures on held-out records `(qtype, logits, target, k)` (laya.calibrate, spec §7.3)
        and install them on this agent (clamped; one RuntimeWarning lists any replaced entry).

        Returns `laya.calibrate.fit_temperature_map`'s report: {"temperature", "temperature_by_options",
        "n_by_bucket", "temperature_clamped", "report"? (with compute_ece)}."""
        from .calibrate import fit_temperature_map

        records = _check_records(records)
        fitted = fit_temperature_map(records, compute_ece=compute_ece, seed=seed)
        raw, raw_map = list(fitted["temperature"]), dict(fitted["temperature_by_options"])
        self.temperature, self.temperature_by_options = clamp_temperatures(raw, raw_map, source="fitted calibration")
        self.temperature_raw, self.temperature_by_options_raw = raw, raw_map
        if self.binning_map:  # fitted under the old temperatures (§7.3: binning is fitted under given ones)
            self.binning_map = None
            warnings.warn("fit_temperatures: the existing binning_map was fitted under the previous temperatures "
                          "and has been cleared; refit it with fit_binning(records)", RuntimeWarning, stacklevel=2)
        return fitted

    def fit_binning(self, records: Any, min_bucket_n: int = 200) -> dict:
        """Fit histogram binning under the agent's current temperatures and install it as `binning_map`."""
        from .calibrate import fit_binning_map

        records = _check_records(records)
        self.binning_map = fit_binning_map(records, self.temperature, self.temperature_by_options,
                                           min_bucket_n=min_bucket_n)
        return self.binning_map

    def load_calibration(self, path: str) -> None:
        apply_calibration_payload(self, read_calibration_json(path))

    def save_calibration(self, path: str) -> None:
        write_calibration(path, calibration_payload_for(self))

