//! What each action does to the state, one method a kind of step: the coordinator's
//! prepares, completes and finalize, a native commit, a replay, a resolver, the sweeper, the
//! staged commit's answer, inquiries and recovery. [`TwoPhaseCommit::step`] dispatches here.

use twopc_core::coordinator::CommitMode;
use twopc_core::message::Inquiry;
use twopc_core::rules::{
    self, AfterLostSwap, Heat, NativeFinding, NativeStep, OwnerRecord, Path, PrepareStep, Recovery,
    Reply, Resolution, StagedDecision,
};
use twopc_core::status::{Decision, TxStatus};

use crate::participant::{self, Prepare, Upkeep, Variant};
use crate::state::{Coordinator, Item, Op, State, Tx};

use super::{
    Action, TwoPhaseCommit, abandon, begin, crash, decide, deliver_stage, expire, overdue_recovery,
    send_completes, send_prepares, swap,
};

impl<const TXS: usize, const ITEMS: usize> TwoPhaseCommit<TXS, ITEMS> {
    pub(super) fn step_only(&self, state: State<TXS, ITEMS>, action: Action) -> State<TXS, ITEMS> {
        match action {
            // A key's later transaction begins only once the earlier one's record is gone.
            Action::Begin(t) | Action::Stage(t) | Action::Native(t)
                if self.waits_for_expiry(&state, t) =>
            {
                state
            }
            Action::Begin(t) if !self.staged => begin(state, t),
            Action::Begin(_) => state,
            Action::SendPrepares(t) => send_prepares(state, t),
            Action::Decide(t, d) => decide(state, t, d),
            Action::Stage(t) => self.stage(state, t),
            Action::DeliverStage(t) => deliver_stage(state, t, self.keyed(t)),
            Action::ExpireRecord(t) => self.expire_record(state, t),
            Action::Retire(i, u) => self.retire(state, i, u),
            Action::Answer(t) => self.answer(state, t),
            Action::Inquire(t, i, prevent, u) => self.inquire(state, t, i, prevent, u),
            Action::RecoverDecide(t) => self.recover_decide(state, t),
            Action::Replay(t) => self.replay(state, t),
            Action::Native(t) => self.native_commit(state, t),
            Action::Cool(i) => self.cool(state, i),
            Action::Abandon(t) => abandon(state, t),
            Action::SendCompletes(t) => send_completes(state, t),
            Action::Finalize(t) => self.finalize(state, t),
            Action::Crash(t) => crash(state, t),
            Action::DeliverPrepare(t, i) => self.deliver_prepare(state, t, i),
            Action::DeliverComplete(t, i, u) => self.deliver_complete(state, t, i, u),
            Action::Expire(t) => expire(state, t),
            Action::Resolve(i, t, u) => self.resolve(state, i, t, u),
            Action::SweepAbort(t) => self.sweep_abort(state, t),
            Action::SweepComplete(t, i, u) => self.sweep_complete(state, t, i, u),
            Action::SweepFinalize(t) => self.sweep_finalize(state, t),
        }
    }

    /// Whether every name of `tx` is finished under `decision`.
    fn all_finished(&self, state: &State<TXS, ITEMS>, tx: Tx, decision: Decision) -> bool {
        let env = self.env(state);
        Self::items().all(|n| {
            participant::finished(
                self.variant,
                *state.item(self.at(tx, n)),
                tx,
                self.op(tx, n),
                decision,
                &env,
            )
        })
    }

    /// Runs commit or abort of `tx`'s operation under its name `name` and records an answer
    /// that is not acknowledged (a violation), and a commit that applied (the ghost
    /// `applied`). An upkeep that does not apply makes it no step (the `Plain` one is the
    /// step).
    fn complete_on(
        &self,
        mut state: State<TXS, ITEMS>,
        tx: Tx,
        name: Item,
        decision: Decision,
        upkeep: Upkeep,
    ) -> State<TXS, ITEMS> {
        let env = self.env(&state);
        let item = self.at(tx, name);
        let found = *state.item(item);
        if !participant::upkeep_applies(self.variant, &found, tx, decision, upkeep, &env) {
            return state;
        }
        let op = self.op(tx, name);
        // Refused while a former transaction's entry is in the way (`Action::Retire` first).
        let Some((after, reply)) =
            participant::complete(self.variant, found, tx, op, decision, upkeep, &env)
        else {
            return state;
        };
        *state.item_mut(item) = after;
        if !reply.acknowledged() {
            state.violation_reported = true;
        }
        if decision == Decision::Commit && reply == Reply::Done {
            let applied = &mut state.tx_mut(tx).applied[name.ix()];
            *applied = applied.bump();
        }
        state
    }

