//! The flow model's ideal times, samples, tables and summary: the packet
//! model's tables and keys where the flow model has the quantity.

use serde_json::json;

use super::{Event, FluidSimulation};
use crate::ids::Id;
use crate::metrics::{percentile, Column, RunOutput, Series, StopReason, Table};
use crate::net::PortId;
use crate::transport::Verb;
use crate::units::{Rate, Time};

/// Sampled time series in long format, as the packet model writes them.
pub(super) struct Samples {
    series: Series,
    last_port_tx: Vec<f64>,
    last_host_rx: Vec<f64>,
    last_time: Time,
}

impl Samples {
    pub(super) fn new(ports: usize, hosts: usize) -> Samples {
        Samples {
            series: Series::default(),
            last_port_tx: vec![0.0; ports],
            last_host_rx: vec![0.0; hosts],
            last_time: Time::ZERO,
        }
    }

    fn push(&mut self, t: Time, entity: &str, metric: &str, value: f64) {
        self.series.push(t.as_secs_f64(), entity, metric, value);
    }
}

impl FluidSimulation {
    fn port_name(&self, port: PortId) -> String {
        let node = self.routing.peer(port.peer());
        format!("{}:{}", self.topo.name(node), self.port_index[port.0 as usize])
    }

    /// Wire bytes port `p` has sent: its share of its bundle's payload,
    /// by rate over the bundle's working links.
    fn port_tx_bytes(&self, p: PortId) -> f64 {
        let b = self.bundles.of_port[p.0 as usize];
        let members = self.bundles.members(b);
        let total: u64 = members.iter().map(|m| self.rate[m.0 as usize]).sum();
        self.carried[b as usize] * self.rate[p.0 as usize] as f64 / total.max(1) as f64 / self.efficiency
    }

    pub(super) fn on_sample(&mut self) {
        let now = self.now();
        self.advance_all(now);
        let interval = (now - self.samples.last_time).as_secs_f64();
        let per_second = |bytes: f64| if interval > 0.0 { bytes * 8.0 / interval } else { 0.0 };
        for i in 0..self.telemetry_ports.len() {
            let port = self.telemetry_ports[i];
            let tx = self.port_tx_bytes(port);
            let rate = per_second(tx - self.samples.last_port_tx[i]);
            self.samples.last_port_tx[i] = tx;
            let name = self.port_name(port);
            self.samples.push(now, &name, "queue_bytes", 0.0);
            self.samples.push(now, &name, "tx_bps", rate);
        }
        for i in 0..self.telemetry_hosts.len() {
            let nic = self.telemetry_hosts[i];
            let rx = self.nic_rx[nic.0 as usize];
            let rate = per_second(rx - self.samples.last_host_rx[i]);
            self.samples.last_host_rx[i] = rx;
            self.samples.push(now, &self.topo.name(nic), "rx_goodput_bps", rate);
        }
        self.samples.last_time = now;
        if self.samples.series.len() as u64 > self.sample_rows {
            // Sampling on would outgrow the memory the run may take.
            self.halt = Some(StopReason::MemoryLimit);
            return;
        }
        if self.work_left > 0 || self.scenario.duration.is_some_and(|d| now < d) {
            let interval = self.scenario.telemetry.sample_interval.expect("sampling is on");
            // While nothing moves (every stream stalled, waiting for its
            // transport to give up or resume), every sample would read the
            // same zeros: the next is taken at the first tick from the next
            // event on, so that seconds of waiting are not millions of rows.
            let mut next = now + interval;
            if !self.streams.iter().any(|s| s.flowing) {
                if let Some(event) = self.events.peek_time().filter(|&t| t > next) {
                    next = now + interval.times((event - now).0.div_ceil(interval.0));
                }
            }
            self.events.schedule(next, Event::Sample);
        }
    }

