"""Full-cluster scale (`fabricsim reproduce scale`): the flow model against the packet model, then the papers'
largest experiments in the flow model.

Calibration ("flow mode vs packet mode" in docs/EXPERIMENTS.md): each case
of scenarios/scale/calibration/ (a permutation, a ring and a tree
all-reduce, an all-to-all) runs in both models under each design (the RoCEv2
baseline with ECMP, PFC and DCQCN; MRC on four planes with SRv6 and
trimming; Spectrum-X on two planes with adaptive routing and its NICs),
pristine and with one ToR uplink down from 100 us, on a 128-NIC two-tier
Clos (32 NICs in the quick version), and again at 1,024 NICs on a
three-tier Clos (128 in the quick version; no all-to-all). A row gives the
flow model's CCT (or FCT p50 and p99) over the packet model's; the target
for collectives is within 5%.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..results import Results
from .analysis import judged_over_sizes
from .framework import CONTRADICTS, Experiment, Outcome, Row, Run

__all__ = ["EXPERIMENTS"]

# Each design's settings over the baseline of fragments/fabric.yaml.
_DESIGNS: dict[str, dict[str, Any]] = {
    "ecmp": {},
    "mrc": {
        "topology.planes": 4,
        "switch.forwarding": "srv6",
        "switch.pfc.enabled": False,
        "switch.trimming.enabled": True,
        "switch.ecn.last_hop": False,
        "transport": {"kind": "mrc"},
    },
    "spx": {"topology.planes": 2, "switch.forwarding": "adaptive", "transport": {"kind": "spx"}},
}
_CASES = ("permutation", "ring", "tree", "all_to_all")
# One uplink of the first ToR (of plane 0) fails 100 us in and stays down: the
# first port above the ToR's NICs, 8 at radix 16 and 4 at radix 8.
_FAULT_AT = "100us"


def _fault(port: int) -> list[dict[str, Any]]:
    return [{"kind": "link_down", "at": _FAULT_AT, "port": f"t0.p0.0:{port}"}]


def _calibration_runs(
    cases: tuple[str, ...] = _CASES, size: Mapping[str, Any] | None = None, quick_size: Mapping[str, Any] | None = None
) -> tuple[Run, ...]:
    """Every case under every design, pristine and failed, in both models.

    `size` and `quick_size` change the fabric and the ranks from the files'
    (128 NICs; quick: radix 8, 32 NICs); the failed uplink is the ToR's first.
    """
    size = size or {}
    quick_size = quick_size or {"topology.radix": 8, "jobs.0.ranks": 32}
    first_up = {"full": size.get("topology.radix", 16) // 2, "quick": quick_size["topology.radix"] // 2}
    runs = []
    for case in cases:
        for design, settings in _DESIGNS.items():
            for failed in (False, True):
                for mode in ("packet", "flow"):
                    sized = {k: v for k, v in size.items() if case != "permutation" or k != "jobs.0.ranks"}
                    full = {
                        **settings,
                        **sized,
                        "mode": mode,
                        **({"faults": _fault(first_up["full"])} if failed else {}),
                    }
                    quick = {k: v for k, v in quick_size.items() if case != "permutation" or k != "jobs.0.ranks"}
                    quick |= {"faults": _fault(first_up["quick"])} if failed else {}
                    key = f"{case}_{design}{'_failed' if failed else ''}_{mode}"
                    runs.append(
                        Run(
                            key,
                            f"{case}, {design}, {mode}",
                            f"scale/calibration/{case}.yaml",
                            quick=quick,
                            overrides=full,
                        )
                    )
    return tuple(runs)


# The calibration at 1,024 NICs: a three-tier Clos of radix 16 (quick: radix
# 8, 128 NICs). The all-to-all is left out: 1,024 ranks are a million QPs in
# the packet model.
_CASES_1K = ("permutation", "ring", "tree")
_SIZE_1K = {"topology.tiers": 3, "topology.radix": 16, "jobs.0.ranks": 1024}
_QUICK_1K = {"topology.tiers": 3, "topology.radix": 8, "jobs.0.ranks": 128}


def _times(results: Results) -> tuple[float, float] | None:
    """The case's time in seconds as (p50, p99): a collective's CCT twice, or the flows' FCT percentiles."""
    if results.summary.get("jobs"):
        cct = results.collectives["cct_s"].drop_nulls()
        return (float(cct.max()), float(cct.max())) if len(cct) else None
    p50, p99 = results.summary.get("fct_p50_us"), results.summary.get("fct_p99_us")
    return (p50 * 1e-6, p99 * 1e-6) if p50 is not None and p99 is not None else None