    /// Once every item is finished, the finalize swap; a lost one follows
    /// [`rules::after_lost_finalize`].
    fn finalize(&self, mut state: State<TXS, ITEMS>, t: Tx) -> State<TXS, ITEMS> {
        let Coordinator::Completing(d) = state.tx(t).coordinator else {
            return state;
        };
        if !self.all_finished(&state, t, d) {
            return state;
        }
        let tx = state.tx_mut(t);
        tx.coordinator = match swap(tx.record, TxStatus::deciding(d), TxStatus::finishing(d)) {
            Ok(status) => {
                tx.record = Some(status);
                Coordinator::Finished
            }
            Err(found) => match rules::after_lost_finalize(found, d) {
                // The sweeper finalized first: same outcome.
                AfterLostSwap::Follow(_) => Coordinator::Finished,
                // `Fatal` in `Coordinator::complete`: the coordinator stops.
                AfterLostSwap::Fatal => Coordinator::Crashed,
            },
        };
        state
    }

    /// `t`'s prepare under its name `n` as it reaches the item: the operation each hold there
    /// carries, and whether `t`'s own carries another.
    fn prepare_request(&self, state: &State<TXS, ITEMS>, t: Tx, n: Item) -> Prepare<TXS> {
        let i = self.at(t, n);
        let held = state.item(i).held_for;
        let ops = std::array::from_fn(|u| {
            let u = Tx(u as u8);
            match held[u.ix()] {
                _ if u == t => self.op(t, n),
                Some(h) => self.op(u, h),
                None => self.op(u, i), // holds nothing here: not read
            }
        });
        Prepare {
            other_op: self.other_op(state, t, n, false),
            fresh: state.tx(t).replayed,
            ..Prepare::of(t, n, ops)
        }
    }

    fn deliver_prepare(&self, mut state: State<TXS, ITEMS>, t: Tx, n: Item) -> State<TXS, ITEMS> {
        if !state.tx(t).prepares_in_flight {
            return state; // never sent in time
        }
        let env = self.env(&state);
        let request = self.prepare_request(&state, t, n);
        let i = self.at(t, n);
        let (mut after, step) = participant::prepare(self.variant, *state.item(i), &request, &env);
        // The heat mark rides on the prepare's own write: only where it holds the item.
        after.hot |= step == PrepareStep::Lock && state.tx(t).marks[n.ix()];
        *state.item_mut(i) = after;
        // A yes vote is the rule's `Lock`; any refusal is a no.
        if let (
            PrepareStep::Lock,
            Coordinator::Preparing { yes } | Coordinator::Staging { yes, .. },
        ) = (step, &mut state.tx_mut(t).coordinator)
        {
            yes[n.ix()] = true;
        }
        state
    }

    /// [`Action::Native`]: routed native by [`rules::route`] (every item a table reached
    /// direct; no delete), from an idle coordinator and no record; all or nothing. Every
    /// transaction may attempt it whatever its coordinator knows of the items' heat: what a
    /// coordinator knows only ever removes attempts, and the protocol's path is always a step,
    /// so every routing is explored. A transaction that names one item twice writes nothing:
    /// DynamoDB refuses a `TransactWriteItems` naming one item twice (`ValidationException`) as
    /// a whole.
    fn native_commit(&self, mut state: State<TXS, ITEMS>, t: Tx) -> State<TXS, ITEMS> {
        if !self.native
            || self.names_twice(t)
            || state.tx(t).coordinator != Coordinator::Idle
            || state.tx(t).record.is_some()
        {
            return state;
        }
        let facts: Vec<_> = Self::items()
            .map(|n| rules::PathFacts {
                deletes: self.op(t, n) == Op::Delete,
                ..rules::PathFacts::DIRECT_TABLE
            })
            .collect();
        if rules::route(CommitMode::Auto, &facts, 0, true).0 != Path::Native {
            return state;
        }
        let env = self.env(&state);
        let steps = Self::items().map(|n| {
            let item = state.item(self.at(t, n));
            participant::native_write(self.variant, item, t, self.op(t, n), &env)
        });
        let (mut apply, mut gives_way) = (true, false);
        let mut found = [NativeFinding::Passed; ITEMS];
        for (n, (name, step)) in Self::items().zip(steps).enumerate() {
            apply &= step == NativeStep::Apply;
            gives_way |= matches!(step, NativeStep::Protocol | NativeStep::Heated);
            // Model time for the rule is 0 and a mark lasts 1: a live mark is `hot_until` 1.
            let hot_until = u64::from(state.item(self.at(t, name)).hot);
            found[n] = NativeFinding::Refused { step, hot_until };
        }
        let mut marks = [false; ITEMS];
        for (mark, heat) in marks.iter_mut().zip(rules::heats(&found, 0, 1)) {
            *mark = self.heat && heat.and_then(Heat::mark).is_some();
        }
        if gives_way {
            // The protocol path is next; its prepares mark what was contended.
            state.tx_mut(t).marks = marks;
            return state;
        }
        if apply {
            for n in Self::items() {
                let i = self.at(t, n);
                *state.item_mut(i) = participant::native_apply(*state.item(i), self.op(t, n));
                let applied = &mut state.tx_mut(t).applied[n.ix()];
                *applied = applied.bump();
            }
        }
        let tx = state.tx_mut(t);
        tx.record = Some(if apply {
            TxStatus::Committed
        } else {
            TxStatus::Aborted
        });
        tx.coordinator = Coordinator::Finished;
        tx.answered_commit |= apply;
        tx.answered_abort |= !apply;
        state
    }

