//! SHIFT (shift-rdma-failover.txt s4.2): each default QP's send-side state
//! machine, at the granularity of messages (every message a signaled work
//! request). Default: messages go to the default QP. When it fails
//! (retries exhausted), the fallback takes `fallback_time` (and cannot end
//! before the backup QPs are set up, `setup_time` into the run); then its
//! outstanding messages, and those posted meanwhile, are reposted in order
//! on the backup QP, the default QP is reset, and new messages go to the
//! backup (Fallback). Every `probe_interval` an empty write probes the
//! default QP; once one completes, new messages are held back on the
//! default QP (WaitSinked: every message is signaled, so WaitSignaled ends
//! at once) until the backup has completed all it was given; then a
//! notification write goes first on the default QP and, once it completes,
//! the held messages follow (Default). Work requests keep their order.

use std::collections::VecDeque;

use super::{Event, Message, Owner, Simulation};
use crate::ids::{MessageId, QpId};
use crate::nic::ShiftConfig;
use crate::transport::TIMERS;
use crate::units::Time;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Default,
    /// The default QP failed; its work moves to the backup at `FallbackDone`.
    FallingBack,
    Fallback,
    /// A probe succeeded: new messages wait until the backup drains.
    WaitSinked,
    /// The backup drained; the notification write is on the default QP.
    Notifying,
}

/// One default QP and its backup.
struct Pair {
    backup: QpId,
    state: State,
    /// Messages posted while falling back (for the backup) or while waiting
    /// for the backup to drain (for the default QP), in order.
    held: VecDeque<(MessageId, u64)>,
    probing: bool,
}

/// What SHIFT did over a run.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct ShiftCounters {
    pub fallbacks: u64,
    pub recoveries: u64,
    pub probes: u64,
    pub failed_probes: u64,
    pub reposted_messages: u64,
    pub reposted_bytes: u64,
    /// Reposted writes part of which the receiver had already placed, and
    /// those bytes: written twice, which breaks the write-once flags of
    /// NCCL's LL128 protocol (s4.3).
    pub rewritten_messages: u64,
    pub rewritten_bytes: u64,
}

pub(super) struct Shift {
    cfg: ShiftConfig,
    /// By default QP id; none for backups and QPs without one.
    pairs: Vec<Option<Pair>>,
    /// By backup QP id, its default QP.
    default_of: Vec<Option<QpId>>,
    /// By QP id, the bytes the receiver placed of messages not yet complete.
    placed: Vec<u64>,
    pub counters: ShiftCounters,
}

impl Shift {
    /// `backups[q]`: the backup of default QP q.
    pub(super) fn new(cfg: ShiftConfig, backups: &[(QpId, QpId)], qps: usize) -> Shift {
        let mut pairs: Vec<Option<Pair>> = (0..qps).map(|_| None).collect();
        let mut default_of = vec![None; qps];
        for &(default, backup) in backups {
            pairs[default.0 as usize] =
                Some(Pair { backup, state: State::Default, held: VecDeque::new(), probing: false });
            default_of[backup.0 as usize] = Some(default);
        }
        Shift { cfg, pairs, default_of, placed: vec![0; qps], counters: ShiftCounters::default() }
    }

    fn pair(&mut self, q: QpId) -> Option<&mut Pair> {
        self.pairs.get_mut(q.0 as usize).and_then(Option::as_mut)
    }

    /// The default QP whose backup is `q`, if any.
    fn owner_of_backup(&self, q: QpId) -> Option<QpId> {
        self.default_of.get(q.0 as usize).copied().flatten()
    }
}

/// Where a message posted on a default QP goes.
pub(super) enum Route {
    Post(QpId),
    Held,
}

impl Simulation {
    /// Where a message meant for QP `q` goes now.
    pub(super) fn shift_route(&mut self, q: QpId, id: MessageId, bytes: u64) -> Route {
        let Some(pair) = self.shift.as_mut().and_then(|s| s.pair(q)) else { return Route::Post(q) };
        match pair.state {
            State::Default => Route::Post(q),
            State::Fallback => Route::Post(pair.backup),
            State::FallingBack | State::WaitSinked | State::Notifying => {
                pair.held.push_back((id, bytes));
                Route::Held
            }
        }
    }

    /// QP `q` failed: SHIFT takes it over when it is a default QP with a
    /// backup (falling back, or a failed probe); false when the failure is
    /// real (a backup, or a QP without one).
    pub(super) fn shift_takes_failure(&mut self, q: QpId) -> bool {
        let Some(shift) = self.shift.as_mut() else { return false };
        let (fallback_time, probe_interval) = (shift.cfg.fallback_time, shift.cfg.probe_interval);
        // The fallback ends once its own steps are done and the backup QP is ready.
        let fallback_done = (self.events.now() + fallback_time).max(shift.cfg.setup_time);
        let Some(pair) = shift.pair(q) else { return false };
        match (pair.state, pair.probing) {
            (State::Default, _) => {
                pair.state = State::FallingBack;
                shift.counters.fallbacks += 1;
                self.events.schedule(fallback_done, Event::ShiftFallback(q));
            }
            (State::Fallback, true) => {
                pair.probing = false;
                shift.counters.failed_probes += 1;
                self.reset_qp(q);
                self.events.schedule_in(probe_interval, Event::ShiftProbe(q));
            }
            // The recovery's notification failed: back to the backup.
            (State::Notifying | State::WaitSinked, _) => {
                let (held, backup) = (std::mem::take(&mut pair.held), pair.backup);
                pair.state = State::Fallback;
                self.reset_qp(q);
                for (id, bytes) in held {
                    self.shift_repost(backup, id, bytes);
                }
                self.events.schedule_in(probe_interval, Event::ShiftProbe(q));
            }
            (State::Fallback, false) | (State::FallingBack, _) => {}
        }
        true
    }