    /// Each flow's and collective's completion alone on the pristine
    /// fabric, in this model: its bytes at the rate its paths allow alone,
    /// plus one packet's latency.
    pub(super) fn set_ideals(&mut self) {
        for f in 0..self.flows.len() {
            let spec = &self.flows[f].spec;
            let (conn, bytes, rate, verb) = (self.flows[f].conn, spec.bytes, spec.rate, spec.verb);
            self.flows[f].ideal = self.ideal_message(conn, bytes, rate, verb);
        }
        for c in self.jobs.program.collectives.ids() {
            self.jobs.collective_ideal[c] = self.ideal_collective(c);
        }
    }

    /// `bytes` over connection `conn` alone: the slowest of its QPs'
    /// shares, each at its max-min fair rate beside the connection's other
    /// QPs (which share its NIC's ports and whatever else their routes
    /// cross) and no sooner than its first packet's serialization, then its
    /// packet's latency (a stream's own end, `message_latency`); a READ's
    /// share once its request has reached the sender
    /// (`read_request_trip`). The slowest share's bottleneck is shared only
    /// with shares as slow, so it never speeds up before it ends.
    fn ideal_message(&mut self, conn: u32, bytes: u64, rate_limit: Option<Rate>, verb: Verb) -> Time {
        let qps = self.connections[conn as usize].clone();
        let cap = rate_limit.map_or(f64::INFINITY, |r| r.0 as f64 / qps.len() as f64 / 8.0 * self.efficiency);
        let routes: Vec<super::Route> = qps.iter().map(|&q| self.qp_route(q)).collect();
        let mut bundles: Vec<u32> = routes.iter().flat_map(|r| r.uses.iter().map(|&(b, _)| b)).collect();
        bundles.sort_unstable();
        bundles.dedup();
        let users: Vec<(&[(u32, f64)], f64)> = routes.iter().map(|r| (&r.uses[..], cap)).collect();
        let rates = self.fairness.solve(&self.capacity, &bundles, &users);
        let mut slowest = Time::ZERO;
        let parts = crate::workload::message_parts(bytes, qps.len());
        for (((&q, share), route), fair) in qps.iter().zip(parts).zip(&routes).zip(rates) {
            let rate = fair * route.delivered;
            let fluid = Time::from_secs_f64(share as f64 / rate);
            let wire = self.largest_packet(share, verb).wire;
            let asked = if verb == Verb::Read { self.read_request_trip(q) } else { Time::ZERO };
            slowest = slowest.max(asked + fluid + self.message_latency(route, share as f64, wire, rate));
        }
        slowest
    }

    /// The goodput a stream capped at `cap` gets on `route` with the fabric
    /// to itself.
    pub(super) fn rate_alone(&self, route: &super::Route, cap: f64) -> f64 {
        (route.uses.iter()).map(|&(b, share)| self.capacity[b as usize] / share).fold(cap, f64::min) * route.delivered
    }

    /// Adds to each job's `network_bytes` (counted from its transfers)
    /// what its pipelines and all-to-alls run whole move over the network.
    fn add_whole_network_bytes(&self, jobs: &mut serde_json::Value) {
        let job_name = |c: crate::ids::CollectiveId| {
            let job = self.jobs.program.phases[self.jobs.program.collectives[c].phase].job;
            self.jobs.program.jobs[job].name.clone()
        };
        let pipelines = self.pipelines.iter().map(|r| (r.collective, r.bytes().saturating_mul(r.network_hops())));
        let exchanges = (self.exchanges.iter()).map(|x| (x.collective, x.pair_bytes.saturating_mul(x.network_pairs())));
        for (c, bytes) in pipelines.chain(exchanges) {
            if let Some(entry) = jobs.get_mut(job_name(c)).and_then(|j| j.get_mut("network_bytes")) {
                *entry = (entry.as_u64().unwrap_or(0).saturating_add(bytes)).into();
            }
        }
    }

