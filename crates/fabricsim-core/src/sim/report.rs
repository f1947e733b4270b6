//! Sampling time series during the run and building the output tables and
//! summary at its end.

use serde_json::json;

use super::jobs::Jobs;
use super::{Event, Simulation};
use crate::ids::{JobId, QpId, TransferId};
use crate::metrics::{percentile, Column, RunOutput, Series, StopReason, Table};
use crate::net::{PortId, DROP_CAUSES};
use crate::switch::Balancer;
use crate::topology::Topology;
use crate::transport::{QpStats, Transport};
use crate::units::Time;

/// Sampled time series in long format.
pub(super) struct Samples {
    series: Series,
    last_port_tx: Vec<u64>,
    last_host_rx: Vec<u64>,
    /// Per sampled host, per port: bytes sent at the last sample.
    last_plane_tx: Vec<Vec<u64>>,
    last_time: Time,
    /// When the next sample is due, while sampling goes on (a run on two
    /// threads ends a window there, `fabric_thread`).
    pub(super) next: Option<Time>,
}

impl Samples {
    pub(super) fn new(ports: usize, hosts: usize, first: Option<Time>) -> Samples {
        Samples {
            series: Series::default(),
            last_port_tx: vec![0; ports],
            last_host_rx: vec![0; hosts],
            last_plane_tx: vec![Vec::new(); hosts],
            last_time: Time::ZERO,
            next: first,
        }
    }

    fn push(&mut self, t: Time, entity: &str, metric: &str, value: f64) {
        self.series.push(t.as_secs_f64(), entity, metric, value);
    }
}

impl Simulation {
    pub(super) fn port_name(&self, port: PortId) -> String {
        let p = &self.ports[port.0 as usize];
        format!("{}:{}", self.topo.name(p.node), p.index)
    }

    pub(super) fn on_sample(&mut self) {
        let now = self.now();
        let interval = (now - self.samples.last_time).as_secs_f64();
        for i in 0..self.telemetry_ports.len() {
            let port = self.telemetry_ports[i];
            let name = self.port_name(port);
            let p = &self.ports[port.0 as usize];
            let (queue, tx) = (p.total_queue_bytes() as f64, p.counters.tx_bytes);
            let rate = if interval > 0.0 { (tx - self.samples.last_port_tx[i]) as f64 * 8.0 / interval } else { 0.0 };
            // A sample with no time since the last (the first, at 0) leaves
            // what was sent at that instant to the next interval, so that a
            // series sums to the port's total.
            if interval > 0.0 {
                self.samples.last_port_tx[i] = tx;
            }
            self.samples.push(now, &name, "queue_bytes", queue);
            self.samples.push(now, &name, "tx_bps", rate);
        }
        for i in 0..self.telemetry_hosts.len() {
            let nic = self.telemetry_hosts[i];
            let rx = self.nic_rx_payload[nic.0 as usize];
            let rate = if interval > 0.0 { (rx - self.samples.last_host_rx[i]) as f64 * 8.0 / interval } else { 0.0 };
            if interval > 0.0 {
                self.samples.last_host_rx[i] = rx;
            }
            let name = self.topo.name(nic);
            self.samples.push(now, &name, "rx_goodput_bps", rate);
            // Per plane: what the NIC sends on each of its ports (s5.3).
            let planes = &self.node_ports[nic.0 as usize];
            self.samples.last_plane_tx[i].resize(planes.len(), 0);
            for (k, port) in planes.iter().enumerate() {
                let tx = self.ports[port.0 as usize].counters.tx_bytes;
                let last = self.samples.last_plane_tx[i][k];
                let rate = if interval > 0.0 { (tx - last) as f64 * 8.0 / interval } else { 0.0 };
                if interval > 0.0 {
                    self.samples.last_plane_tx[i][k] = tx;
                }
                self.samples.push(now, &format!("{name}:{k}"), "plane_tx_bps", rate);
            }
        }
        if let Some(activity) = self.recorder.take_ev_activity() {
            for (metric, counts) in [("ev_packets", activity.sent), ("ev_drops", activity.dropped)] {
                for ((q, ev), packets) in counts {
                    self.samples.push(now, &format!("qp{}/ev{ev}", q.0), metric, packets as f64);
                }
            }
        }
        self.samples.last_time = now;
        if self.samples.series.len() as u64 > self.limits.sample_rows {
            // Sampling on would outgrow the memory the run may take.
            self.halt = Some(StopReason::MemoryLimit);
            return;
        }
        let more_work = self.work_left > 0 || self.scenario.duration.is_some_and(|d| now < d);
        self.samples.next = None;
        if more_work {
            let interval = self.scenario.telemetry.sample_interval.expect("sampling is on");
            self.events.schedule_in(interval, Event::Sample);
            self.samples.next = Some(now + interval);
        }
    }

