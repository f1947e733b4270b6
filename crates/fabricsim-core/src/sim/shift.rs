//! SHIFT (shift-rdma-failover.txt s4.2): each default QP's send-side state
//! machine, at the granularity of messages (every message a signaled work
//! request). Default: messages go to the default QP. When it fails
//! (retries exhausted), the host's steps take `fallback_time` (and cannot
//! end before the backup QPs are set up, `setup_time` into the run): the
//! default QP is reset, and a WRITE_WITH_IMM on the backup QP notifies the
//! receiver; once it completes, the outstanding messages, and those posted
//! meanwhile, are reposted in order on the backup, and new messages go to
//! it (Fallback). Every `probe_interval` an empty write probes the
//! default QP; once one completes, new messages are held back on the
//! default QP (WaitSinked: every message is signaled, so WaitSignaled ends
//! at once) until the backup has completed all it was given; then a
//! notification write goes first on the default QP and, once it completes,
//! the held messages follow (Default). Work requests keep their order.
//!
//! The receive side follows: at a fallback the RECVs the receiver had
//! posted on the default QP and not consumed move to the backup, and at the
//! recovery back. What the requester finds outstanding is every message not
//! wholly acknowledged, so a message that arrived but whose acknowledgement
//! was lost is reposted too, and arrives twice: s4.3's corner cases, counted
//! (a SEND takes a second RECV, a write writes its bytes again).

use std::collections::VecDeque;