    /// A collective run as whole pipelines, alone: stage by stage
    /// (pipelines that start at one step), its pipelines share the fabric
    /// max-min fairly; a stage takes its slowest pipeline's bytes at its
    /// rate, and its tail.
    fn ideal_pipelines(&mut self, c: crate::ids::CollectiveId) -> Time {
        let (mut first, end) = (self.pipeline_start[c.index()], self.pipeline_start[c.index() + 1]);
        let mut total = Time::ZERO;
        while first < end {
            let stage_end = self.pipeline_stage_end(first, end);
            total += self.ideal_pipeline_stage(first, stage_end);
            first = stage_end;
        }
        total
    }

    /// Pipelines `first..end`, started together and alone in the fabric.
    fn ideal_pipeline_stage(&mut self, first: u32, end: u32) -> Time {
        let routes: Vec<super::Route> = (first..end).map(|r| self.pipeline_route(r)).collect();
        let mut bundles: Vec<u32> = routes.iter().flat_map(|r| r.uses.iter().map(|&(b, _)| b)).collect();
        bundles.sort_unstable();
        bundles.dedup();
        let users: Vec<(&[(u32, f64)], f64)> = (first..end)
            .zip(&routes)
            .map(|(r, route)| (&route.uses[..], self.pipelines[r as usize].intra_cap))
            .collect();
        let rates = self.fairness.solve(&self.capacity, &bundles, &users);
        (first..end)
            .zip(rates.iter().zip(&routes))
            .map(|(r, (&rate, route))| {
                let pipeline = &self.pipelines[r as usize];
                let goodput = rate * route.delivered;
                Time::from_secs_f64(pipeline.bytes() as f64 / goodput) + pipeline.tail(goodput, goodput)
            })
            .max()
            .unwrap_or(Time::ZERO)
    }

    /// A collective alone: the longer of its chain of dependent transfers,
    /// each the time its message takes alone (`ideal_message`), and its
    /// busiest rank's bytes at its NIC's payload rate, after the first
    /// READ request's way for READs, and the shortest tail after them (the
    /// packet model's alpha-beta bound, `sim/build.rs: ideal_cct`).
    fn ideal_collective(&mut self, c: crate::ids::CollectiveId) -> Time {
        if !self.jobs.program.collectives[c].pipelines.is_empty() {
            return self.ideal_pipelines(c);
        }
        if let Some(x) = self.exchange_of[c.index()] {
            return self.ideal_exchange(x);
        }
        let run = self.jobs.program.collectives[c].clone();
        if run.transfers.is_empty() {
            return Time::ZERO;
        }
        let job = self.jobs.program.phases[run.phase].job;
        let nics = self.jobs.program.jobs[job].nics.clone();
        let intra = self.scenario.intra_host.clone();
        // Per connection and size: the message alone, its tail, and what a
        // READ's request takes before its data can leave.
        let mut alone: crate::engine::FastMap<(u32, u64), (Time, Time, Time)> = Default::default();
        // The earliest the network's first data can leave.
        let mut first_data = Time::MAX;
        let mut chain_end = vec![Time::ZERO; run.transfers.len()];
        // Shortest tails of the network's transfers and the intra-host ones.
        let mut min_tail = [Time::MAX; 2];
        let mut load: std::collections::BTreeMap<u32, [u64; 4]> = Default::default();
        for (k, t) in run.transfers.iter().enumerate() {
            let transfer = self.jobs.program.transfers[t].clone();
            let conn = self.jobs.transfer_conn[t];
            let side = if conn.is_none() { 2 } else { 0 };
            load.entry(transfer.src_rank).or_default()[side] += transfer.bytes;
            load.entry(transfer.dst_rank).or_default()[side + 1] += transfer.bytes;
            let (time, tail) = match conn {
                None => (intra.alone(transfer.bytes), intra.latency),
                Some(conn) => {
                    let (time, tail, asked) = match alone.get(&(conn.0, transfer.bytes)) {
                        Some(&known) => known,
                        None => {
                            let time = self.ideal_message(conn.0, transfer.bytes, None, run.verb);
                            // The smallest share's packet, on the first QP's path.
                            let qps = self.connections[conn.0 as usize].clone();
                            let route = self.qp_route(qps[0]);
                            let smallest = self.largest_packet(transfer.bytes / qps.len() as u64, run.verb);
                            let tail = self.latency(&route.path, smallest.wire);
                            let asked = match run.verb {
                                Verb::Read => qps.iter().map(|&q| self.read_request_trip(q)).min(),
                                _ => None,
                            };
                            let known = (time, tail, asked.unwrap_or(Time::ZERO));
                            alone.insert((conn.0, transfer.bytes), known);
                            known
                        }
                    };
                    first_data = first_data.min(asked);
                    (time, tail)
                }
            };
            let side = usize::from(conn.is_none());
            min_tail[side] = min_tail[side].min(tail);
            let ready = transfer.deps.iter().map(|&d| chain_end[run.transfers.offset(d)]).max().unwrap_or(Time::ZERO);
            chain_end[k] = ready + time;
        }
        let latency = chain_end.into_iter().max().unwrap_or(Time::ZERO);
        let tail = |side: usize| if min_tail[side] == Time::MAX { Time::ZERO } else { min_tail[side] };
        let first_data = if first_data == Time::MAX { Time::ZERO } else { first_data };
        let busiest = (load.iter())
            .map(|(&rank, l)| {
                let nic = nics[rank as usize];
                let rate: u64 = self.routing.node_ports(nic).iter().map(|p| self.rate[p.0 as usize]).sum();
                let network = l[0].max(l[1]) as f64 / (rate as f64 / 8.0 * self.efficiency);
                let intra = l[2].max(l[3]) as f64 * 8.0 / intra.rate.0 as f64;
                (first_data + Time::from_secs_f64(network) + tail(0)).max(Time::from_secs_f64(intra) + tail(1))
            })
            .max()
            .unwrap_or(Time::ZERO);
        latency.max(busiest)
    }

