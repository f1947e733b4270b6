"""The SHIFT paper (shift-rdma-failover.txt): the experiment of each reproduced figure and its analysis.

Fig 8 runs ib_write_bw-, ib_send_bw- and ib_read_bw-like traffic between two hosts of
two 100G NICs (the default and the backup) while one side's default NIC
goes down and comes back, with and without SHIFT, in time scaled by 1/16
(RoCE's timeout 2^10 x 4.096 us instead of perftest's 2^14); the scenario
files under scenarios/shift/ say how. SHIFT's fallback time is an input
(`nic.shift.fallback_time`, the paper's 2.3 ms), so s5.1.1's number is not
a result here. Fig 10 runs a scaled training job through a fatal failure
of one host's default NIC. Table 1 runs ib_write_lat-like writes of 1-16
B with and without SHIFT and with 500 idle QPs; our NICs model no QP
context cache, so the last cannot differ.
"""

from __future__ import annotations

from collections.abc import Mapping
from statistics import mean
from typing import Any

import polars as pl

from ..results import Results
from .analysis import host_throughput, window_mean
from .framework import CONTRADICTS, MATCHES, Experiment, Outcome, Row, Run

__all__ = ["EXPERIMENTS"]

# fragments/fig8_write.yaml: the default NIC is down from 20 ms to 80 ms; RoCE gives up 34 ms after the loss and
# SHIFT falls back 2.3 ms later.
_BEFORE = (5.0, 20.0)
_ON_BACKUP = (60.0, 80.0)
_AFTER = (95.0, 125.0)
_DEFAULTS, _BACKUPS = ("nic0", "nic2"), ("nic1", "nic3")


def _goodput(results: Results, nics: tuple[str, ...], window: tuple[float, float]) -> float:
    """The NICs' mean receive goodput over a window, Gb/s (0 when nothing was sampled)."""
    return window_mean(host_throughput(results, nics), *window) or 0.0


# The panels of Fig 8 run here: (key, the perftest tool).
_FIG8_VERBS = (("write", "ib_write_bw"), ("send", "ib_send_bw"), ("read", "ib_read_bw"))


def _fig8_analysis(exp: Experiment, outcomes: Mapping[str, Outcome], quick: bool) -> list[Row]:
    runs = {k: o for k, o in outcomes.items() if isinstance(o, Results)}
    rows: list[Row] = []
    for (verb, tool), side in ((v, s) for v in _FIG8_VERBS for s in ("local", "remote")):
        standard, shift = runs.get(f"{verb}_{side}_standard"), runs.get(f"{verb}_{side}_shift")
        if standard is None or shift is None:
            continue
        (job,) = standard.summary["jobs"].values()
        after = _goodput(standard, _DEFAULTS + _BACKUPS, (_ON_BACKUP[0], _AFTER[1]))
        ended = bool(job["failed"]) and after < 1.0
        rows.append(
            Row(
                f"{tool}, standard RDMA, {side} default NIC down: the transfer",
                "terminates",
                f"{'fails' if job['failed'] else 'goes on'}; {after:.0f} Gb/s from 60 ms on",
                after,
                verdict=MATCHES if ended else CONTRADICTS,
                reason="its QPs fail once the retries run out (34 ms) and nothing is sent after",
            )
        )
        before = _goodput(shift, _DEFAULTS, _BEFORE)
        backup = _goodput(shift, _BACKUPS, _ON_BACKUP)
        back, left = _goodput(shift, _DEFAULTS, _AFTER), _goodput(shift, _BACKUPS, _AFTER)
        moved = before > 0 and backup >= 0.8 * before
        returned = before > 0 and back >= 0.8 * before and left < 0.05 * before
        rows.append(
            Row(
                f"{tool}, SHIFT, {side} default NIC down: throughput on the backup NICs over the default's before",
                "continues on the backup",
                f"{backup:.0f} over {before:.0f} Gb/s",
                backup / before if before else None,
                (0.8, None),
                verdict=MATCHES if moved else CONTRADICTS,
                reason="read as at least 80% of the rate before the failure",
            )
        )
        rows.append(
            Row(
                f"{tool}, SHIFT, {side} default NIC back: throughput on the default NICs, and left on the backups",
                "returns to the default NIC on recovery",
                f"{back:.0f} Gb/s on the default, {left:.1f} on the backup (95-125 ms)",
                back / before if before else None,
                verdict=MATCHES if returned else CONTRADICTS,
                reason="read as at least 80% of the rate before on the default NICs and under 5% on the backups",
            )
        )
        if verb == "send":
            counts = shift.summary["shift"]
            rows.append(
                Row(
                    f"{tool}, SHIFT, {side} default NIC down: SENDs reposted that had already taken a RECV",
                    "can happen when an ACK is lost (s4.3): an RNR error, or a RECV meant for a later SEND",
                    f"{counts['resent_sends']} over {counts['fallbacks']} fallbacks; "
                    f"{shift.summary['rnr_naks']} RNR NAKs",
                    float(counts["resent_sends"]),
                    reason="for information: the receiver keeps 512 RECVs posted, so the repost takes a spare one "
                    "and draws no RNR NAK",
                )
            )
    measured = [
        r.summary["shift"]["fallback_time_mean_s"]
        for k, r in runs.items()
        if k.endswith("_shift") and r.summary["shift"]["fallback_time_mean_s"] is not None
    ]
    if measured:
        rows.append(
            Row(
                "fallback time, error completion to traffic on the backup (mean over the SHIFT runs)",
                "2.30 +- 0.34 ms (s5.1.1)",
                f"{mean(measured) * 1e3:.3f} ms",
                mean(measured) * 1e3,
                reason="not a result: the host's steps (polling, rewinding, resetting) are one delay set to the "
                "paper's mean, nic.shift.fallback_time = 2.3 ms; the notification of the receiver on the backup "
                "adds its trip",
            )
        )
    return rows


