//! Running jobs: phases start when the phases they follow have finished;
//! a collective's transfers start when the transfers they wait for have
//! completed (a rank forwards data only after it has received it); compute
//! phases hold for their duration; transfers between GPUs of one host go
//! over the intra-host link instead of the network.

use super::{Event, Owner, Simulation};
use crate::ids::{Arena, CollectiveId, ConnectionId, Id, JobId, PhaseId, QpId, TransferId};
use crate::units::Time;
use crate::workload::program::Program;

/// The program and its run-time state.
pub(crate) struct Jobs {
    pub program: Program,
    /// Connection of each transfer; none for one inside a host.
    pub transfer_conn: Arena<TransferId, Option<ConnectionId>>,
    /// Transfers waiting for each transfer t: `dependents[dep_start[t]..dep_start[t + 1]]`
    /// (offsets by transfer index, one list for all transfers).
    pub dependents: Vec<TransferId>,
    pub dep_start: Vec<u32>,
    pub deps_left: Arena<TransferId, u32>,
    pub ready: Arena<TransferId, Option<Time>>,
    /// When a transfer was posted: when it was ready, or later if it waited
    /// for a buffer slot.
    pub posted: Arena<TransferId, Option<Time>>,
    pub done: Arena<TransferId, Option<Time>>,
    pub collective_left: Arena<CollectiveId, u32>,
    pub collective_start: Arena<CollectiveId, Option<Time>>,
    pub collective_end: Arena<CollectiveId, Option<Time>>,
    pub collective_ideal: Arena<CollectiveId, Time>,
    /// Phases waiting for each phase.
    pub phase_dependents: Arena<PhaseId, Vec<PhaseId>>,
    pub phase_deps_left: Arena<PhaseId, u32>,
    pub phase_left: Arena<PhaseId, u32>,
    pub phase_start: Arena<PhaseId, Option<Time>>,
    pub phase_end: Arena<PhaseId, Option<Time>>,
    pub job_phases_left: Arena<JobId, u32>,
    pub job_end: Arena<JobId, Option<Time>>,
    pub job_failed: Arena<JobId, bool>,
    /// When each GPU's intra-host port is free again, by NIC node.
    pub gpu_busy: Vec<Time>,
    /// Transfers posted and not yet arrived, per connection, and the ready
    /// transfers waiting for one of them to free a buffer slot.
    pub conn_in_flight: Arena<ConnectionId, u32>,
    pub conn_waiting: Arena<ConnectionId, std::collections::VecDeque<TransferId>>,
    /// When each running compute phase, and each intra-host transfer in
    /// flight, is due: a job that restarts leaves their events behind.
    pub compute_due: Arena<PhaseId, Time>,
    pub intra_due: Arena<TransferId, Time>,
    /// Each job's connections, torn down when it aborts.
    pub job_connections: Arena<JobId, Vec<ConnectionId>>,
    /// Since when an aborted job waits to restart; its restarts so far and
    /// the time it spent halted.
    pub halted_since: Arena<JobId, Option<Time>>,
    /// A SHIFT fallback told the job to stop at its next checkpoint.
    pub stop_at_checkpoint: Arena<JobId, bool>,
    pub restarts: Arena<JobId, u32>,
    pub halted: Arena<JobId, Time>,
}

