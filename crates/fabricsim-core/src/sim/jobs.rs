//! Running jobs: phases start when the phases they follow have finished;
//! a collective's transfers start when the transfers they wait for have
//! completed (a rank forwards data only after it has received it); compute
//! phases hold for their duration; transfers between GPUs of one host go
//! over the intra-host link instead of the network.

use super::{Event, Owner, Simulation};
use crate::ids::{Arena, CollectiveId, ConnectionId, Id, JobId, PhaseId, QpId, TransferId};
use crate::units::Time;
use crate::workload::job::IntraHostConfig;
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

/// What a model does as its jobs progress: keep time, send a transfer's
/// bytes, start a collective whole, end a phase or a job. The progress
/// itself (dependencies, buffer credits, compute phases, the intra-host
/// link, phases and jobs finishing) is the same in the packet and the flow
/// model, and is the functions below.
pub(crate) trait JobHost {
    fn jobs(&mut self) -> &mut Jobs;
    fn time(&self) -> Time;
    fn intra_host(&self) -> &IntraHostConfig;
    fn schedule_compute_done(&mut self, p: PhaseId, at: Time);
    fn schedule_intra_host_done(&mut self, t: TransferId, at: Time);
    /// Sends transfer `t` over `conn`; true when it has nothing to send and
    /// is done at once.
    fn send(&mut self, t: TransferId, conn: ConnectionId) -> bool;
    /// Starts collective `c` whole rather than as its transfers (the flow
    /// model's rings and all-to-alls); false when it runs as transfers.
    fn start_whole(&mut self, _c: CollectiveId) -> bool {
        false
    }
    /// Whether transfer `t`'s completion no longer moves its job on.
    fn ignores(&self, _t: TransferId) -> bool {
        false
    }
    /// Phase `p` ended; false when its job stops there (at a checkpoint).
    fn phase_ended(&mut self, _p: PhaseId) -> bool {
        true
    }
    /// A job's last phase ended.
    fn job_ended(&mut self, job: JobId);
}

/// Job `job` starts: every phase that follows none.
pub(crate) fn start_job(h: &mut impl JobHost, job: JobId) {
    let phases = h.jobs().program.jobs[job].phases;
    for p in phases.iter() {
        if h.jobs().phase_deps_left[p] == 0 {
            start_phase(h, p);
        }
    }
}

pub(crate) fn start_phase(h: &mut impl JobHost, p: PhaseId) {
    let now = h.time();
    h.jobs().phase_start[p] = Some(now);
    if let Some(d) = h.jobs().program.phases[p].compute {
        h.jobs().compute_due[p] = now + d;
        h.schedule_compute_done(p, now + d);
        return;
    }
    for c in h.jobs().program.phases[p].collectives.clone() {
        h.jobs().collective_start[c] = Some(now);
        if h.start_whole(c) {
            continue;
        }
        let transfers = h.jobs().program.collectives[c].transfers;
        if transfers.is_empty() {
            collective_done(h, c);
            continue;
        }
        for t in transfers.iter() {
            if h.jobs().deps_left[t] == 0 {
                start_transfer(h, t);
            }
        }
    }
}

/// Transfer `t`'s data is at its sender: it goes when its connection has a
/// buffer slot, or over the intra-host link, one transfer at a time per
/// sending GPU.
fn start_transfer(h: &mut impl JobHost, t: TransferId) {
    let now = h.time();
    let (rate, latency) = (h.intra_host().rate, h.intra_host().latency);
    let jobs = h.jobs();
    jobs.ready[t] = Some(now);
    if let Some(conn) = jobs.transfer_conn[t] {
        let credits = jobs.program.collectives[jobs.program.transfers[t].collective].credits;
        if jobs.conn_in_flight[conn] < credits {
            jobs.conn_in_flight[conn] += 1;
            post(h, t, conn);
        } else {
            jobs.conn_waiting[conn].push_back(t);
        }
        return;
    }
    let transfer = &jobs.program.transfers[t];
    let (src, bytes) = (jobs.program.jobs[jobs.job_of(t)].nics[transfer.src_rank as usize], transfer.bytes);
    jobs.posted[t] = Some(now);
    let busy = &mut jobs.gpu_busy[src.0 as usize];
    let sent = (*busy).max(now) + rate.tx_time(bytes);
    *busy = sent;
    jobs.intra_due[t] = sent + latency;
    h.schedule_intra_host_done(t, sent + latency);
}