_FIG10_SHIFT = (
    ("shift_idle", "idle backup"),
    ("shift_busy", "busy backup"),
    ("shift_flap", "a 60 ms flap, busy backup"),
)


def _job(results: Results) -> Mapping[str, Any]:
    return results.summary["jobs"]["gpt2"]


def _median_step_ms(results: Results, after_s: float = 0.0) -> float | None:
    steps = results.steps.filter(pl.col("start_s") >= after_s)
    if steps.is_empty():
        return None
    return float(((steps["end_s"] - steps["start_s"]) * 1e3).median())  # type: ignore[arg-type]


def _fig10_analysis(exp: Experiment, outcomes: Mapping[str, Outcome], quick: bool) -> list[Row]:
    runs = {k: o for k, o in outcomes.items() if isinstance(o, Results)}
    if len(runs) < len(exp.runs):
        return []
    jct = {k: float(_job(r)["jct_s"]) * 1e3 for k, r in runs.items() if _job(r)["jct_s"] is not None}
    base, restart = jct.get("no_failure"), runs["restart"]
    rows = [
        Row(
            "checkpoint-restart without SHIFT: the job after the RNIC fails",
            "terminates and reruns from the last checkpoint, losing the progress since",
            f"{_job(restart)['restarts']} restart, done at {jct.get('restart', float('nan')):.0f} ms "
            f"(no failure: {base:.0f} ms)",
            float(_job(restart)["restarts"]),
            (1.0, None),
        )
    ]
    for key, label in _FIG10_SHIFT:
        job = _job(runs[key])
        # With a busy backup the job stops at its next checkpoint and restarts from it, as the paper's does.
        stops = key == "shift_busy"
        goes_on = job["restarts"] == int(stops) and job["completed"]
        rows.append(
            Row(
                f"SHIFT, {label}: the job goes on"
                + (" to its next checkpoint, restarts from it" if stops else "")
                + ", and ends before the checkpoint-restart baseline",
                "no progress lost" + ("; terminates after the next checkpoint, resumes from it" if stops else ""),
                f"restarts {job['restarts']}, done at {jct.get(key, float('nan')):.0f} ms against "
                f"{jct.get('restart', float('nan')):.0f} ms",
                jct.get(key),
                verdict=MATCHES if goes_on and jct.get(key, 1e9) < jct.get("restart", 0.0) else CONTRADICTS,
                reason="the stall before the fallback is RoCE's retry window (34 ms here), which SHIFT waits out",
            )
        )
    # After the fallback: the failure at 167 ms, the 34 ms retry window, 2.3 ms to fall back.
    idle_after, healthy = _median_step_ms(runs["shift_idle"], 0.205), _median_step_ms(runs["no_failure"])
    if idle_after and healthy:
        slower = idle_after / healthy - 1
        rows.append(
            Row(
                "SHIFT, idle backup: a step after the fallback against a step without failure",
                "no degradation after fallback",
                f"{slower:+.1%} ({idle_after:.2f} against {healthy:.2f} ms, medians)",
                slower,
                (None, 0.05),
                reason="read as within 5%",
            )
        )
    flap = runs["shift_flap"]
    cost = jct["shift_flap"] / base - 1 if base and "shift_flap" in jct else None
    rows.append(
        Row(
            "SHIFT, a 60 ms flap with a busy backup: traffic back on the default RNIC; the job's time over no failure",
            "switches back, nearly unaffected",
            f"recoveries {flap.summary['shift']['recoveries']}; {cost:+.1%}" if cost is not None else "unfinished",
            cost,
            (None, 0.10),
            reason="read as within 10%: the 34 ms retry window before the fallback is most of the cost, the busy "
            "backup the rest",
        )
    )
    return rows


