//! Running jobs: phases start when the phases they follow have finished;
//! a collective's transfers start when the transfers they wait for have
//! completed (a rank forwards data only after it has received it); compute
//! phases hold for their duration; transfers between GPUs of one host go
//! over the intra-host link instead of the network.

use super::{Event, Owner, Simulation};
use crate::ids::{ConnectionId, JobId, TransferId};
use crate::units::Time;
use crate::workload::program::Program;

/// The program and its run-time state.
pub(super) struct Jobs {
    pub program: Program,
    /// Connection of each transfer; none for one inside a host.
    pub transfer_conn: Vec<Option<ConnectionId>>,
    /// Transfers waiting for each transfer (`dependents[dep_start[t]..dep_start[t + 1]]`).
    pub dependents: Vec<u32>,
    pub dep_start: Vec<u32>,
    pub deps_left: Vec<u32>,
    pub ready: Vec<Option<Time>>,
    /// When a transfer was posted: when it was ready, or later if it waited
    /// for a buffer slot.
    pub posted: Vec<Option<Time>>,
    pub done: Vec<Option<Time>>,
    pub collective_left: Vec<u32>,
    pub collective_start: Vec<Option<Time>>,
    pub collective_end: Vec<Option<Time>>,
    pub collective_ideal: Vec<Time>,
    /// Phases waiting for each phase.
    pub phase_dependents: Vec<Vec<u32>>,
    pub phase_deps_left: Vec<u32>,
    pub phase_left: Vec<u32>,
    pub phase_start: Vec<Option<Time>>,
    pub phase_end: Vec<Option<Time>>,
    pub job_phases_left: Vec<u32>,
    pub job_end: Vec<Option<Time>>,
    pub job_failed: Vec<bool>,
    /// When each GPU's intra-host port is free again, by NIC node.
    pub gpu_busy: Vec<Time>,
    /// Transfers posted and not yet arrived, per connection, and the ready
    /// transfers waiting for one of them to free a buffer slot.
    pub conn_in_flight: Vec<u32>,
    pub conn_waiting: Vec<std::collections::VecDeque<TransferId>>,
}

impl Jobs {
    pub fn new(program: Program, transfer_conn: Vec<Option<ConnectionId>>, nodes: usize, connections: usize) -> Jobs {
        let t = program.transfers.len();
        let mut counts = vec![0u32; t + 1];
        for tr in &program.transfers {
            for &d in &tr.deps {
                counts[d as usize + 1] += 1;
            }
        }
        for i in 0..t {
            counts[i + 1] += counts[i];
        }
        let dep_start = counts.clone();
        let mut dependents = vec![0u32; dep_start[t] as usize];
        let mut fill = counts;
        for (i, tr) in program.transfers.iter().enumerate() {
            for &d in &tr.deps {
                dependents[fill[d as usize] as usize] = i as u32;
                fill[d as usize] += 1;
            }
        }
        let mut phase_dependents = vec![Vec::new(); program.phases.len()];
        for (p, phase) in program.phases.iter().enumerate() {
            for &a in &phase.after {
                phase_dependents[a as usize].push(p as u32);
            }
        }
        Jobs {
            deps_left: program.transfers.iter().map(|t| t.deps.len() as u32).collect(),
            ready: vec![None; t],
            posted: vec![None; t],
            done: vec![None; t],
            collective_left: program.collectives.iter().map(|c| c.count).collect(),
            collective_start: vec![None; program.collectives.len()],
            collective_end: vec![None; program.collectives.len()],
            collective_ideal: vec![Time::ZERO; program.collectives.len()],
            phase_deps_left: program.phases.iter().map(|p| p.after.len() as u32).collect(),
            phase_left: program.phases.iter().map(|p| p.collectives.len().max(1) as u32).collect(),
            phase_start: vec![None; program.phases.len()],
            phase_end: vec![None; program.phases.len()],
            job_phases_left: program.jobs.iter().map(|j| j.phases.len() as u32).collect(),
            job_end: vec![None; program.jobs.len()],
            job_failed: vec![false; program.jobs.len()],
            gpu_busy: vec![Time::ZERO; nodes],
            conn_in_flight: vec![0; connections],
            conn_waiting: vec![Default::default(); connections],
            phase_dependents,
            dependents,
            dep_start,
            transfer_conn,
            program,
        }
    }

    /// Payload the jobs move, network and intra-host.
    pub fn total_bytes(&self) -> u64 {
        self.program.transfers.iter().map(|t| t.bytes).sum()
    }
}

impl Simulation {
    pub(super) fn on_job_start(&mut self, job: JobId) {
        let phases = self.jobs.program.jobs[job.0 as usize].phases.clone();
        for p in phases {
            if self.jobs.phase_deps_left[p as usize] == 0 {
                self.start_phase(p);
            }
        }
    }