def _calibration_analysis(
    exp: Experiment, outcomes: Mapping[str, Outcome], quick: bool, cases: tuple[str, ...] = _CASES
) -> list[Row]:
    rows = []
    for case in cases:
        for design in _DESIGNS:
            for failed in (False, True):
                stem = f"{case}_{design}{'_failed' if failed else ''}"
                packet, flow = outcomes.get(f"{stem}_packet"), outcomes.get(f"{stem}_flow")
                if not isinstance(packet, Results) or not isinstance(flow, Results):
                    continue
                a, b = _times(packet), _times(flow)
                label = f"{case}, {design}{', uplink down' if failed else ''}"
                collective = case != "permutation"
                # 16 MB collectives are bandwidth-bound: the target is 5%. Flows get no claim (their tail is
                # set by congestion control, which the flow model leaves out).
                expect = (0.95, 1.05) if collective else None
                if a is None or b is None:
                    which = " and ".join(m for m, t in (("packet", a), ("flow", b)) if t is None)
                    metrics = [f"{label}: CCT flow / packet"] if collective else [f"{label}: FCT p50 flow / packet"]
                    for metric in metrics:
                        rows.append(Row(metric, "", f"{which} did not complete", verdict=CONTRADICTS))
                    continue
                if collective:
                    rows.append(
                        Row(
                            f"{label}: CCT flow / packet",
                            "within 5% (target)",
                            f"{b[0] * 1e3:.3f} / {a[0] * 1e3:.3f} ms",
                            b[0] / a[0],
                            expect,
                        )
                    )
                else:
                    for i, q in enumerate(("p50", "p99")):
                        rows.append(
                            Row(
                                f"{label}: FCT {q} flow / packet",
                                "(for information)",
                                f"{b[i] * 1e6:.0f} / {a[i] * 1e6:.0f} us",
                                b[i] / a[i],
                            )
                        )
    return rows


def _p99_cct(results: Results) -> float | None:
    """The 99th percentile of the collectives' CCT, in seconds (None when any did not complete)."""
    cct = results.collectives["cct_s"]
    if cct.null_count() or not len(cct):
        return None
    return float(cct.quantile(0.99, "higher"))


def _p99_normalized(results: Results) -> float | None:
    """The 99th percentile of each collective's CCT over its ideal (Fig. 14a's normalization)."""
    c = results.collectives
    if c["cct_s"].null_count() or not len(c):
        return None
    return float((c["cct_s"] / c["ideal_s"]).quantile(0.99, "higher"))


# ---- MRC's 131,072-GPU fabric ----

_ONE_PERCENT_DOWN = [{"kind": "random_links_down", "at": "0us", "fraction": 0.01}]
# The quick version: radix 64, eight planes of 2,048 NICs (a 512-way all-to-all).
_MRC_QUICK = {"topology.radix": 64, "jobs.0.ranks": 2048}
_A2A_QUICK = {"topology.radix": 64, "jobs.0.ranks": 512}
# The all-to-all's placements: its ranks on 64 full racks, or spread over all 512.
_A2A_PLACEMENTS = {"contiguous": {}, "random": {"jobs.0.placement": "random"}}