# --- Table 1: write latency, standard RDMA, SHIFT, 500 idle QPs ----------------------------------------------------

_TABLE1_RUNS = (("standard", "standard RDMA"), ("shift", "SHIFT"), ("idle_qps", "standard, 500 idle QPs"))


def _latencies_us(results: Results) -> list[float]:
    """The latency of each measured write (the 1-16 B flows that completed), us, by size."""
    done = results.flows.filter(pl.col("end_s").is_not_null()).sort("bytes")
    return [float(v) * 1e6 for v in done["fct_s"]]


def _table1_analysis(exp: Experiment, outcomes: Mapping[str, Outcome], quick: bool) -> list[Row]:
    runs = {k: o for k, o in outcomes.items() if isinstance(o, Results)}
    if len(runs) < len(_TABLE1_RUNS):
        return []
    latency = {key: _latencies_us(runs[key]) for key, _ in _TABLE1_RUNS}
    base = latency["standard"]
    rows = [
        Row(
            f"{label}: write latency, 1 to 16 B",
            "2.68-2.71 us",
            f"{min(latency[key]):.3f}-{max(latency[key]):.3f} us",
            reason="for information: ours crosses 4 links of 1 us; the paper's testbed is not described",
        )
        for key, label in _TABLE1_RUNS
    ]
    shift = max(abs(a / b - 1) for a, b in zip(latency["shift"], base, strict=True))
    rows.append(
        Row(
            "SHIFT against standard RDMA: the largest latency difference over the sizes",
            "none (within 0.02 us, under 1%)",
            f"{shift:.2%}",
            shift,
            (0.0, 0.01),
            reason="read as within 1%; the backup QP stays off the wire and SHIFT does nothing on the data path "
            "until a failure, as the paper's SHIFTLib adds next to nothing to post_send",
        )
    )
    idle = max(abs(a / b - 1) for a, b in zip(latency["idle_qps"], base, strict=True))
    rows.append(
        Row(
            "500 idle QPs against none: the largest latency difference over the sizes",
            "none: idle QPs take no RNIC cache",
            f"{idle:.2%}",
            idle,
            reason="for information: our NICs model no QP context cache, so idle QPs cannot cost anything here; "
            "the paper's point (a cache that idle QPs do not fill) is outside the model",
        )
    )
    return rows


EXPERIMENTS: tuple[Experiment, ...] = (
    Experiment(
        key="fig8",
        figure="Fig 8",
        title="ib_write_bw, ib_send_bw, ib_read_bw through a default NIC failure and back: standard RDMA vs SHIFT",
        runs=tuple(
            Run(f"{verb}_{side}_{mode}", f"{tool}, {side} NIC down, {label}", f"shift/fig8_{verb}_{side}_{mode}.yaml")
            for verb, tool in _FIG8_VERBS
            for side in ("local", "remote")
            for mode, label in (("standard", "standard RDMA"), ("shift", "SHIFT"))
        ),
        analyse=_fig8_analysis,
        note="two hosts of two 100G NICs, 64 KB writes, SENDs or READs both ways, 128 outstanding (SENDs: 512 "
        "RECVs posted; READs: 16 asked for at a time); the default NIC of one side "
        "down from 20 to 80 ms; RoCE's retry window 34 ms (timeout 2^10, perftest's 2^14 scaled by 1/16); "
        "SHIFT falls back 2.3 ms after the error and probes every 10 ms",
    ),
    Experiment(
        key="fig10",
        figure="Fig 10",
        title="Training through a fatal RNIC failure: checkpoint-restart vs SHIFT (idle, busy backup), a flap",
        runs=tuple(
            Run(key, label, f"shift/fig10_{key}.yaml")
            for key, label in (("no_failure", "no failure"), ("restart", "checkpoint-restart"), *_FIG10_SHIFT)
        ),
        analyse=_fig10_analysis,
        note="two hosts of two 100G NICs, a 2-rank job of 160 steps (1 ms compute, 16 MB all-reduce), a checkpoint "
        "every 40 (an epoch), 50 ms to restart; the default NIC down at 167 ms (1.78 epochs): for good (idle backup), "
        "or 40 ms then restored (the baseline reruns; with a busy backup the job stops at its next checkpoint and "
        "resumes from it), or 60 ms (flap); the busy backup carries another job's writes",
    ),
    Experiment(
        key="table1",
        figure="Table 1",
        title="Write latency of 1-16 B: standard RDMA, SHIFT, and 500 idle QPs",
        runs=tuple(Run(key, label, f"shift/table1_{key}.yaml") for key, label in _TABLE1_RUNS),
        analyse=_table1_analysis,
        note="NIC 0 writes NIC 2 one message of 1, 2, 4, 8 and 16 B, 20 us apart, on Fig 8's two hosts; the idle QPs "
        "are a flow of 500 QPs that would start after the run ends",
    ),
)