impl Jobs {
    pub fn new(
        program: Program,
        transfer_conn: Arena<TransferId, Option<ConnectionId>>,
        nodes: usize,
        connections: usize,
    ) -> Jobs {
        let t = program.transfers.len();
        let mut counts = vec![0u32; t + 1];
        for tr in &program.transfers {
            for &d in &tr.deps {
                counts[d.index() + 1] += 1;
            }
        }
        for i in 0..t {
            counts[i + 1] += counts[i];
        }
        let dep_start = counts.clone();
        // Every slot is overwritten below.
        let mut dependents = vec![TransferId(0); dep_start[t] as usize];
        let mut fill = counts;
        for (id, tr) in program.transfers.enumerate() {
            for &d in &tr.deps {
                dependents[fill[d.index()] as usize] = id;
                fill[d.index()] += 1;
            }
        }
        let mut phase_dependents: Arena<PhaseId, Vec<PhaseId>> = vec![Vec::new(); program.phases.len()].into();
        for (p, phase) in program.phases.enumerate() {
            for &a in &phase.after {
                phase_dependents[a].push(p);
            }
        }
        let (collectives, phases, jobs) = (program.collectives.len(), program.phases.len(), program.jobs.len());
        let mut job_connections: Vec<Vec<ConnectionId>> = vec![Vec::new(); jobs];
        for (t, conn) in transfer_conn.enumerate() {
            if let Some(conn) = *conn {
                let p = &program;
                let job = p.phases[p.collectives[p.transfers[t].collective].phase].job;
                job_connections[job.index()].push(conn);
            }
        }
        for list in job_connections.iter_mut() {
            list.sort_unstable();
            list.dedup();
        }
        Jobs {
            deps_left: program.transfers.iter().map(|t| t.deps.len() as u32).collect(),
            ready: vec![None; t].into(),
            posted: vec![None; t].into(),
            done: vec![None; t].into(),
            collective_left: program.collectives.iter().map(|c| c.transfers.len() as u32).collect(),
            collective_start: vec![None; collectives].into(),
            collective_end: vec![None; collectives].into(),
            collective_ideal: vec![Time::ZERO; collectives].into(),
            phase_deps_left: program.phases.iter().map(|p| p.after.len() as u32).collect(),
            phase_left: program.phases.iter().map(|p| p.collectives.len().max(1) as u32).collect(),
            phase_start: vec![None; phases].into(),
            phase_end: vec![None; phases].into(),
            job_phases_left: program.jobs.iter().map(|j| j.phases.len() as u32).collect(),
            job_end: vec![None; jobs].into(),
            job_failed: vec![false; jobs].into(),
            gpu_busy: vec![Time::ZERO; nodes],
            conn_in_flight: vec![0; connections].into(),
            conn_waiting: vec![Default::default(); connections].into(),
            compute_due: vec![Time::MAX; phases].into(),
            intra_due: vec![Time::MAX; t].into(),
            job_connections: job_connections.into(),
            halted_since: vec![None; jobs].into(),
            stop_at_checkpoint: vec![false; jobs].into(),
            restarts: vec![0; jobs].into(),
            halted: vec![Time::ZERO; jobs].into(),
            phase_dependents,
            dependents,
            dep_start,
            transfer_conn,
            program,
        }
    }

    /// Payload the jobs move, network and intra-host.
    pub fn total_bytes(&self) -> u64 {
        self.program.transfers.iter().fold(0u64, |sum, t| sum.saturating_add(t.bytes))
    }

    /// The job a transfer belongs to.
    pub fn job_of(&self, t: TransferId) -> JobId {
        self.job_of_collective(self.program.transfers[t].collective)
    }

    pub fn job_of_collective(&self, c: CollectiveId) -> JobId {
        self.program.phases[self.program.collectives[c].phase].job
    }
}

impl Simulation {
    pub(super) fn on_job_start(&mut self, job: JobId) {
        let phases = self.jobs.program.jobs[job].phases;
        for p in phases.iter() {
            if self.jobs.phase_deps_left[p] == 0 {
                self.start_phase(p);
            }
        }
    }