fn post(h: &mut impl JobHost, t: TransferId, conn: ConnectionId) {
    let now = h.time();
    h.jobs().posted[t] = Some(now);
    if h.send(t, conn) {
        transfer_done(h, t);
    }
}

/// A compute phase's time is up, unless its job restarted since.
pub(crate) fn compute_done(h: &mut impl JobHost, p: PhaseId) {
    let now = h.time();
    if std::mem::replace(&mut h.jobs().compute_due[p], Time::MAX) == now {
        phase_part_done(h, p);
    }
}

/// An intra-host transfer arrived, unless its job restarted since.
pub(crate) fn intra_host_done(h: &mut impl JobHost, t: TransferId) {
    let now = h.time();
    if std::mem::replace(&mut h.jobs().intra_due[t], Time::MAX) == now {
        transfer_done(h, t);
    }
}

/// A transfer's last byte arrived: its buffer slot frees, the transfers
/// waiting for it may start, and its collective may be done.
pub(crate) fn transfer_done(h: &mut impl JobHost, t: TransferId) {
    if h.ignores(t) {
        return;
    }
    let now = h.time();
    h.jobs().done[t] = Some(now);
    if let Some(conn) = h.jobs().transfer_conn[t] {
        // The slot frees: the oldest waiting transfer takes it.
        h.jobs().conn_in_flight[conn] -= 1;
        if let Some(next) = h.jobs().conn_waiting[conn].pop_front() {
            h.jobs().conn_in_flight[conn] += 1;
            post(h, next, conn);
        }
    }
    let (from, to) = (h.jobs().dep_start[t.index()], h.jobs().dep_start[t.index() + 1]);
    for i in from..to {
        let jobs = h.jobs();
        let d = jobs.dependents[i as usize];
        jobs.deps_left[d] -= 1;
        if jobs.deps_left[d] == 0 {
            start_transfer(h, d);
        }
    }
    let jobs = h.jobs();
    let c = jobs.program.transfers[t].collective;
    jobs.collective_left[c] -= 1;
    if jobs.collective_left[c] == 0 {
        collective_done(h, c);
    }
}

pub(crate) fn collective_done(h: &mut impl JobHost, c: CollectiveId) {
    let now = h.time();
    h.jobs().collective_end[c] = Some(now);
    let p = h.jobs().program.collectives[c].phase;
    phase_part_done(h, p);
}

fn phase_part_done(h: &mut impl JobHost, p: PhaseId) {
    let now = h.time();
    let jobs = h.jobs();
    jobs.phase_left[p] -= 1;
    if jobs.phase_left[p] > 0 {
        return;
    }
    jobs.phase_end[p] = Some(now);
    if !h.phase_ended(p) {
        return;
    }
    for q in h.jobs().phase_dependents[p].clone() {
        let jobs = h.jobs();
        jobs.phase_deps_left[q] -= 1;
        if jobs.phase_deps_left[q] == 0 {
            start_phase(h, q);
        }
    }
    let jobs = h.jobs();
    let job = jobs.program.phases[p].job;
    jobs.job_phases_left[job] -= 1;
    if jobs.job_phases_left[job] == 0 {
        jobs.job_end[job] = Some(now);
        h.job_ended(job);
    }
}

impl JobHost for Simulation {
    fn jobs(&mut self) -> &mut Jobs {
        &mut self.jobs
    }

    fn time(&self) -> Time {
        self.now()
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

    fn send(&mut self, t: TransferId, conn: ConnectionId) -> bool {
        let transfer = &self.jobs.program.transfers[t];
        let (bytes, verb) = (transfer.bytes, self.jobs.program.collectives[transfer.collective].verb);
        self.post_message(conn, bytes, Owner::Transfer(t), verb);
        false
    }

    fn phase_ended(&mut self, p: PhaseId) -> bool {
        let job = self.jobs.program.phases[p].job;
        if self.jobs.stop_at_checkpoint[job] && self.checkpoint_taken(p) {
            self.jobs.stop_at_checkpoint[job] = false;
            self.abort_job(job);
            return false;
        }
        true
    }

    fn job_ended(&mut self, _job: JobId) {
        self.work_left -= 1;
    }
}

impl Simulation {
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
                start_phase(self, q);
            }
        }
    }
}