    /// When the last of the scenario's faults acts (zero without any).
    pub(super) fn last_fault(&self) -> Time {
        self.faults.iter().map(|(at, _)| *at).max().unwrap_or(Time::ZERO)
    }

    pub(super) fn ideal_end(&self) -> Time {
        let flows = self.flows.iter().map(|f| f.spec.start + f.ideal);
        let jobs = self.jobs.program.jobs.ids().map(|j| self.jobs.program.jobs[j].start + self.jobs.ideal_jct(j));
        flows.chain(jobs).max().unwrap_or(Time::ZERO)
    }

    pub(super) fn run_end(&self) -> Time {
        self.scenario.run_end(self.ideal_end(), self.last_fault())
    }

    pub(super) fn report(&mut self, stop: StopReason) -> RunOutput {
        let now = self.now();
        self.advance_all(now);
        // A last sample for the run's tail, as the packet model takes.
        if self.scenario.telemetry.sample_interval.is_some() && now > self.samples.last_time {
            self.on_sample();
        }
        let f = &self.flows;
        let fct: Vec<Option<f64>> = f.iter().map(|x| x.end.map(|e| (e - x.spec.start).as_secs_f64())).collect();
        let mut flows = Table::default();
        flows.push("flow", Column::Int((0..f.len() as u64).collect()));
        flows.push("src", Column::Text(f.iter().map(|x| self.topo.name(x.spec.src)).collect()));
        flows.push("dst", Column::Text(f.iter().map(|x| self.topo.name(x.spec.dst)).collect()));
        flows.push("bytes", Column::Int(f.iter().map(|x| x.spec.bytes).collect()));
        flows.push("start_s", Column::Float(f.iter().map(|x| Some(x.spec.start.as_secs_f64())).collect()));
        flows.push("end_s", Column::Float(f.iter().map(|x| x.end.map(Time::as_secs_f64)).collect()));
        flows.push("fct_s", Column::Float(fct.clone()));
        flows.push("ideal_fct_s", Column::Float(f.iter().map(|x| Some(x.ideal.as_secs_f64())).collect()));
        let slowdown = |x: &super::FlowRun, t: &Option<f64>| t.map(|t| t / x.ideal.as_secs_f64().max(1e-18));
        flows.push("slowdown", Column::Float(f.iter().zip(&fct).map(|(x, t)| slowdown(x, t)).collect()));
        flows.push("qp_errors", Column::Int(f.iter().map(|x| u64::from(x.failed)).collect()));
        flows.push(
            "entropy",
            Column::Int(
                f.iter().map(|x| self.qps[self.connections[x.conn as usize][0] as usize].entropy as u64).collect(),
            ),
        );

        let mut ports = Table::default();
        let ids: Vec<PortId> = (0..self.alive.len() as u32).map(PortId).collect();
        let owner = |p: &PortId| self.routing.peer(p.peer());
        ports.push("node", Column::Text(ids.iter().map(|p| self.topo.name(owner(p))).collect()));
        ports.push("port", Column::Int(ids.iter().map(|p| u64::from(self.port_index[p.0 as usize])).collect()));
        ports.push("peer", Column::Text(ids.iter().map(|&p| self.port_name(p.peer())).collect()));
        ports.push("rate_bps", Column::Int(ids.iter().map(|p| self.rate[p.0 as usize]).collect()));
        ports.push("tx_bytes", Column::Int(ids.iter().map(|&p| self.port_tx_bytes(p).round() as u64).collect()));

        let samples = std::mem::replace(&mut self.samples, Samples::new(0, 0));
        let timeseries = samples.series.into_table();

        let f = &self.flows;
        let mut slowdowns: Vec<f64> = f.iter().zip(&fct).filter_map(|(x, t)| slowdown(x, t)).collect();
        let mut done: Vec<f64> = fct.iter().flatten().map(|s| s * 1e6).collect();
        let finished = done.len();
        let last_end = f.iter().filter_map(|x| x.end).max().unwrap_or(now);
        let first_start = f.iter().map(|x| x.spec.start).min().unwrap_or(Time::ZERO);
        let span = last_end.saturating_sub(first_start).as_secs_f64();
        // A fold from +0: an empty f64 sum is -0, which prints as "-0.000".
        let flow_payload = f.iter().filter(|x| x.end.is_some()).fold(0.0, |sum, x| sum + x.spec.bytes as f64);
        let (collectives, steps, transfers, mut jobs) = self.jobs.tables(&self.topo, self.scenario.telemetry.transfers);
        self.add_whole_network_bytes(&mut jobs);
        let summary = json!({
            "complete": stop.is_complete(),
            "stop_reason": stop.name(),
            "mode": "flow",
            "sim_time_s": now.as_secs_f64(),
            "events": self.events.executed(),
            "rate_computations": self.recomputes,
            // Of which answered by a problem solved before (`FairRates`).
            "rate_computations_recognised": self.fairness.recognised,
            "stream_rate_updates": self.rate_updates,
            "streams": self.posted_streams,
            "stream_slots": self.streams.len(),
            "flows": f.len(),
            "flows_completed": finished,
            "fct_p50_us": percentile(&mut done, 0.5),
            "fct_p99_us": percentile(&mut done, 0.99),
            "fct_max_us": percentile(&mut done, 1.0),
            "slowdown_p50": percentile(&mut slowdowns, 0.5),
            "slowdown_p99": percentile(&mut slowdowns, 0.99),
            "goodput_gbps": if span > 0.0 { flow_payload * 8.0 / span / 1e9 } else { 0.0 },
            "delivered_payload_bytes": self.delivered.round() as u64,
            "qp_errors": self.qp_errors,
            "flow_mode_ignores": self.ignored,
            "jobs": jobs,
        });
        RunOutput {
            stop,
            complete: stop.is_complete(),
            summary,
            flows,
            ports,
            timeseries,
            collectives,
            steps,
            transfers,
            ev_log: Table::default(),
            clustermapper: Table::default(),
            histograms: Table::default(),
            imbalance: Table::default(),
            pcap: None,
        }
    }
}
