"""Full-cluster scale (`fabricsim reproduce scale`): the flow model against the packet model, then the papers'
largest experiments in the flow model.

Calibration ("flow mode vs packet mode" in docs/EXPERIMENTS.md): each case
of scenarios/scale/calibration/ (a permutation, a ring and a tree
all-reduce, an all-to-all) runs in both models under each design (the RoCEv2
baseline with ECMP, PFC and DCQCN; MRC on four planes with SRv6 and
trimming; Spectrum-X on two planes with adaptive routing and its NICs),
pristine and with one ToR uplink down from 100 us, on a 128-NIC two-tier
Clos (32 NICs in the quick version). A row gives the flow model's CCT (or
FCT p50 and p99) over the packet model's; collectives of 16 MB are
bandwidth-bound, and the target for them is within 5%.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..results import Results
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


def _calibration_runs() -> tuple[Run, ...]:
    runs = []
    for case in _CASES:
        for design, settings in _DESIGNS.items():
            for failed in (False, True):
                for mode in ("packet", "flow"):
                    full = {**settings, "mode": mode, **({"faults": _fault(8)} if failed else {})}
                    quick = {"topology.radix": 8, **({"faults": _fault(4)} if failed else {})}
                    if case != "permutation":
                        quick["jobs.0.ranks"] = 32
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


def _times(results: Results) -> tuple[float, float] | None:
    """The case's time in seconds as (p50, p99): a collective's CCT twice, or the flows' FCT percentiles."""
    if results.summary.get("jobs"):
        cct = results.collectives["cct_s"].drop_nulls()
        return (float(cct.max()), float(cct.max())) if len(cct) else None
    p50, p99 = results.summary.get("fct_p50_us"), results.summary.get("fct_p99_us")
    return (p50 * 1e-6, p99 * 1e-6) if p50 is not None and p99 is not None else None


def _calibration_analysis(exp: Experiment, outcomes: Mapping[str, Outcome], quick: bool) -> list[Row]:
    rows = []
    for case in _CASES:
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


EXPERIMENTS = (
    Experiment(
        key="calibration",
        figure="flow vs packet",
        title="Flow mode vs packet mode: CCT and FCT ratios on the same scenarios",
        runs=_calibration_runs(),
        analyse=_calibration_analysis,
        note="both models on the same files; the ratio's reason where it is off is in docs/EXPERIMENTS.md",
    ),
)