    fn start_phase(&mut self, p: u32) {
        let now = self.now();
        self.jobs.phase_start[p as usize] = Some(now);
        let phase = &self.jobs.program.phases[p as usize];
        if let Some(d) = phase.compute {
            self.events.schedule(now + d, Event::ComputeDone(p));
            return;
        }
        for c in phase.collectives.clone() {
            self.jobs.collective_start[c as usize] = Some(now);
            let run = &self.jobs.program.collectives[c as usize];
            let (first, count) = (run.first, run.count);
            if count == 0 {
                self.collective_done(c);
                continue;
            }
            for t in first..first + count {
                if self.jobs.deps_left[t as usize] == 0 {
                    self.start_transfer(TransferId(t));
                }
            }
        }
    }

    fn start_transfer(&mut self, id: TransferId) {
        let (now, t) = (self.now(), id.0);
        self.jobs.ready[t as usize] = Some(now);
        let transfer = &self.jobs.program.transfers[t as usize];
        if let Some(conn) = self.jobs.transfer_conn[t as usize] {
            let credits = self.jobs.program.collectives[transfer.collective as usize].credits;
            if self.jobs.conn_in_flight[conn.0 as usize] < credits {
                self.jobs.conn_in_flight[conn.0 as usize] += 1;
                self.jobs.posted[t as usize] = Some(now);
                self.post_message(conn, transfer.bytes, Owner::Transfer(id), true);
            } else {
                self.jobs.conn_waiting[conn.0 as usize].push_back(id);
            }
            return;
        }
        let job =
            self.jobs.program.phases[self.jobs.program.collectives[transfer.collective as usize].phase as usize].job;
        let src = self.jobs.program.jobs[job as usize].nics[transfer.src_rank as usize];
        self.jobs.posted[t as usize] = Some(now);
        let link = &self.scenario.intra_host;
        let busy = &mut self.jobs.gpu_busy[src.0 as usize];
        let sent = (*busy).max(now) + link.rate.tx_time(transfer.bytes);
        *busy = sent;
        self.events.schedule(sent + link.latency, Event::IntraHostDone(id));
    }

    /// A transfer's last byte arrived.
    pub(super) fn transfer_done(&mut self, id: TransferId) {
        let t = id.0;
        self.jobs.done[t as usize] = Some(self.now());
        if let Some(conn) = self.jobs.transfer_conn[t as usize] {
            // The slot frees: the oldest waiting transfer takes it.
            self.jobs.conn_in_flight[conn.0 as usize] -= 1;
            if let Some(next) = self.jobs.conn_waiting[conn.0 as usize].pop_front() {
                self.jobs.conn_in_flight[conn.0 as usize] += 1;
                self.jobs.posted[next.0 as usize] = Some(self.now());
                let bytes = self.jobs.program.transfers[next.0 as usize].bytes;
                self.post_message(conn, bytes, Owner::Transfer(next), true);
            }
        }
        let (from, to) = (self.jobs.dep_start[t as usize], self.jobs.dep_start[t as usize + 1]);
        for i in from..to {
            let d = self.jobs.dependents[i as usize];
            self.jobs.deps_left[d as usize] -= 1;
            if self.jobs.deps_left[d as usize] == 0 {
                self.start_transfer(TransferId(d));
            }
        }
        let c = self.jobs.program.transfers[t as usize].collective;
        self.jobs.collective_left[c as usize] -= 1;
        if self.jobs.collective_left[c as usize] == 0 {
            self.collective_done(c);
        }
    }

    fn collective_done(&mut self, c: u32) {
        self.jobs.collective_end[c as usize] = Some(self.now());
        let p = self.jobs.program.collectives[c as usize].phase;
        self.phase_part_done(p);
    }

    pub(super) fn phase_part_done(&mut self, p: u32) {
        self.jobs.phase_left[p as usize] -= 1;
        if self.jobs.phase_left[p as usize] > 0 {
            return;
        }
        self.jobs.phase_end[p as usize] = Some(self.now());
        for q in self.jobs.phase_dependents[p as usize].clone() {
            self.jobs.phase_deps_left[q as usize] -= 1;
            if self.jobs.phase_deps_left[q as usize] == 0 {
                self.start_phase(q);
            }
        }
        let job = self.jobs.program.phases[p as usize].job as usize;
        self.jobs.job_phases_left[job] -= 1;
        if self.jobs.job_phases_left[job] == 0 {
            self.jobs.job_end[job] = Some(self.now());
            self.work_left -= 1;
        }
    }

    /// A QP of a transfer failed: its job can never finish.
    pub(super) fn transfer_failed(&mut self, t: TransferId) {
        let c = self.jobs.program.transfers[t.0 as usize].collective;
        let job = self.jobs.program.phases[self.jobs.program.collectives[c as usize].phase as usize].job as usize;
        if !self.jobs.job_failed[job] && self.jobs.job_end[job].is_none() {
            self.jobs.job_failed[job] = true;
            self.work_left -= 1;
        }
    }
}