def _mrc_runs() -> tuple[Run, ...]:
    ring = "scale/cluster/mrc_ring.yaml"
    a2a = "scale/cluster/mrc_all_to_all.yaml"
    runs = [
        Run("ring_pristine", "ring all-reduce, pristine", ring, quick=_MRC_QUICK),
        Run(
            "ring_failed",
            "ring all-reduce, 1% of T0-T1 links down",
            ring,
            quick=_MRC_QUICK,
            overrides={"faults": _ONE_PERCENT_DOWN},
        ),
    ]
    for placement, where in _A2A_PLACEMENTS.items():
        runs.append(
            Run(f"a2a_{placement}_pristine", f"all-to-all, {placement}", a2a, quick=_A2A_QUICK, overrides=where)
        )
        runs.append(
            Run(
                f"a2a_{placement}_failed",
                f"all-to-all, {placement}, 1% of T0-T1 links down",
                a2a,
                quick=_A2A_QUICK,
                overrides={**where, "faults": _ONE_PERCENT_DOWN},
            )
        )
    return tuple(runs)


# How much slower 1% of T0-T1 links down may leave the all-to-all (quick,
# full). MRC stops using them, so it loses only where its traffic has no
# slack. On full racks a ToR's U uplinks carry (n - U) / (n - 1) of its U
# NICs' traffic to the n - 1 peers: 0.984 of their capacity at U = 256,
# n = 16,384, so a ToR with k of them down binds once k >= 4, at
# 0.984 x 256 / (256 - k). The job's 512 ToRs draw about Binomial(256,
# 0.01) failed uplinks each; their maximum is 8 to 11 (95%): at most 1.029.
# Quick (U = 32, n = 512, 128 ToRs): 0.939, binding at k >= 2; the maximum
# is at most 4 (97%): 1.074. Spread over every rack, a ToR carries a
# quarter (quick) or an eighth of that: none binds.
_A2A_BOUNDS = {"contiguous": ((1.0, 1.075), (1.0, 1.029)), "random": ((0.999, 1.0102), (0.999, 1.0102))}


def _mrc_analysis(exp: Experiment, outcomes: Mapping[str, Outcome], quick: bool) -> list[Row]:
    nics, ranks = ("2,048", "512") if quick else ("131,072", "16,384")
    rows = _pristine_and_failed(
        outcomes,
        "ring",
        f"{nics}-rank ring all-reduce of 1 GiB",
        "MRC stops using failed links (s4.4, Fig. 13): at most the 1% of capacity lost",
        (0.999, 1.0102),
    )
    for placement in _A2A_PLACEMENTS:
        rows += _pristine_and_failed(
            outcomes,
            f"a2a_{placement}",
            f"{ranks}-way all-to-all of 1 GiB per rank, {placement}",
            "MRC stops using failed links (s4.4, Fig. 13): slower only where a ToR loses more than its slack",
            _A2A_BOUNDS[placement][0 if quick else 1],
        )
    return rows


def _pristine_and_failed(
    outcomes: Mapping[str, Outcome], key: str, what: str, claim: str, bound: tuple[float, float]
) -> list[Row]:
    """Rows of one collective run pristine (`<key>_pristine`) and with links down (`<key>_failed`): its CCT, the
    CCT over its ideal, and the failed run's CCT over the pristine one, judged against `bound`."""
    pristine, failed = outcomes.get(f"{key}_pristine"), outcomes.get(f"{key}_failed")
    if not (isinstance(pristine, Results) and isinstance(failed, Results)):
        return [Row(what, "", "did not run", verdict=CONTRADICTS)]
    a, b = _p99_cct(pristine), _p99_cct(failed)
    if a is None or b is None:
        return [Row(what, "", "did not complete", verdict=CONTRADICTS)]
    ideal = float(pristine.collectives["ideal_s"].max())
    return [
        Row(f"{what}: CCT pristine", "(no number)", f"{a * 1e3:.2f} ms", a),
        Row("  its CCT over the ideal alone", "(no number)", f"{a / ideal:.3f}", a / ideal),
        Row(
            "  CCT with 1% of T0-T1 links down over pristine",
            claim,
            f"{b * 1e3:.2f} / {a * 1e3:.2f} ms",
            b / a,
            bound,
        ),
    ]