    /// Imbalance telemetry's queue or load sample, and the next one while
    /// the run goes on.
    pub(super) fn on_imbalance(&mut self, loads: bool) {
        let Some(imbalance) = self.imbalance.as_mut() else { return };
        let cfg = self.scenario.telemetry.imbalance.as_ref().expect("imbalance telemetry is on");
        let (interval, event) = if loads {
            imbalance.sample_loads(&self.ports);
            (cfg.load_interval, Event::ImbalanceLoads)
        } else {
            imbalance.sample_queues(&self.ports);
            (cfg.queue_interval, Event::ImbalanceQueues)
        };
        let now = self.now();
        if self.work_left > 0 || self.scenario.duration.is_some_and(|d| now < d) {
            self.events.schedule_in(interval, event);
        }
    }

    pub(super) fn report(&mut self, stop: StopReason) -> RunOutput {
        let now = self.now();
        // A last sample for the run's tail after the last tick, so that a
        // series sums to the run's totals.
        if self.scenario.telemetry.sample_interval.is_some() && now > self.samples.last_time {
            self.on_sample();
        }
        let complete = stop.is_complete();
        let mut flows = Table::default();
        let f = &self.flows;
        let fct: Vec<Option<f64>> = f.iter().map(|x| x.end.map(|e| (e - x.start).as_secs_f64())).collect();
        let qp_stat = |pick: &dyn Fn(&QpStats) -> u64| -> Vec<u64> {
            f.iter()
                .map(|x| self.connections[x.conn].qps.iter().map(|&q| pick(&self.qps[q].transport.stats())).sum())
                .collect()
        };
        flows.push("flow", Column::Int((0..f.len() as u64).collect()));
        flows.push("src", Column::Text(f.iter().map(|x| self.topo.name(x.src)).collect()));
        flows.push("dst", Column::Text(f.iter().map(|x| self.topo.name(x.dst)).collect()));
        flows.push("bytes", Column::Int(f.iter().map(|x| x.bytes).collect()));
        flows.push("start_s", Column::Float(f.iter().map(|x| Some(x.start.as_secs_f64())).collect()));
        flows.push("end_s", Column::Float(f.iter().map(|x| x.end.map(Time::as_secs_f64)).collect()));
        flows.push("fct_s", Column::Float(fct.clone()));
        flows.push("ideal_fct_s", Column::Float(f.iter().map(|x| Some(x.ideal.as_secs_f64())).collect()));
        flows.push(
            "slowdown",
            Column::Float(f.iter().zip(&fct).map(|(x, t)| t.map(|t| t / x.ideal.as_secs_f64().max(1e-18))).collect()),
        );
        flows.push("retransmitted_packets", Column::Int(qp_stat(&|s| s.retransmitted_packets)));
        flows.push("timeouts", Column::Int(qp_stat(&|s| s.timeouts)));
        flows.push("qp_errors", Column::Int(qp_stat(&|s| u64::from(s.failed))));
        flows.push("out_of_order_packets", Column::Int(qp_stat(&|s| s.out_of_order_packets)));
        flows.push(
            "max_reorder_distance",
            Column::Int(
                f.iter()
                    .map(|x| {
                        let qps = self.connections[x.conn].qps.iter();
                        qps.map(|&q| self.qps[q].transport.stats().max_reorder_distance).max().unwrap_or(0)
                    })
                    .collect(),
            ),
        );
        flows.push(
            "entropy",
            Column::Int(f.iter().map(|x| self.qps[self.connections[x.conn].qps[0]].entropy as u64).collect()),
        );

        let mut ports = Table::default();
        let ps = &self.ports;
        let ids: Vec<PortId> = (0..ps.len() as u32).map(PortId).collect();
        ports.push("node", Column::Text(ps.iter().map(|p| self.topo.name(p.node)).collect()));
        ports.push("port", Column::Int(ps.iter().map(|p| p.index as u64).collect()));
        ports.push("peer", Column::Text(ids.iter().map(|&i| self.port_name(i.peer())).collect()));
        ports.push("rate_bps", Column::Int(ps.iter().map(|p| p.rate.0).collect()));
        ports.push("tx_bytes", Column::Int(ps.iter().map(|p| p.counters.tx_bytes).collect()));
        ports.push("tx_packets", Column::Int(ps.iter().map(|p| p.counters.tx_packets).collect()));
        for cause in DROP_CAUSES {
            let name = format!("drops_{}", cause.name());
            ports.push(&name, Column::Int(ps.iter().map(|p| p.counters.drops[cause as usize]).collect()));
        }
        ports.push("ecn_marks", Column::Int(ps.iter().map(|p| p.counters.ecn_marks).collect()));
        ports.push("trims", Column::Int(ps.iter().map(|p| p.counters.trims).collect()));
        ports.push("pauses_sent", Column::Int(ps.iter().map(|p| p.counters.pauses_sent).collect()));
        ports.push("pauses_received", Column::Int(ps.iter().map(|p| p.counters.pauses_received).collect()));
        ports.push(
            "paused_time_s",
            Column::Float(ps.iter().map(|p| Some(p.paused_time_at(now).as_secs_f64())).collect()),
        );
        ports.push("max_queue_bytes", Column::Int(ps.iter().map(|p| p.counters.max_queue_bytes).collect()));

        let samples = std::mem::replace(&mut self.samples, Samples::new(0, 0, None));
        let timeseries = samples.series.into_table();

        let mut slowdowns: Vec<f64> =
            f.iter().zip(&fct).filter_map(|(x, t)| t.map(|t| t / x.ideal.as_secs_f64().max(1e-18))).collect();
        let mut done: Vec<f64> = fct.iter().flatten().map(|s| s * 1e6).collect();
        let finished = done.len();
        let sum =
            |pick: &dyn Fn(&crate::net::PortCounters) -> u64| -> u64 { ps.iter().map(|p| pick(&p.counters)).sum() };
        let drops_by_cause: serde_json::Map<String, serde_json::Value> =
            DROP_CAUSES.iter().map(|&c| (c.name().to_string(), json!(sum(&|k| k.drops[c as usize])))).collect();
        let last_end = f.iter().filter_map(|x| x.end).max().unwrap_or(now);
        let first_start = f.iter().map(|x| x.start).min().unwrap_or(Time::ZERO);
        let span = (last_end.saturating_sub(first_start)).as_secs_f64();
        let summary = json!({
            "complete": complete,
            "stop_reason": stop.name(),
            "sim_time_s": now.as_secs_f64(),
            "events": self.events.executed() + self.absorbed.as_ref().map_or(0, |a| a.events),
            "packet_hops": self.totals.packet_hops,
            "flows": f.len(),
            "flows_completed": finished,
            "fct_p50_us": percentile(&mut done, 0.5),
            "fct_p99_us": percentile(&mut done, 0.99),
            "fct_max_us": percentile(&mut done, 1.0),
            "slowdown_p50": percentile(&mut slowdowns, 0.5),
            "slowdown_p99": percentile(&mut slowdowns, 0.99),
            "goodput_gbps": if span > 0.0 { self.totals.delivered_payload as f64 * 8.0 / span / 1e9 } else { 0.0 },
            "sent_payload_bytes": self.totals.sent_payload,
            "delivered_payload_bytes": self.totals.delivered_payload,
            "discarded_payload_bytes": self.totals.discarded_payload,
            "dropped_payload_bytes": sum(&|k| k.dropped_payload),
            "trimmed_payload_bytes": sum(&|k| k.trimmed_payload),
            "in_flight_payload_bytes": self.in_flight_payload(),
            "drops": sum(&|k| k.drops.iter().sum()),
            "drops_by_cause": drops_by_cause,
            "data_drops": self.totals.data_drops,
            "ecn_marks": sum(&|k| k.ecn_marks),
            "trims": sum(&|k| k.trims),
            "trimmed_received": self.totals.trimmed_received,
            "pauses_sent": sum(&|k| k.pauses_sent),
            "paused_time_s": ps.iter().map(|p| p.paused_time_at(now).as_secs_f64()).sum::<f64>(),
            "qp_errors": self.totals.qp_errors,
            "imm_completions": self.totals.imm_completions,
            "retired_evs": self.qp_sum(|s| s.retired_evs),
            "resurrected_evs": self.qp_sum(|s| s.resurrected_evs),
            "spurious_losses": self.qp_sum(|s| s.spurious_losses),
            "ecn_replacements": self.qp_sum(|s| s.ecn_replacements),
            "out_of_order_packets": self.qp_sum(|s| s.out_of_order_packets),
            "plane_failovers": self.qp_sum(|s| s.plane_failovers),
            "rnr_naks": self.qp_sum(|s| s.rnr_naks),
            "timeouts": self.qp_sum(|s| s.timeouts),
            "retransmitted_packets": self.qp_sum(|s| s.retransmitted_packets),
            // On two threads, the sum of the two sides' pools.
            "packet_pool_high_water": self.pool.capacity() + self.absorbed.as_ref().map_or(0, |a| a.pool_high_water),
        });
        let (collectives, steps, transfers, jobs) = self.jobs.tables(&self.topo, self.scenario.telemetry.transfers);
        let mut summary = summary;
        summary["jobs"] = jobs;
        let pcap = self.recorder.take_capture().map(|capture| {
            summary["captured_packets"] = json!(capture.packets());
            capture.into_bytes()
        });
        let ev_log = self.ev_log_table();
        let clustermapper = self.clustermapper_table();
        let histograms = self.recorder.take_histograms(now);
        if let Some(mapper) = &self.mapper {
            summary["clustermapper_probes"] = json!(mapper.sent);
        }
        let mut degrees = crate::transport::DegreeHistogram::default();
        for qp in self.qps.iter() {
            if let Some(d) = qp.transport.ooo_degrees() {
                degrees.merge(d);
            }
        }
        if degrees.packets() > 0 {
            summary["ooo_degree"] = json!({
                "packets": degrees.packets(),
                "p50": degrees.quantile(0.5),
                "p99": degrees.quantile(0.99),
                "p999": degrees.quantile(0.999),
                "max": degrees.quantile(1.0),
            });
        }
        // ECN marks by where they were made (PRO's Table II counts them per tier).
        let mut marks_by_tier = std::collections::BTreeMap::<String, u64>::new();
        for port in self.ports.iter().filter(|p| p.counters.ecn_marks > 0) {
            let tier = match self.topo.node(port.node).role {
                crate::topology::NodeRole::Switch { tier, .. } => format!("tier{tier}"),
                crate::topology::NodeRole::Nic { .. } => "nic".to_string(),
            };
            *marks_by_tier.entry(tier).or_default() += port.counters.ecn_marks;
        }
        summary["ecn_marks_by_tier"] = json!(marks_by_tier);
        if let Balancer::Letflow(letflow) = &self.balancer {
            summary["flowlets_started"] = json!(letflow.flowlets_started());
        }
        if let Balancer::Conweave(cw) = &self.balancer {
            let c = cw.counters();
            summary["conweave"] = json!({
                "reroutes": c.reroutes,
                "rtt_replies": c.rtt_replies,
                "timely_replies": c.timely_replies,
                "clears": c.clears,
                "notifies": c.notifies,
                "held_packets": c.held_packets,
                "voq_flushes": c.voq_flushes,
                "flushes_by_tail": c.flushes_by_tail,
                "max_voq_packets": c.max_voq_packets,
                "still_held": cw.held(),
            });
        }
        if let Some(shift) = &self.shift {
            let c = shift.counters;
            summary["shift"] = json!({
                "fallbacks": c.fallbacks,
                "recoveries": c.recoveries,
                "probes": c.probes,
                "failed_probes": c.failed_probes,
                "reposted_messages": c.reposted_messages,
                "reposted_bytes": c.reposted_bytes,
                "rewritten_messages": c.rewritten_messages,
                "rewritten_bytes": c.rewritten_bytes,
                "resent_sends": c.resent_sends,
                "fallback_time_mean_s": (c.fallbacks_done > 0)
                    .then(|| c.fallback_time_total.as_secs_f64() / c.fallbacks_done as f64),
            });
        }
        let mut warnings = Vec::new();
        if let Some(t) = &self.path_search {
            summary["path_search"] = json!({
                "connections": t.connections,
                "qps": t.qps,
                "disjoint_qps": t.disjoint_qps,
                "candidates": t.candidates,
                "links_examined": t.links_examined,
            });
            if let Some((found, asked)) = t.fewest {
                warnings.push(format!(
                    "nic.path_selection: disjoint: {} of {} connections found fewer disjoint paths than QPs (fewest: \
                     {found} of {asked}); their other QPs share links",
                    t.short_connections, t.connections
                ));
            }
        }
        if !warnings.is_empty() {
            summary["warnings"] = json!(warnings);
        }
        RunOutput {
            stop,
            complete,
            summary,
            flows,
            ports,
            timeseries,
            collectives,
            steps,
            transfers,
            ev_log,
            clustermapper,
            histograms,
            imbalance: self.imbalance.as_ref().map_or_else(Table::default, |i| i.table()),
            pcap,
        }
    }