    /// [`Action::Cool`]: an item's heat mark ends (once per item: [`crate::state::ItemState::cooled`]).
    fn cool(&self, mut state: State<TXS, ITEMS>, i: Item) -> State<TXS, ITEMS> {
        let item = state.item_mut(i);
        if item.hot && !item.cooled {
            item.hot = false;
            item.cooled = true;
        }
        state
    }

    /// [`Action::Replay`]: only [`Variant::FreshBeganReplay`]'s replay sends anything (every
    /// prepare again, deliverable from now on with a fresh `began`), and only once the record
    /// exists (before, the replay is the first attempt's twin: its put races the first one's).
    fn replay(&self, mut state: State<TXS, ITEMS>, t: Tx) -> State<TXS, ITEMS> {
        let tx = state.tx_mut(t);
        if self.variant == Variant::FreshBeganReplay && tx.record.is_some() && !tx.replayed {
            tx.replayed = true;
            tx.prepares_in_flight = true;
        }
        state
    }

    fn deliver_complete(
        &self,
        state: State<TXS, ITEMS>,
        t: Tx,
        i: Item,
        upkeep: Upkeep,
    ) -> State<TXS, ITEMS> {
        match state.tx(t).completes_in_flight {
            Some(d) => self.complete_on(state, t, i, d, upkeep),
            None => state,
        }
    }

    /// A resolver settles `owner`'s lock or reservation on item `i` by [`rules::resolve`] from
    /// the owner's record, one write. Past the owner's deadline anyone may (a newcomer's
    /// prepare, or the sweeper walking the lock-expiry index); before it, only a newcomer whose
    /// prepare met the owner, and only if the owner already decided (`OwnerLive` otherwise): the
    /// model lets any other transaction's prepare in flight be that newcomer.
    fn resolve(
        &self,
        mut state: State<TXS, ITEMS>,
        i: Item,
        owner: Tx,
        upkeep: Upkeep,
    ) -> State<TXS, ITEMS> {
        if !state.item(i).held_by(owner) {
            return state;
        }
        let deadline_passed = state.tx(owner).deadline_passed();
        let newcomer = Self::txs().any(|u| u != owner && state.tx(u).prepares_in_flight);
        if !deadline_passed && !newcomer {
            return state;
        }
        // The operation the hold carries: a roll-forward applies it.
        let Some(name) = state.item(i).held_for[owner.ix()] else {
            unreachable!("a hold records its operation's name")
        };
        let Some(record) = self.owner_record(&state, owner) else {
            // A key's first transaction, its record expired, its later one not begun: the lock
            // rule would write an `ABORTED` record under the id again. Never reached in the
            // configurations checked (a hold of an ended transaction needs its late prepare
            // to pass its entry or the horizon), so no step: a stuck hold would show.
            return state;
        };
        match rules::resolve(record, deadline_passed) {
            // Undecided and live: the lock or reservation stands (a newcomer votes conflict).
            Resolution::OwnerLive => {}
            // ResolverAbortsStaging: abort the STAGING owner from this item's point of view.
            Resolution::Recover if self.variant == Variant::ResolverAbortsStaging => {
                state.tx_mut(owner).record = Some(TxStatus::Aborting);
            }
            // STAGING past its deadline: its recovery (`Inquire`, `RecoverDecide`) is the
            // recoverer's; the hold stands meanwhile.
            Resolution::Recover => {}
            // `create_aborted`; the lock goes by `AbortHere` next round.
            Resolution::RecordAborted => state.tx_mut(owner).record = Some(TxStatus::Aborted),
            // The compare-and-swap `PREPARING → ABORTING` (the read folded into the write).
            Resolution::DecideAbort => state.tx_mut(owner).record = Some(TxStatus::Aborting),
            Resolution::RollForward => {
                return self.complete_on(state, owner, name, Decision::Commit, upkeep);
            }
            Resolution::AbortHere => {
                return self.complete_on(state, owner, name, Decision::Abort, upkeep);
            }
            Resolution::DropStale => {
                *state.item_mut(i) =
                    participant::drop_stale_lock(self.variant, *state.item(i), owner);
            }
        }
        state
    }