    fn start_phase(&mut self, p: PhaseId) {
        let now = self.now();
        self.jobs.phase_start[p] = Some(now);
        let phase = &self.jobs.program.phases[p];
        if let Some(d) = phase.compute {
            self.jobs.compute_due[p] = now + d;
            self.events.schedule(now + d, Event::ComputeDone(p));
            return;
        }
        for c in phase.collectives.clone() {
            self.jobs.collective_start[c] = Some(now);
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

    fn start_transfer(&mut self, t: TransferId) {
        let now = self.now();
        self.jobs.ready[t] = Some(now);
        let transfer = &self.jobs.program.transfers[t];
        if let Some(conn) = self.jobs.transfer_conn[t] {
            let collective = &self.jobs.program.collectives[transfer.collective];
            if self.jobs.conn_in_flight[conn] < collective.credits {
                self.jobs.conn_in_flight[conn] += 1;
                self.jobs.posted[t] = Some(now);
                self.post_message(conn, transfer.bytes, Owner::Transfer(t), collective.verb);
            } else {
                self.jobs.conn_waiting[conn].push_back(t);
            }
            return;
        }
        let src = self.jobs.program.jobs[self.jobs.job_of(t)].nics[transfer.src_rank as usize];
        self.jobs.posted[t] = Some(now);
        let link = &self.scenario.intra_host;
        let busy = &mut self.jobs.gpu_busy[src.0 as usize];
        let sent = (*busy).max(now) + link.rate.tx_time(transfer.bytes);
        *busy = sent;
        self.jobs.intra_due[t] = sent + link.latency;
        self.events.schedule(sent + link.latency, Event::IntraHostDone(t));
    }

    /// A compute phase's time is up, unless its job restarted since.
    pub(super) fn on_compute_done(&mut self, p: PhaseId) {
        if std::mem::replace(&mut self.jobs.compute_due[p], Time::MAX) == self.now() {
            self.phase_part_done(p);
        }
    }

    /// An intra-host transfer arrived, unless its job restarted since.
    pub(super) fn on_intra_host_done(&mut self, t: TransferId) {
        if std::mem::replace(&mut self.jobs.intra_due[t], Time::MAX) == self.now() {
            self.transfer_done(t);
        }
    }

    /// A transfer's last byte arrived.
    pub(super) fn transfer_done(&mut self, t: TransferId) {
        self.jobs.done[t] = Some(self.now());
        if let Some(conn) = self.jobs.transfer_conn[t] {
            // The slot frees: the oldest waiting transfer takes it.
            self.jobs.conn_in_flight[conn] -= 1;
            if let Some(next) = self.jobs.conn_waiting[conn].pop_front() {
                self.jobs.conn_in_flight[conn] += 1;
                self.jobs.posted[next] = Some(self.now());
                let transfer = &self.jobs.program.transfers[next];
                let (bytes, verb) = (transfer.bytes, self.jobs.program.collectives[transfer.collective].verb);
                self.post_message(conn, bytes, Owner::Transfer(next), verb);
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
        self.jobs.collective_end[c] = Some(self.now());
        let p = self.jobs.program.collectives[c].phase;
        self.phase_part_done(p);
    }

    pub(super) fn phase_part_done(&mut self, p: PhaseId) {
        self.jobs.phase_left[p] -= 1;
        if self.jobs.phase_left[p] > 0 {
            return;
        }
        self.jobs.phase_end[p] = Some(self.now());
        let job = self.jobs.program.phases[p].job;
        if self.jobs.stop_at_checkpoint[job] && self.checkpoint_taken(p) {
            self.jobs.stop_at_checkpoint[job] = false;
            self.abort_job(job);
            return;
        }
        for q in self.jobs.phase_dependents[p].clone() {
            self.jobs.phase_deps_left[q] -= 1;
            if self.jobs.phase_deps_left[q] == 0 {
                self.start_phase(q);
            }
        }
        let job = self.jobs.program.phases[p].job;
        self.jobs.job_phases_left[job] -= 1;
        if self.jobs.job_phases_left[job] == 0 {
            self.jobs.job_end[job] = Some(self.now());
            self.work_left -= 1;
        }
    }

    /// A QP of a transfer failed: its job stops for good, or, with a
    /// checkpoint, aborts and restarts from it later.
    pub(super) fn transfer_failed(&mut self, t: TransferId) {
        let job = self.jobs.job_of(t);
        let j = &self.jobs;
        if j.job_failed[job] || j.job_end[job].is_some() || j.halted_since[job].is_some() {
            return;
        }
        if self.jobs.program.jobs[job].checkpoint.is_some() {
            self.abort_job(job);
        } else {
            self.jobs.job_failed[job] = true;
            self.work_left -= 1;
        }
    }

    /// Job `job`, which has a checkpoint, stops: its connections are torn
    /// down, and it restarts from the checkpoint `restart_delay` later.
    fn abort_job(&mut self, job: JobId) {
        let checkpoint = self.jobs.program.jobs[job].checkpoint.expect("a job with a checkpoint");
        self.jobs.halted_since[job] = Some(self.now());
        for c in self.jobs.job_connections[job].clone() {
            for q in self.connections[c].qps.clone() {
                self.destroy_qp(q);
                self.shift_abort(q);
            }
            self.jobs.conn_in_flight[c] = 0;
            self.jobs.conn_waiting[c].clear();
        }
        self.events.schedule_in(checkpoint.restart_delay, Event::JobRestart(job));
    }

    /// Whether phase `p`, just ended, completed an iteration after which a
    /// checkpoint is taken, with more iterations to come.
    fn checkpoint_taken(&self, p: PhaseId) -> bool {
        let (j, phase) = (&self.jobs, &self.jobs.program.phases[p]);
        let plan = &j.program.jobs[phase.job];
        let (k, every) = (phase.iteration, plan.checkpoint.map_or(0, |c| c.every));
        every > 0
            && (k + 1) % every == 0
            && k + 1 < plan.iterations
            && plan.phases.iter().all(|q| j.program.phases[q].iteration != k || j.phase_end[q].is_some())
    }

    /// SHIFT moved QP `q` to its backup: a job of `q` that stops after a
    /// fallback will at its next checkpoint.
    pub(super) fn job_learns_of_fallback(&mut self, q: QpId) {
        for job in self.jobs.program.jobs.ids() {
            let stops = self.jobs.program.jobs[job].checkpoint.is_some_and(|c| c.stop_after_fallback);
            if stops && self.jobs.job_connections[job].iter().any(|&c| self.connections[c].qps.contains(&q)) {
                self.jobs.stop_at_checkpoint[job] = true;
            }
        }
    }

    /// An aborted job starts again from its last checkpoint, on new
    /// connections: the iterations since are run again.
    pub(super) fn on_job_restart(&mut self, job: JobId) {
        let now = self.now();
        let since = self.jobs.halted_since[job].take().expect("a job restarts after it aborted");
        self.jobs.halted[job] += now - since;
        self.jobs.restarts[job] += 1;
        for c in self.jobs.job_connections[job].clone() {
            self.reconnect(c);
        }
        let plan = &self.jobs.program.jobs[job];
        let (phases, iterations, every) = (plan.phases, plan.iterations, plan.checkpoint.map_or(1, |c| c.every));
        // Iterations finished in order, and the checkpoint taken after them.
        let j = &mut self.jobs;
        let p = &j.program;
        let finished = (phases.iter())
            .filter(|&q| j.phase_end[q].is_none())
            .map(|q| p.phases[q].iteration)
            .min()
            .unwrap_or(iterations);
        let from = finished / every * every;
        let rewound: Vec<PhaseId> = phases.iter().filter(|&q| p.phases[q].iteration >= from).collect();
        for &q in &rewound {
            j.phase_start[q] = None;
            j.phase_end[q] = None;
            j.compute_due[q] = Time::MAX;
            j.phase_left[q] = p.phases[q].collectives.len().max(1) as u32;
            for &c in &p.phases[q].collectives {
                j.collective_start[c] = None;
                j.collective_end[c] = None;
                j.collective_left[c] = p.collectives[c].transfers.len() as u32;
                for t in p.collectives[c].transfers.iter() {
                    j.deps_left[t] = p.transfers[t].deps.len() as u32;
                    (j.ready[t], j.posted[t], j.done[t], j.intra_due[t]) = (None, None, None, Time::MAX);
                }
            }
        }
        for &q in &rewound {
            j.phase_deps_left[q] = p.phases[q].after.iter().filter(|&&a| j.phase_end[a].is_none()).count() as u32;
        }
        j.job_phases_left[job] = rewound.len() as u32;
        for q in rewound {
            if self.jobs.phase_deps_left[q] == 0 {
                self.start_phase(q);
            }
        }
    }
}