# ---- Spectrum-X s6.6, Fig. 14a: fabric flaps on a 64K-node single plane ----

# 10 flaps a minute cluster-wide, each 10 s: on average 10/60 x 10 links down at once.
_FABRIC_FLAPS_MEAN = 10 / 60 * 10
_FIG14A_COUNTS = tuple(range(11))
_FIG14A_QUICK_COUNTS = (0, 1, 3, 10)
# The collectives' sizes (the paper's curves are over sizes it does not list): one latency-bound, two
# bandwidth-bound.
_FIG14A_SIZES = ("16MB", "256MB", "1GB")
# Radix 64, 2,048 nodes: 4 all-gather and 4 reduce-scatter rings of 256.
_FIG14A_QUICK = {"topology.radix": 64, "topology.nics": 2048, "jobs.0.ranks": 1024, "jobs.1.ranks": 1024}


def _flapped(count: int) -> dict[str, Any]:
    if count == 0:
        return {}
    return {"faults": [{"kind": "random_links_down", "at": "0us", "count": count, "control_plane": False}]}


def _fig14a_runs() -> tuple[Run, ...]:
    return tuple(
        Run(
            f"{size}_down_{k}",
            f"{size}, {k} fabric links down",
            "scale/cluster/spx_fabric_flaps.yaml",
            quick=_FIG14A_QUICK,
            overrides={**_flapped(k), **_sized(size)},
        )
        for size in _FIG14A_SIZES
        for k in _FIG14A_COUNTS
    )


def _sized(size: str) -> dict[str, Any]:
    return {f"jobs.{j}.phases.0.collective.bytes": size for j in (0, 1)}


def _poisson(k: int, mean: float) -> float:
    return math.exp(-mean) * mean**k / math.factorial(k)


def _fig14a_analysis(exp: Experiment, outcomes: Mapping[str, Outcome], quick: bool) -> list[Row]:
    counts = _FIG14A_QUICK_COUNTS if quick else _FIG14A_COUNTS
    rows: list[Row] = []
    impact: dict[str, float] = {}
    for size in _FIG14A_SIZES:
        p99: dict[int, float] = {}
        for k in counts:
            out = outcomes.get(f"{size}_down_{k}")
            value = _p99_normalized(out) if isinstance(out, Results) else None
            if value is None:
                return [Row(f"{size}, {k} links down", "", "not every collective completed", verdict=CONTRADICTS)]
            p99[k] = value
        text = ", ".join(f"{k}: {v:.4f}" for k, v in p99.items())
        rows.append(Row(f"P99 CCT / ideal @ {size}, by links down", "", text, p99[0]))
        # The paper's weighting: each count of concurrent failures by its Poisson probability (renormalized
        # over the counts run; 0 to 10 hold all but 1e-6 of the mass).
        weights = {k: _poisson(k, _FABRIC_FLAPS_MEAN) for k in counts}
        impact[size] = sum(weights[k] * p99[k] for k in counts) / sum(weights.values()) / p99[0]
    rows.append(
        judged_over_sizes(
            "expected P99 CCT / ideal with flaps, over pristine",
            "curves overlap: no visible impact",
            impact,
            (0.99, 1.01),
            digits=5,
        )
    )
    return rows


# ---- Spectrum-X s6.6, Fig. 14b: host-link flaps on 256K GPUs, four planes ----

# Fig. 14a's per-link MTBF: 10 flaps a minute over the 65,536 fabric links of the 64K-node plane.
_LINK_MTBF_S = 65536 * 6.0
_CONVERGENCE_MS = (1, 10, 30, 100, 300)
_FIG14B_PAPER = {1: 1.20, 10: 1.20, 30: None, 100: 1.53, 300: 3.60}
# Radix 64 on four planes, 2,048 GPUs (8 rings), with a per-link MTBF that keeps 3 host links down on
# average (at 256K, 27 of 1,024 rings are hit, so the P99 is a hit ring; of 8 rings the P99 is the worst).
_FIG14B_QUICK = {"topology.radix": 64, "topology.nics": 2048, "jobs.0.ranks": 2048}
_QUICK_LINK_MTBF_S = 2048 * 4 * 10 / 3