    /// Clustermapper's verdicts: one row each time an element's health
    /// changes.
    fn clustermapper_table(&self) -> Table {
        let mut table = Table::default();
        let Some(mapper) = &self.mapper else { return table };
        let v = &mapper.verdicts;
        table.push("time_s", Column::Float(v.iter().map(|(t, ..)| Some(t.as_secs_f64())).collect()));
        table.push("element", Column::Text(v.iter().map(|(_, e, ..)| e.clone()).collect()));
        table.push("kind", Column::Text(v.iter().map(|(_, _, k, ..)| k.to_string()).collect()));
        table.push("health", Column::Text(v.iter().map(|(_, _, _, h, _)| h.name().to_string()).collect()));
        table.push("probe_loss", Column::Float(v.iter().map(|(.., l)| Some(*l)).collect()));
        table
    }

    /// A counter summed over every QP.
    fn qp_sum(&self, count: impl Fn(&QpStats) -> u64) -> u64 {
        self.qps.iter().map(|q| count(&q.transport.stats())).sum()
    }

    /// The EV log: one row per EV state change, when telemetry asks.
    fn ev_log_table(&mut self) -> Table {
        let mut table = Table::default();
        let Some(log) = self.recorder.take_ev_log() else { return table };
        let qp = |q: QpId| &self.qps[q];
        table.push("time_s", Column::Float(log.iter().map(|(t, _, _)| Some(t.as_secs_f64())).collect()));
        table.push("qp", Column::Int(log.iter().map(|&(_, q, _)| q.0 as u64).collect()));
        table.push("src", Column::Text(log.iter().map(|&(_, q, _)| self.topo.name(qp(q).src)).collect()));
        table.push("dst", Column::Text(log.iter().map(|&(_, q, _)| self.topo.name(qp(q).dst)).collect()));
        table.push("plane", Column::Int(log.iter().map(|(_, _, c)| c.ev.plane() as u64).collect()));
        table.push("ev", Column::Int(log.iter().map(|(_, _, c)| c.ev.0 as u64).collect()));
        table.push("state", Column::Text(log.iter().map(|(_, _, c)| c.state.name().to_string()).collect()));
        table
    }