    /// The receiver of QP `q` placed `bytes` more.
    pub(super) fn shift_placed(&mut self, q: QpId, bytes: u64) {
        if let Some(placed) = self.shift.as_mut().and_then(|s| s.placed.get_mut(q.0 as usize)) {
            *placed += bytes;
        }
    }

    /// Messages of `bytes` in all completed on QP `q`.
    pub(super) fn shift_completed(&mut self, q: QpId, bytes: u64) {
        if let Some(placed) = self.shift.as_mut().and_then(|s| s.placed.get_mut(q.0 as usize)) {
            *placed = placed.saturating_sub(bytes);
        }
    }

    /// The fallback is done: the default QP's outstanding messages, then
    /// those posted meanwhile, go to the backup in order.
    pub(super) fn on_shift_fallback(&mut self, q: QpId) {
        let outstanding: Vec<(MessageId, u64)> = self.qps[q].messages.drain(..).collect();
        self.reset_qp(q);
        let shift = self.shift.as_mut().expect("SHIFT is on");
        let probe_interval = shift.cfg.probe_interval;
        let pair = shift.pair(q).expect("a default QP");
        pair.state = State::Fallback;
        let (backup, held) = (pair.backup, std::mem::take(&mut pair.held));
        shift.counters.reposted_messages += outstanding.len() as u64;
        shift.counters.reposted_bytes += outstanding.iter().map(|&(_, b)| b).sum::<u64>();
        let rewritten = std::mem::take(&mut shift.placed[q.0 as usize]);
        if rewritten > 0 {
            shift.counters.rewritten_messages += 1;
            shift.counters.rewritten_bytes += rewritten;
        }
        for (id, bytes) in outstanding.into_iter().chain(held) {
            self.shift_repost(backup, id, bytes);
        }
        self.events.schedule_in(probe_interval, Event::ShiftProbe(q));
    }

    /// Time to probe the default path with an empty write.
    pub(super) fn on_shift_probe(&mut self, q: QpId) {
        let shift = self.shift.as_mut().expect("SHIFT is on");
        let pair = shift.pair(q).expect("a default QP");
        if pair.state != State::Fallback || pair.probing {
            return;
        }
        pair.probing = true;
        shift.counters.probes += 1;
        self.post_control_write(q, Owner::ShiftProbe(q));
    }

    /// A probe or a notification write completed on default QP `q`.
    pub(super) fn shift_write_done(&mut self, owner: Owner) {
        match owner {
            Owner::ShiftProbe(q) => {
                let pair = self.shift.as_mut().and_then(|s| s.pair(q)).expect("a default QP");
                pair.probing = false;
                if pair.state == State::Fallback {
                    pair.state = State::WaitSinked;
                    let backup = pair.backup;
                    self.shift_backup_drained(backup);
                }
            }
            Owner::ShiftNotify(q) => {
                let shift = self.shift.as_mut().expect("SHIFT is on");
                shift.counters.recoveries += 1;
                let pair = shift.pair(q).expect("a default QP");
                pair.state = State::Default;
                for (id, bytes) in std::mem::take(&mut pair.held) {
                    self.shift_repost(q, id, bytes);
                }
            }
            Owner::Flow(_) | Owner::Transfer(_) => unreachable!("not a SHIFT write"),
        }
    }

    /// Messages completed on QP `q`: when it is a backup whose default QP
    /// waits for it to drain and it has, the recovery goes on.
    pub(super) fn shift_backup_drained(&mut self, q: QpId) {
        if self.qps[q].outstanding > 0 {
            return;
        }
        let Some(shift) = self.shift.as_mut() else { return };
        let Some(default) = shift.owner_of_backup(q) else { return };
        let pair = shift.pair(default).expect("a default QP");
        if pair.state == State::WaitSinked {
            pair.state = State::Notifying;
            self.post_control_write(default, Owner::ShiftNotify(default));
        }
    }

    fn shift_repost(&mut self, q: QpId, id: MessageId, bytes: u64) {
        let imm = self.messages[id].imm;
        self.post_on_qp(q, id, bytes, imm);
    }

    /// SHIFT's own one-byte write on QP `q` (an empty write on the wire).
    fn post_control_write(&mut self, q: QpId, owner: Owner) {
        let id = self.messages.push(Message { owner, parts_left: 1, imm: false });
        self.post_on_qp(q, id, 1, false);
    }

    /// Resets QP `q` (an error-state QP made reusable, s4.2.2): a fresh
    /// transport, nothing posted, off every ready list.
    fn reset_qp(&mut self, q: QpId) {
        self.destroy_qp(q);
        let qp = &mut self.qps[q];
        qp.transport = self.qp_factory.build(&self.qp_setups[q]);
        (qp.destroyed, qp.next_send, qp.timers_queued) = (false, Time::ZERO, [Time::MAX; TIMERS]);
    }
}
