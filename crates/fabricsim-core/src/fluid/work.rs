//! The workload in the flow model: flows, and jobs whose phases, collectives
//! and transfers progress by the packet model's own steps (`sim/jobs.rs`,
//! this model their `JobHost`), each network message one stream per QP of
//! its connection, a pipeline (ring, tree, chain) or all-to-all run whole one
//! stream.

use super::{Event, FluidSimulation, Owner};
use crate::ids::{CollectiveId, ConnectionId, Id, JobId, PhaseId, TransferId};
use crate::sim::jobs::{self, JobHost, Jobs};
use crate::transport::Verb;
use crate::units::Time;
use crate::workload::job::IntraHostConfig;
use crate::workload::message_parts;

impl FluidSimulation {
    /// Starts `bytes` for `owner` over connection `conn`, striped over its
    /// QPs as the NIC stripes a message; returns the streams started.
    fn post(&mut self, conn: u32, bytes: u64, owner: Owner, rate_limit: Option<crate::units::Rate>) -> u32 {
        let qps = self.connections[conn as usize].clone();
        let mut started = 0;
        for (&q, share) in qps.iter().zip(message_parts(bytes, qps.len())) {
            // The NIC's rate limiter counts wire bytes; streams count payload.
            let cap = rate_limit.map_or(f64::INFINITY, |r| r.0 as f64 / qps.len() as f64 / 8.0 * self.efficiency);
            self.post_stream(owner, q, share, cap);
            started += 1;
        }
        started
    }

    pub(super) fn on_flow_start(&mut self, f: u32) {
        let flow = &self.flows[f as usize];
        let (conn, bytes, rate) = (flow.conn, flow.spec.bytes, flow.spec.rate);
        let started = self.post(conn, bytes, Owner::Flow(f), rate);
        self.flows[f as usize].parts_left = started;
    }

    /// A stream's last byte arrived; its slot is free.
    pub(super) fn on_arrived(&mut self, s: u32) {
        self.free_streams.push(s);
        let (owner, qp) = (self.streams[s as usize].owner, self.streams[s as usize].qp);
        if matches!(owner, Owner::Flow(_) | Owner::Transfer(_)) && self.verb_of(owner) == Verb::Read {
            self.read_arrived(qp);
        }
        match self.streams[s as usize].owner {
            Owner::Flow(f) => {
                let flow = &mut self.flows[f as usize];
                flow.parts_left -= 1;
                if flow.parts_left == 0 && !flow.failed {
                    flow.end = Some(self.events.now());
                    self.work_left -= 1;
                }
            }
            Owner::Transfer(t) => {
                self.transfer_parts[t.index()] -= 1;
                if self.transfer_parts[t.index()] == 0 {
                    jobs::transfer_done(self, t);
                }
            }
            Owner::Pipeline(r) => {
                self.pipeline_probing(r, false);
                self.whole_part_arrived(self.pipelines[r as usize].collective)
            }
            Owner::Exchange(x) => self.whole_part_arrived(self.exchanges[x as usize].collective),
        }
    }

    /// A pipeline or all-to-all of collective `c`, run whole, arrived: the
    /// last of its stage starts the next stage's pipelines, or ends `c`.
    fn whole_part_arrived(&mut self, c: CollectiveId) {
        self.whole_left[c.index()] -= 1;
        if self.whole_left[c.index()] == 0
            && !self.jobs.job_failed[self.jobs.job_of_collective(c)]
            && !self.start_pipeline_stage(c)
        {
            jobs::collective_done(self, c);
        }
    }

    pub(super) fn flow_failed(&mut self, f: u32) {
        let flow = &mut self.flows[f as usize];
        if !flow.failed && flow.end.is_none() {
            flow.failed = true;
            self.work_left -= 1;
        }
    }

    /// Starts collective `c`'s next pipelines, those of its earliest first
    /// step not started yet; false when every pipeline has started.
    fn start_pipeline_stage(&mut self, c: CollectiveId) -> bool {
        let (first, end) = (self.pipeline_next[c.index()], self.pipeline_start[c.index() + 1]);
        if first == end {
            return false;
        }
        let stage_end = self.pipeline_stage_end(first, end);
        self.pipeline_next[c.index()] = stage_end;
        self.whole_left[c.index()] = stage_end - first;
        (first..stage_end).for_each(|r| self.start_pipeline(r));
        true
    }

    /// Pipeline `r` starts: all its hops at once, as one stream.
    fn start_pipeline(&mut self, r: u32) {
        self.pipelines[r as usize].started = self.events.now();
        self.pipeline_probing(r, true);
        let pipeline = &self.pipelines[r as usize];
        let first_qp = pipeline.hops.iter().flatten().next().map_or(u32::MAX, |&c| self.connections[c as usize][0]);
        let (bytes, cap) = (pipeline.bytes(), pipeline.intra_cap);
        let s = self.new_stream(Owner::Pipeline(r), first_qp, bytes, cap);
        self.start_stream(s);
    }

    /// A QP of the job failed: it stops for good (checkpoints are refused
    /// in the flow model).
    pub(super) fn fail_job(&mut self, job: JobId) {
        if !self.jobs.job_failed[job] && self.jobs.job_end[job].is_none() {
            self.jobs.job_failed[job] = true;
            self.work_left -= 1;
        }
    }
}

impl JobHost for FluidSimulation {
    fn jobs(&mut self) -> &mut Jobs {
        &mut self.jobs
    }

    fn time(&self) -> Time {
        self.events.now()
    }

    fn intra_host(&self) -> &IntraHostConfig {
        &self.scenario.intra_host
    }

    fn schedule_compute_done(&mut self, p: PhaseId, at: Time) {
        self.events.schedule(at, Event::ComputeDone(p));
    }

    fn schedule_intra_host_done(&mut self, t: TransferId, at: Time) {
        self.events.schedule(at, Event::IntraHostDone(t));
    }

    /// One stream per QP of the connection.
    fn send(&mut self, t: TransferId, conn: ConnectionId) -> bool {
        let bytes = self.jobs.program.transfers[t].bytes;
        let started = self.post(conn.0, bytes, Owner::Transfer(t), None);
        self.transfer_parts[t.index()] = started;
        started == 0
    }

    /// Pipelines and all-to-alls planned whole run as one stream each.
    fn start_whole(&mut self, c: CollectiveId) -> bool {
        if self.start_pipeline_stage(c) {
            return true;
        }
        let Some(x) = self.exchange_of[c.index()] else { return false };
        self.whole_left[c.index()] = 1;
        self.exchanges[x as usize].started = self.events.now();
        self.exchange_probing(x);
        self.note_exchange_sending(x);
        let (bytes, cap) = (self.exchanges[x as usize].pair_bytes, self.exchanges[x as usize].intra_cap);
        let s = self.new_stream(Owner::Exchange(x), u32::MAX, bytes, cap);
        self.start_stream(s);
        true
    }

    /// A failed job's streams still arrive; they move nothing on.
    fn ignores(&self, t: TransferId) -> bool {
        self.jobs.job_failed[self.jobs.job_of(t)]
    }

    fn job_ended(&mut self, _job: JobId) {
        self.work_left -= 1;
    }
}