    /// The lock rule's reading of `owner`'s record ([`rules::OwnerRecord`]), as stored under its
    /// id: a key's first transaction's, once expired, is gone, and its later one's is another's
    /// (by id alone, [`Variant::ReuseMatchesId`], taken for its own). `None`: the first's record
    /// expired and no other stands (see [`Self::resolve`]).
    pub fn owner_record(&self, state: &State<TXS, ITEMS>, owner: Tx) -> Option<OwnerRecord> {
        let tx = state.tx(owner);
        if !tx.expired {
            return Some(tx.record.map_or(OwnerRecord::Missing, OwnerRecord::Found));
        }
        let later = self.twin(owner).and_then(|w| state.tx(w).record)?;
        Some(match self.variant {
            Variant::ReuseMatchesId => OwnerRecord::Found(later),
            _ => OwnerRecord::Superseded,
        })
    }

    /// Whether `t` is a key's later transaction whose earlier one's record still stands.
    fn waits_for_expiry(&self, state: &State<TXS, ITEMS>, t: Tx) -> bool {
        self.reuse
            .is_some_and(|r| r.again == t && !state.tx(r.first).expired)
    }

    /// [`Action::ExpireRecord`]: a key's first transaction's record, ended and past its
    /// deadline, removed by its time-to-live.
    fn expire_record(&self, mut state: State<TXS, ITEMS>, t: Tx) -> State<TXS, ITEMS> {
        let tx = state.tx_mut(t);
        let ended = tx.record.is_some_and(|s| s.is_terminal());
        if self.reuse.is_some_and(|r| r.first == t) && ended && tx.deadline_passed() {
            tx.expired = true;
        }
        state
    }

    /// [`Action::Retire`]: `former`'s fence entry on item `i` retired, where a step of the
    /// other transaction under its id may meet it: that one began (the key's later one), or
    /// has messages in flight (the first one's late ones). By id alone there is no former
    /// entry to retire ([`Variant::ReuseMatchesId`]).
    fn retire(&self, mut state: State<TXS, ITEMS>, i: Item, former: Tx) -> State<TXS, ITEMS> {
        let Some(w) = self.twin(former) else {
            return state;
        };
        let other = state.tx(w);
        let may_step = match self.reuse {
            Some(r) if r.again == w => other.record.is_some() || other.staged,
            _ => other.prepares_in_flight || other.completes_in_flight.is_some(),
        };
        if self.variant != Variant::ReuseMatchesId
            && may_step
            && state.item(i).fence[former.ix()].is_some()
        {
            *state.item_mut(i) = participant::retire(*state.item(i), former);
        }
        state
    }

    /// The sweeper's [`Recovery::Complete`] on one item.
    fn sweep_complete(
        &self,
        state: State<TXS, ITEMS>,
        t: Tx,
        i: Item,
        upkeep: Upkeep,
    ) -> State<TXS, ITEMS> {
        match overdue_recovery(&state, t, self.variant) {
            Some(Recovery::Complete(d)) => self.complete_on(state, t, i, d, upkeep),
            _ => state,
        }
    }

    /// The sweeper's [`Recovery::Complete`], its finalize once every item is finished (the
    /// swap always wins: the record is decided and not terminal).
    fn sweep_finalize(&self, mut state: State<TXS, ITEMS>, t: Tx) -> State<TXS, ITEMS> {
        let Some(Recovery::Complete(d)) = overdue_recovery(&state, t, self.variant) else {
            return state;
        };
        if self.all_finished(&state, t, d) {
            state.tx_mut(t).record = Some(TxStatus::finishing(d));
        }
        state
    }