    /// Payload still in queues or on wires.
    pub(super) fn in_flight_payload(&self) -> u64 {
        let queued = self.ports.iter().flat_map(|p| p.queues.iter().flat_map(|&q| self.pool.queued(q)));
        let on_wires = self.events.pending().filter_map(|e| match e {
            Event::Arrive(id) => Some(*id),
            _ => None,
        });
        let upper = self.absorbed.as_ref().map_or(0, |a| a.in_flight_payload);
        queued.chain(on_wires).map(|id| self.pool.get(id).payload() as u64).sum::<u64>() + upper
    }
}

impl Jobs {
    /// Collective runs, job iterations, transfers (if asked for) and the
    /// per-job summary.
    pub(crate) fn tables(&self, topo: &Topology, with_transfers: bool) -> (Table, Table, Table, serde_json::Value) {
        let j = self;
        let p = &j.program;
        let secs = |t: Option<Time>| t.map(Time::as_secs_f64);
        let phase_of = |c: &crate::workload::program::CollectiveRun| &p.phases[c.phase];
        let mut collectives = Table::default();
        let runs = &p.collectives;
        let cct: Vec<Option<f64>> = runs
            .ids()
            .map(|c| match (j.collective_start[c], j.collective_end[c]) {
                (Some(s), Some(e)) => Some((e - s).as_secs_f64()),
                _ => None,
            })
            .collect();
        collectives.push("job", Column::Text(runs.iter().map(|c| p.jobs[phase_of(c).job].name.clone()).collect()));
        collectives.push("iteration", Column::Int(runs.iter().map(|c| phase_of(c).iteration as u64).collect()));
        collectives.push("phase", Column::Text(runs.iter().map(|c| phase_of(c).name.clone()).collect()));
        collectives.push("group", Column::Int(runs.iter().map(|c| c.group as u64).collect()));
        collectives.push("op", Column::Text(runs.iter().map(|c| c.op.name().to_string()).collect()));
        collectives.push("algorithm", Column::Text(runs.iter().map(|c| c.pattern().to_string()).collect()));
        collectives.push("ranks", Column::Int(runs.iter().map(|c| c.ranks as u64).collect()));
        collectives.push("bytes", Column::Int(runs.iter().map(|c| c.bytes).collect()));
        collectives.push("start_s", Column::Float(j.collective_start.iter().map(|&t| secs(t)).collect()));
        collectives.push("end_s", Column::Float(j.collective_end.iter().map(|&t| secs(t)).collect()));
        collectives.push("cct_s", Column::Float(cct.clone()));
        let algbw: Vec<Option<f64>> = runs
            .iter()
            .zip(&cct)
            .map(|(c, t)| t.filter(|&t| t > 0.0).map(|t| c.bytes as f64 * 8.0 / t / 1e9))
            .collect();
        collectives.push("algbw_gbps", Column::Float(algbw.clone()));
        collectives.push(
            "busbw_gbps",
            Column::Float(runs.iter().zip(&algbw).map(|(c, a)| a.map(|a| a * c.op.bus_factor(c.ranks))).collect()),
        );
        collectives.push("ideal_s", Column::Float(j.collective_ideal.iter().map(|t| Some(t.as_secs_f64())).collect()));
        collectives.push(
            "slowdown",
            Column::Float(
                cct.iter()
                    .zip(&j.collective_ideal)
                    .map(|(t, i)| t.filter(|_| i.0 > 0).map(|t| t / i.as_secs_f64()))
                    .collect(),
            ),
        );

        let mut steps = Table::default();
        let mut rows: Vec<(JobId, u32, Option<Time>, Option<Time>)> = Vec::new();
        for (job, plan) in p.jobs.enumerate() {
            // One pass over the job's phases, each folded into its iteration.
            let mut steps_of: Vec<(Option<Time>, Option<Time>, bool)> =
                vec![(None, None, true); plan.iterations as usize];
            for q in plan.phases.iter() {
                let (start, end, done) = &mut steps_of[p.phases[q].iteration as usize];
                let (s, e) = (j.phase_start[q], j.phase_end[q]);
                *start = match (*start, s) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                *end = (*end).max(e);
                *done &= e.is_some();
            }
            for (it, (start, end, done)) in steps_of.into_iter().enumerate() {
                rows.push((job, it as u32, start, if done { end } else { None }));
            }
        }
        steps.push("job", Column::Text(rows.iter().map(|r| p.jobs[r.0].name.clone()).collect()));
        steps.push("iteration", Column::Int(rows.iter().map(|r| r.1 as u64).collect()));
        steps.push("start_s", Column::Float(rows.iter().map(|r| secs(r.2)).collect()));
        steps.push("end_s", Column::Float(rows.iter().map(|r| secs(r.3)).collect()));
        steps.push(
            "step_time_s",
            Column::Float(rows.iter().map(|r| r.2.zip(r.3).map(|(s, e)| (e - s).as_secs_f64())).collect()),
        );

        let mut transfers = Table::default();
        if with_transfers {
            let ts = &p.transfers;
            transfers.push("collective", Column::Int(ts.iter().map(|t| t.collective.0 as u64).collect()));
            transfers.push("job", Column::Text(ts.ids().map(|t| p.jobs[j.job_of(t)].name.clone()).collect()));
            transfers.push("src_rank", Column::Int(ts.iter().map(|t| t.src_rank as u64).collect()));
            transfers.push("dst_rank", Column::Int(ts.iter().map(|t| t.dst_rank as u64).collect()));
            let nic = |t: TransferId, r: u32| topo.name(p.jobs[j.job_of(t)].nics[r as usize]);
            transfers.push("src", Column::Text(ts.enumerate().map(|(id, t)| nic(id, t.src_rank)).collect()));
            transfers.push("dst", Column::Text(ts.enumerate().map(|(id, t)| nic(id, t.dst_rank)).collect()));
            transfers.push("bytes", Column::Int(ts.iter().map(|t| t.bytes).collect()));
            transfers.push("channel", Column::Int(ts.iter().map(|t| t.channel as u64).collect()));
            transfers.push("step", Column::Int(ts.iter().map(|t| t.step as u64).collect()));
            transfers.push("chunk", Column::Int(ts.iter().map(|t| t.chunk as u64).collect()));
            transfers.push("intra_host", Column::Int(j.transfer_conn.iter().map(|c| u64::from(c.is_none())).collect()));
            transfers.push("ready_s", Column::Float(j.ready.iter().map(|&t| secs(t)).collect()));
            transfers.push("posted_s", Column::Float(j.posted.iter().map(|&t| secs(t)).collect()));
            transfers.push("end_s", Column::Float(j.done.iter().map(|&t| secs(t)).collect()));
        }

        let mut summary = serde_json::Map::new();
        for (job, plan) in p.jobs.enumerate() {
            let network_bytes: u64 = p
                .transfers
                .enumerate()
                .filter(|&(t, _)| j.job_of(t) == job && j.transfer_conn[t].is_some())
                .map(|(_, t)| t.bytes)
                .sum();
            let jct = j.job_end[job].map(|e| (e - plan.start).as_secs_f64());
            let ideal = self.ideal_jct(job).as_secs_f64();
            summary.insert(
                plan.name.clone(),
                json!({
                    "ranks": plan.nics.len(),
                    "iterations": plan.iterations,
                    "completed": j.job_end[job].is_some(),
                    "failed": j.job_failed[job],
                    "restarts": j.restarts[job],
                    "halted_s": j.halted[job].as_secs_f64(),
                    "jct_s": jct,
                    "ideal_jct_s": ideal,
                    "jct_slowdown": jct.filter(|_| ideal > 0.0).map(|t| t / ideal),
                    "network_bytes": network_bytes,
                }),
            );
        }
        (collectives, steps, transfers, serde_json::Value::Object(summary))
    }

    /// A job's completion time on an ideal fabric: the longest path through
    /// its phases, each taking its compute time or its slowest collective's
    /// ideal time (PRO's JCT, pro-deterministic-lb.txt s VI.A, over the
    /// ideal).
    pub(crate) fn ideal_jct(&self, job: JobId) -> Time {
        self.program.longest_path(job, |phase| {
            phase.compute.unwrap_or_else(|| {
                phase.collectives.iter().map(|&c| self.collective_ideal[c]).max().unwrap_or(Time::ZERO)
            })
        })
    }
}