def _host_flaps(convergence_ms: int, mtbf_s: float, stall: bool) -> dict[str, Any]:
    return {
        "flow_mode.partial_loss": "stall" if stall else "deliver",
        "faults": [
            {"kind": "random_flaps", "mtbf": f"{mtbf_s:.0f}s", "duration": "10s", "until": "10s", "hosts_only": True}
        ],
        "nic.remap_delay": f"{convergence_ms}ms",
        "flow_mode.detection": f"{convergence_ms}ms",
    }


# Traffic sprayed into the failed plane until the NIC converges is lost. The flow model's default lets a
# ring move at the share that arrives (`deliver`), which makes the convergence time all but irrelevant; the
# packet model's Spectrum-X NIC moves nothing useful until its PLB drops the plane (Fig. 12), which
# `partial_loss: stall` carries over. `deliver` runs at the longest convergence time to show the difference.
_DELIVER_MS = (300,)


def _fig14b_runs() -> tuple[Run, ...]:
    runs = [Run("pristine", "pristine", "scale/cluster/spx_host_flaps.yaml", quick=_FIG14B_QUICK)]
    for stall, times in ((True, _CONVERGENCE_MS), (False, _DELIVER_MS)):
        how = "stall" if stall else "deliver"
        for ms in times:
            runs.append(
                Run(
                    f"converge_{ms}ms_{how}",
                    f"host-link flaps, NIC convergence {ms} ms, partial loss: {how}",
                    "scale/cluster/spx_host_flaps.yaml",
                    quick={**_FIG14B_QUICK, **_host_flaps(ms, _QUICK_LINK_MTBF_S, stall)},
                    overrides=_host_flaps(ms, _LINK_MTBF_S, stall),
                )
            )
    return tuple(runs)


def _fig14b_analysis(exp: Experiment, outcomes: Mapping[str, Outcome], quick: bool) -> list[Row]:
    pristine = outcomes.get("pristine")
    base = _p99_cct(pristine) if isinstance(pristine, Results) else None
    if base is None:
        return [Row("pristine", "", "not every collective completed", verdict=CONTRADICTS)]
    rows = [Row("P99 CCT pristine", "", f"{base * 1e3:.2f} ms", base)]
    for stall, times in ((True, _CONVERGENCE_MS), (False, _DELIVER_MS)):
        how = "stall" if stall else "deliver"
        rows.extend(_fig14b_rows(outcomes, base, how, times))
    return rows


def _fig14b_rows(outcomes: Mapping[str, Outcome], base: float, how: str, times: tuple[int, ...]) -> list[Row]:
    rows = []
    for ms in times:
        out = outcomes.get(f"converge_{ms}ms_{how}")
        value = _p99_cct(out) if isinstance(out, Results) else None
        if value is None:
            rows.append(Row(f"convergence {ms} ms", "", "not every collective completed", verdict=CONTRADICTS))
            continue
        paper = _FIG14B_PAPER[ms]
        expect = None if paper is None else (1 + (paper - 1) * 0.7, 1 + (paper - 1) * 1.3)
        down = int(out.summary.get("qp_errors", 0))
        worst = float(out.collectives["cct_s"].max()) / base
        rows.append(
            Row(
                f"P99 CCT over pristine, convergence {ms} ms, partial loss: {how}",
                "(between the two)" if paper is None else f"{paper:.2f} (+{(paper - 1) * 100:.0f}%)",
                f"{value / base:.3f} (worst {worst:.2f})" + (f" ({down} QP errors)" if down else ""),
                value / base,
                expect,
            )
        )
    return rows