    /// The sweeper's [`Recovery::DecideAbort`]: the swap `PREPARING → ABORTING` (which wins:
    /// the record is `PREPARING`); its completion is `SweepComplete`.
    /// [`Variant::StagingAbortsAtDeadline`] does the same to an overdue `STAGING` record.
    fn sweep_abort(&self, mut state: State<TXS, ITEMS>, t: Tx) -> State<TXS, ITEMS> {
        let from = match overdue_recovery(&state, t, self.variant) {
            Some(Recovery::DecideAbort) => TxStatus::Preparing,
            Some(Recovery::Inquire) if self.variant == Variant::StagingAbortsAtDeadline => {
                TxStatus::Staging
            }
            _ => return state,
        };
        let tx = state.tx_mut(t);
        if let Ok(status) = swap(tx.record, from, TxStatus::Aborting) {
            tx.record = Some(status);
        }
        state
    }

    /// The staged coordinator's first round: the record put and every prepare, sent at once.
    fn stage(&self, mut state: State<TXS, ITEMS>, t: Tx) -> State<TXS, ITEMS> {
        let tx = state.tx_mut(t);
        if !self.staged || tx.coordinator != Coordinator::Idle {
            return state;
        }
        tx.coordinator = Coordinator::Staging {
            yes: [false; ITEMS],
            acked: false,
            answered: false,
        };
        tx.staged = true;
        // A keyed request puts its record first, its prepares once the put landed.
        tx.prepares_in_flight = !tx.deadline_passed() && !self.keyed(t);
        state
    }

    /// The stager's early answer: "committed", from its acknowledged put and every yes vote
    /// ([`Variant::AnswerWithoutStageAck`]: without waiting for the put).
    fn answer(&self, mut state: State<TXS, ITEMS>, t: Tx) -> State<TXS, ITEMS> {
        let tx = state.tx_mut(t);
        let Coordinator::Staging {
            yes,
            acked,
            answered: false,
        } = tx.coordinator
        else {
            return state;
        };
        let acked = acked || self.variant == Variant::AnswerWithoutStageAck;
        if acked && rules::decision(yes.into_iter()) == Decision::Commit {
            tx.coordinator = Coordinator::Staging {
                yes,
                acked: true,
                answered: true,
            };
            tx.answered_commit = true;
        }
        state
    }

    /// One inquiry ([`participant::inquire`]) about staged `t` under its name `n`, its answer
    /// kept for [`Self::recover_decide`]. A prevent needs the deadline passed (recoverers only),
    /// but with [`Variant::RecoveryIgnoresDeadline`].
    fn inquire(
        &self,
        mut state: State<TXS, ITEMS>,
        t: Tx,
        n: Item,
        prevent: bool,
        upkeep: Upkeep,
    ) -> State<TXS, ITEMS> {
        let tx = state.tx(t);
        let early = !tx.deadline_passed() && self.variant.recovery_waits_for_deadline();
        if tx.record != Some(TxStatus::Staging) || (prevent && early) {
            return state;
        }
        let env = self.env(&state);
        let i = self.at(t, n);
        let found = *state.item(i);
        if !participant::inquiry_upkeep_applies(&found, t, upkeep, &env) {
            return state;
        }
        let ask = (prevent, self.other_op(&state, t, n, true));
        let (after, answer) = participant::inquire(self.variant, found, t, ask, upkeep, &env);
        *state.item_mut(i) = after;
        let tx = state.tx_mut(t);
        // `Open` (a read-only inquiry found neither) decides nothing: as good as not asked.
        tx.inquiry[n.ix()] = (answer != Inquiry::Open).then_some(answer);
        if answer == Inquiry::Prevented {
            tx.prevented[n.ix()] = true;
        }
        state
    }

    /// A helper's or recoverer's decision on a `STAGING` record, by [`rules::staged_decision`]
    /// from the latest inquiries. Commit: the compare-and-swap, then the answer
    /// ([`Variant::HelperAnswersFromHolds`]: the answer first). Abort: only past the deadline
    /// (any time with [`Variant::RecoveryIgnoresDeadline`]).
    fn recover_decide(&self, mut state: State<TXS, ITEMS>, t: Tx) -> State<TXS, ITEMS> {
        let tx = state.tx_mut(t);
        if tx.record != Some(TxStatus::Staging) {
            return state;
        }
        match rules::staged_decision(tx.inquiry) {
            StagedDecision::Wait => {}
            StagedDecision::Commit
                if self.variant == Variant::HelperAnswersFromHolds && !tx.answered_commit =>
            {
                tx.answered_commit = true;
            }
            StagedDecision::Commit => {
                tx.record = Some(TxStatus::Committing);
                tx.answered_commit = true;
            }
            StagedDecision::Abort
                if tx.deadline_passed() || !self.variant.recovery_waits_for_deadline() =>
            {
                tx.record = Some(TxStatus::Aborting);
            }
            StagedDecision::Abort => {}
        }
        state
    }
}
