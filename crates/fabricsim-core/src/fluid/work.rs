//! The workload in the flow model: flows, and jobs whose phases, collectives
//! and transfers progress as in the packet model (`sim/jobs.rs`), each
//! network message becoming one stream per QP of its connection.

use super::{Event, FluidSimulation, Owner};
use crate::ids::{CollectiveId, Id, JobId, PhaseId, TransferId};
use crate::units::Time;
use crate::workload::split_evenly;

impl FluidSimulation {
    /// Starts `bytes` for `owner` over connection `conn`, striped over its
    /// QPs as the NIC stripes a message; returns the streams started.
    fn post(&mut self, conn: u32, bytes: u64, owner: Owner, rate_limit: Option<crate::units::Rate>) -> u32 {
        let qps = self.connections[conn as usize].clone();
        let mut started = 0;
        for (&q, share) in qps.iter().zip(split_evenly(bytes, qps.len() as u64)) {
            if share == 0 {
                continue;
            }
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
                    self.transfer_done(t);
                }
            }
            Owner::Ring(r) => self.whole_part_arrived(self.rings[r as usize].collective),
            Owner::Exchange(x) => self.whole_part_arrived(self.exchanges[x as usize].collective),
        }
    }

    /// A ring or all-to-all of collective `c`, run whole, arrived.
    fn whole_part_arrived(&mut self, c: CollectiveId) {
        self.whole_left[c.index()] -= 1;
        if self.whole_left[c.index()] == 0 && !self.jobs.job_failed[self.jobs.job_of_collective(c)] {
            self.collective_done(c);
        }
    }

    pub(super) fn flow_failed(&mut self, f: u32) {
        let flow = &mut self.flows[f as usize];
        if !flow.failed && flow.end.is_none() {
            flow.failed = true;
            self.work_left -= 1;
        }
    }

    pub(super) fn on_job_start(&mut self, job: JobId) {
        for p in self.jobs.program.jobs[job].phases.iter() {
            if self.jobs.phase_deps_left[p] == 0 {
                self.start_phase(p);
            }
        }
    }

    fn start_phase(&mut self, p: PhaseId) {
        let now = self.events.now();
        self.jobs.phase_start[p] = Some(now);
        let phase = &self.jobs.program.phases[p];
        if let Some(d) = phase.compute {
            self.jobs.compute_due[p] = now + d;
            self.events.schedule(now + d, Event::ComputeDone(p));
            return;
        }
        for c in phase.collectives.clone() {
            self.jobs.collective_start[c] = Some(now);
            let (first, end) = (self.ring_start[c.index()], self.ring_start[c.index() + 1]);
            if first < end {
                self.whole_left[c.index()] = end - first;
                (first..end).for_each(|r| self.start_ring(r));
                continue;
            }
            if let Some(x) = self.exchange_of[c.index()] {
                self.whole_left[c.index()] = 1;
                let (bytes, cap) = (self.exchanges[x as usize].pair_bytes, self.exchanges[x as usize].intra_cap);
                let s = self.new_stream(Owner::Exchange(x), u32::MAX, bytes, cap);
                self.start_stream(s);
                continue;
            }
            let transfers = self.jobs.program.collectives[c].transfers;
            if transfers.is_empty() {
                self.collective_done(c);
                continue;
            }
            for t in transfers.iter() {
                if self.jobs.deps_left[t] == 0 {
                    self.start_transfer(t);
                }
            }
        }
    }

    /// Ring `r` starts: all its hops at once, as one stream.
    fn start_ring(&mut self, r: u32) {
        self.rings[r as usize].started = self.events.now();
        let ring = &self.rings[r as usize];
        let first_qp = ring.hops.iter().flatten().next().map_or(u32::MAX, |&c| self.connections[c as usize][0]);
        let (bytes, cap) = (ring.bytes(), ring.intra_cap);
        let s = self.new_stream(Owner::Ring(r), first_qp, bytes, cap);
        self.start_stream(s);
    }

    fn start_transfer(&mut self, t: TransferId) {
        let now = self.events.now();
        self.jobs.ready[t] = Some(now);
        let transfer = &self.jobs.program.transfers[t];
        if let Some(conn) = self.jobs.transfer_conn[t] {
            let credits = self.jobs.program.collectives[transfer.collective].credits;
            if self.jobs.conn_in_flight[conn] < credits {
                self.jobs.conn_in_flight[conn] += 1;
                self.post_transfer(t);
            } else {
                self.jobs.conn_waiting[conn].push_back(t);
            }
            return;
        }
        // Between GPUs of one host: the intra-host link, one transfer at a
        // time per sending GPU.
        let src = self.jobs.program.jobs[self.jobs.job_of(t)].nics[transfer.src_rank as usize];
        self.jobs.posted[t] = Some(now);
        let link = &self.scenario.intra_host;
        let busy = &mut self.jobs.gpu_busy[src.0 as usize];
        let sent = (*busy).max(now) + link.rate.tx_time(transfer.bytes);
        *busy = sent;
        self.events.schedule(sent + link.latency, Event::IntraHostDone(t));
    }

    fn post_transfer(&mut self, t: TransferId) {
        self.jobs.posted[t] = Some(self.events.now());
        let conn = self.jobs.transfer_conn[t].expect("a network transfer");
        let bytes = self.jobs.program.transfers[t].bytes;
        let started = self.post(conn.0, bytes, Owner::Transfer(t), None);
        self.transfer_parts[t.index()] = started;
        if started == 0 {
            self.transfer_done(t);
        }
    }

    pub(super) fn on_compute_done(&mut self, p: PhaseId) {
        if std::mem::replace(&mut self.jobs.compute_due[p], Time::MAX) == self.events.now() {
            self.phase_part_done(p);
        }
    }

    pub(super) fn on_intra_host_done(&mut self, t: TransferId) {
        self.transfer_done(t);
    }

    fn transfer_done(&mut self, t: TransferId) {
        if self.jobs.job_failed[self.jobs.job_of(t)] {
            return;
        }
        self.jobs.done[t] = Some(self.events.now());
        if let Some(conn) = self.jobs.transfer_conn[t] {
            // The buffer slot frees: the oldest waiting transfer takes it.
            self.jobs.conn_in_flight[conn] -= 1;
            if let Some(next) = self.jobs.conn_waiting[conn].pop_front() {
                self.jobs.conn_in_flight[conn] += 1;
                self.post_transfer(next);
            }
        }
        let (from, to) = (self.jobs.dep_start[t.index()], self.jobs.dep_start[t.index() + 1]);
        for i in from..to {
            let d = self.jobs.dependents[i as usize];
            self.jobs.deps_left[d] -= 1;
            if self.jobs.deps_left[d] == 0 {
                self.start_transfer(d);
            }
        }
        let c = self.jobs.program.transfers[t].collective;
        self.jobs.collective_left[c] -= 1;
        if self.jobs.collective_left[c] == 0 {
            self.collective_done(c);
        }
    }

    fn collective_done(&mut self, c: CollectiveId) {
        self.jobs.collective_end[c] = Some(self.events.now());
        let p = self.jobs.program.collectives[c].phase;
        self.phase_part_done(p);
    }

    fn phase_part_done(&mut self, p: PhaseId) {
        self.jobs.phase_left[p] -= 1;
        if self.jobs.phase_left[p] > 0 {
            return;
        }
        self.jobs.phase_end[p] = Some(self.events.now());
        for q in self.jobs.phase_dependents[p].clone() {
            self.jobs.phase_deps_left[q] -= 1;
            if self.jobs.phase_deps_left[q] == 0 {
                self.start_phase(q);
            }
        }
        let job = self.jobs.program.phases[p].job;
        self.jobs.job_phases_left[job] -= 1;
        if self.jobs.job_phases_left[job] == 0 {
            self.jobs.job_end[job] = Some(self.events.now());
            self.work_left -= 1;
        }
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