use super::{Event, Message, Owner, Simulation};
use crate::ids::{MessageId, QpId};
use crate::nic::ShiftConfig;
use crate::transport::{Transport, Verb, TIMERS};
use crate::units::Time;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Default,
    /// The default QP failed; the host's steps of the fallback run.
    FallingBack,
    /// The receiver is being notified on the backup QP; then the work moves.
    NotifyingBackup,
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
    /// While Default: messages the receiver completed, latest last, of which
    /// the requester may not yet have had every acknowledgement.
    arrived: VecDeque<(MessageId, u64)>,
    /// When the default QP's error completion came, while falling back.
    failed_at: Time,
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
    /// Reposted writes part or all of which the receiver had already
    /// placed, and those bytes: written twice, which breaks the write-once
    /// flags of NCCL's LL128 protocol (s4.3).
    pub rewritten_messages: u64,
    pub rewritten_bytes: u64,
    /// Reposted SENDs that had already taken a RECV at the receiver: each
    /// takes another, one meant for a later SEND, or finds none and draws
    /// an RNR NAK (s4.3).
    pub resent_sends: u64,
    /// Fallbacks that reached the backup, and summed over them the time
    /// from the error completion to the reposts there.
    pub fallbacks_done: u64,
    pub fallback_time_total: Time,
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
            pairs[default.0 as usize] = Some(Pair {
                backup,
                state: State::Default,
                held: VecDeque::new(),
                probing: false,
                arrived: VecDeque::new(),
                failed_at: Time::ZERO,
            });
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
            State::FallingBack | State::NotifyingBackup | State::WaitSinked | State::Notifying => {
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
                (pair.state, pair.failed_at) = (State::FallingBack, self.events.now());
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
            (State::Fallback, false) | (State::FallingBack | State::NotifyingBackup, _) => {}
        }
        true
    }

    /// The receiver of QP `q` placed `bytes` more.
    pub(super) fn shift_placed(&mut self, q: QpId, bytes: u64) {
        if let Some(placed) = self.shift.as_mut().and_then(|s| s.placed.get_mut(q.0 as usize)) {
            *placed += bytes;
        }
    }

    /// Message `m`, `bytes` of it, completed at QP `q`'s receiver.
    pub(super) fn shift_delivered(&mut self, q: QpId, m: MessageId, bytes: u64) {
        let unacknowledged = self.qps[q].transport.unacknowledged_messages();
        let pending = self.qps[q].messages.len();
        let owned = matches!(self.messages[m].owner, Owner::Flow(_) | Owner::Transfer(_));
        let Some(shift) = self.shift.as_mut() else { return };
        let placed = &mut shift.placed[q.0 as usize];
        *placed = placed.saturating_sub(bytes);
        let Some(pair) = shift.pair(q) else { return };
        if pair.state != State::Default {
            pair.arrived.clear();
            return;
        }
        if owned {
            pair.arrived.push_back((m, bytes));
        }
        // Those acknowledged since are done with.
        let keep = unacknowledged.saturating_sub(pending);
        while pair.arrived.len() > keep {
            pair.arrived.pop_front();
        }
    }

    /// The host's steps of the fallback are done: the default QP is reset,
    /// its outstanding messages wait ahead of those posted meanwhile, the
    /// receiver's RECVs move to the backup, and the receiver is notified.
    pub(super) fn on_shift_fallback(&mut self, q: QpId) {
        // A job that restarted since has its QP anew.
        if self.shift.as_mut().and_then(|s| s.pair(q)).is_none_or(|p| p.state != State::FallingBack) {
            return;
        }
        let unacknowledged = self.qps[q].transport.unacknowledged_messages();
        let recvs = self.qps[q].transport.take_recvs();
        let outstanding: Vec<(MessageId, u64)> = self.qps[q].messages.drain(..).collect();
        self.reset_qp(q);
        let shift = self.shift.as_mut().expect("SHIFT is on");
        let pair = shift.pair(q).expect("a default QP");
        pair.state = State::NotifyingBackup;
        let (backup, held) = (pair.backup, std::mem::take(&mut pair.held));
        // Arrived, but not all of it acknowledged: the requester cannot
        // tell these from the lost ones.
        let mut arrived = std::mem::take(&mut pair.arrived);
        let duplicates = arrived.split_off(arrived.len().saturating_sub(unacknowledged - outstanding.len()));
        let counters = &mut shift.counters;
        counters.reposted_messages += (duplicates.len() + outstanding.len()) as u64;
        counters.reposted_bytes += duplicates.iter().chain(&outstanding).map(|&(_, b)| b).sum::<u64>();
        let partial = std::mem::take(&mut shift.placed[q.0 as usize]);
        let head = outstanding.first().filter(|_| partial > 0).map(|&(m, _)| (m, partial));
        for &(m, bytes) in duplicates.iter().chain(&head) {
            match self.messages[m].verb {
                Verb::Send => counters.resent_sends += 1,
                Verb::Write | Verb::WriteImm => {
                    counters.rewritten_messages += 1;
                    counters.rewritten_bytes += bytes;
                }
                // Read again, the same bytes land in the same place.
                Verb::Read => {}
            }
        }
        // The receiver's RECVs follow the SENDs (s4.2.2), before them.
        self.qps[backup].transport.post_recvs(recvs);
        let mut waiting = VecDeque::with_capacity(duplicates.len() + outstanding.len() + held.len());
        for (m, bytes) in duplicates {
            let verb = self.messages[m].verb;
            waiting
                .push_back((self.messages.push(Message { owner: Owner::ShiftDuplicate, parts_left: 1, verb }), bytes));
        }
        waiting.extend(outstanding);
        waiting.extend(held);
        self.shift.as_mut().and_then(|s| s.pair(q)).expect("a default QP").held = waiting;
        self.post_control_write(backup, Owner::ShiftFallbackNotify(q), Verb::WriteImm);
    }

    /// The receiver knows: the waiting messages go to the backup in order.
    fn on_backup_notified(&mut self, q: QpId) {
        let now = self.events.now();
        let shift = self.shift.as_mut().expect("SHIFT is on");
        let probe_interval = shift.cfg.probe_interval;
        let Some(pair) = shift.pair(q).filter(|p| p.state == State::NotifyingBackup) else { return };
        pair.state = State::Fallback;
        let (backup, waiting, failed_at) = (pair.backup, std::mem::take(&mut pair.held), pair.failed_at);
        shift.counters.fallbacks_done += 1;
        shift.counters.fallback_time_total += now - failed_at;
        for (id, bytes) in waiting {
            self.shift_repost(backup, id, bytes);
        }
        self.events.schedule_in(probe_interval, Event::ShiftProbe(q));
        self.job_learns_of_fallback(q);
    }

    /// Backup QP `q` failed: messages waiting for its default QP's
    /// fallback notification are lost with it (returned, to be failed).
    pub(super) fn shift_stranded(&mut self, q: QpId) -> Vec<MessageId> {
        let Some(shift) = self.shift.as_mut() else { return Vec::new() };
        let Some(default) = shift.owner_of_backup(q) else { return Vec::new() };
        let pair = shift.pair(default).expect("a default QP");
        if pair.state != State::NotifyingBackup {
            return Vec::new();
        }
        pair.state = State::Fallback;
        pair.held.drain(..).map(|(m, _)| m).collect()
    }

    /// Time to probe the default path with an empty write.
    pub(super) fn on_shift_probe(&mut self, q: QpId) {
        let shift = self.shift.as_mut().expect("SHIFT is on");
        let Some(pair) = shift.pair(q) else { return };
        if pair.state != State::Fallback || pair.probing {
            return;
        }
        pair.probing = true;
        shift.counters.probes += 1;
        self.post_control_write(q, Owner::ShiftProbe(q), Verb::Write);
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
                let (backup, held) = (pair.backup, std::mem::take(&mut pair.held));
                let recvs = self.qps[backup].transport.take_recvs();
                self.qps[q].transport.post_recvs(recvs);
                for (id, bytes) in held {
                    self.shift_repost(q, id, bytes);
                }
            }
            Owner::ShiftFallbackNotify(q) => self.on_backup_notified(q),
            Owner::Flow(_) | Owner::Transfer(_) | Owner::ShiftDuplicate => unreachable!("not a SHIFT write"),
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
            self.post_control_write(default, Owner::ShiftNotify(default), Verb::WriteImm);
        }
    }

    /// Default QP `q`'s job aborted: its backup drops what it carried for
    /// it (destroyed like the job's own QPs) and SHIFT forgets its state.
    pub(super) fn shift_abort(&mut self, q: QpId) {
        let Some(pair) = self.shift.as_mut().and_then(|s| s.pair(q)) else { return };
        (pair.state, pair.probing) = (State::Default, false);
        pair.held.clear();
        pair.arrived.clear();
        let backup = pair.backup;
        self.destroy_qp(backup);
    }

    /// The job of default QP `old` restarted on QP `new` (a new QPN between
    /// the same NICs): the backup, made usable again, backs `new`.
    pub(super) fn shift_renamed(&mut self, old: QpId, new: QpId) {
        let Some(shift) = self.shift.as_mut() else { return };
        let Some(pair) = shift.pairs.get_mut(old.0 as usize).and_then(Option::take) else { return };
        let (backup, slot) = (pair.backup, new.0 as usize);
        if shift.pairs.len() <= slot {
            shift.pairs.resize_with(slot + 1, || None);
            shift.placed.resize(slot + 1, 0);
        }
        shift.pairs[slot] = Some(Pair { state: State::Default, probing: false, ..pair });
        shift.default_of[backup.0 as usize] = Some(new);
        self.reset_qp(backup);
    }

    fn shift_repost(&mut self, q: QpId, id: MessageId, bytes: u64) {
        let verb = self.messages[id].verb;
        self.post_on_qp(q, id, bytes, verb);
    }

    /// SHIFT's own one-byte write on QP `q` (an empty write on the wire):
    /// a probe, or with immediate a notification.
    fn post_control_write(&mut self, q: QpId, owner: Owner, verb: Verb) {
        let id = self.messages.push(Message { owner, parts_left: 1, verb });
        self.post_on_qp(q, id, 1, verb);
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