EXPERIMENTS = (
    Experiment(
        key="calibration",
        figure="flow vs packet",
        title="Flow mode vs packet mode: CCT and FCT ratios on the same scenarios",
        runs=_calibration_runs(),
        analyse=_calibration_analysis,
        note="both models on the same files; the ratio's reason where it is off is in docs/EXPERIMENTS.md",
    ),
    Experiment(
        key="calibration_1k",
        figure="flow vs packet",
        title="Flow mode vs packet mode at 1,024 NICs (three tiers): CCT and FCT ratios",
        runs=_calibration_runs(_CASES_1K, _SIZE_1K, _QUICK_1K),
        analyse=lambda exp, outcomes, quick: _calibration_analysis(exp, outcomes, quick, _CASES_1K),
        note="as the calibration, on a three-tier Clos of radix 16; quick: radix 8, 128 NICs; no all-to-all; "
        "one seed (a seed's 36 runs take about 25 minutes)",
        seeds=(1,),
    ),
    Experiment(
        key="mrc_cluster",
        figure="MRC s2",
        title="MRC's 131,072-GPU fabric: a ring all-reduce of every GPU and a 16,384-way all-to-all, pristine and "
        "with 1% of T0-T1 links down",
        runs=_mrc_runs(),
        analyse=_mrc_analysis,
        note="flow model, rings and all-to-alls run whole; quick: 2,048 GPUs, a 512-way all-to-all",
    ),
    Experiment(
        key="spx_fig14a",
        figure="Spectrum-X Fig. 14a",
        title="64K nodes, fabric flaps unseen by the control plane: P99 CCT / ideal, weighted by Poisson",
        runs=_fig14a_runs(),
        analyse=_fig14a_analysis,
        note="flow model, rings run whole; collectives of 16 MB, 256 MB and 1 GB; quick: 2,048 nodes and 0, 1, 3, "
        "10 links down",
    ),
    Experiment(
        key="spx_fig14b",
        figure="Spectrum-X Fig. 14b",
        title="256K GPUs on 4 planes, host-link flaps: P99 CCT over pristine against NIC convergence time",
        runs=_fig14b_runs(),
        analyse=_fig14b_analysis,
        note="flow model, rings run whole; the flap process sampled at the collectives' start; quick: 2,048 GPUs",
    ),
    Experiment(
        key="hpn_pod",
        figure="HPN s6.1",
        title="A 15,360-GPU pod's data-parallel all-reduce: typical Clos vs dual-plane tier 2",
        runs=(
            Run(
                "dual_plane",
                "dual-plane",
                "scale/cluster/hpn_pod_dp.yaml",
            ),
            Run(
                "typical_clos",
                "typical Clos",
                "scale/cluster/hpn_pod_dp.yaml",
                overrides={"topology.planes": 1, "topology.ports": [{"down": 128, "up": 60}, {"down": 240}]},
            ),
        ),
        analyse=lambda exp, outcomes, quick: _hpn_analysis(outcomes),
        note="flow model, rings run whole, ECMP with one hash for every switch",
    ),
)


def _hpn_analysis(outcomes: Mapping[str, Outcome]) -> list[Row]:
    dual, plain = outcomes.get("dual_plane"), outcomes.get("typical_clos")
    if not isinstance(dual, Results) or not isinstance(plain, Results):
        return [Row("pod all-reduce", "", "did not run", verdict=CONTRADICTS)]
    a, b = _p99_cct(plain), _p99_cct(dual)
    if a is None or b is None:
        return [Row("pod all-reduce", "", "not every collective completed", verdict=CONTRADICTS)]
    return [
        Row("P99 CCT, typical Clos", "", f"{a * 1e3:.2f} ms", a),
        Row("P99 CCT, dual-plane", "", f"{b * 1e3:.2f} ms", b),
        Row(
            "dual-plane over typical Clos",
            "dual-plane removes the aggregation layer's hash polarization (s6.1): no slower",
            f"{b / a:.3f}",
            b / a,
            (None, 1.0),
        ),
    ]
