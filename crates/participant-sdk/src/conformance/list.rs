//! The one list of checks: each named once, with what it guards against, in the section of
//! what it needs of the participant. Everything that runs checks reads it: the tests
//! [`conformance_tests!`](crate::conformance_tests) makes, [`check_all`](super::check_all),
//! [`CHECKS`] and [`play`] (the black-box runner, `twopc conformance`, plays the checks that need
//! only messages over HTTP). A check added here reaches all of them; one added elsewhere
//! reaches none.

use std::future::Future;

use super::{Kit, Subject, UnderTest};
use crate::hooks::Hooks;
use crate::store::StateStore;

/// What a check needs of the participant beyond its messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    /// Only its messages (and, when the participant shows them, its effects): any participant,
    /// in process or over HTTP.
    Messages,
    /// Failures injected inside the participant's work ([`super::Faults`]): in process only.
    Faults,
    /// The participant's clock and the transaction log it resolves by: in process only.
    Recovery,
    /// A participant that claims its calls ([`super::Atomicity::Claimed`]), failures and its
    /// clock: in process only.
    Claims,
    /// Raw requests over the `http` transport ([`UnderTest::post_raw`]): over HTTP only.
    Wire,
}

impl Needs {
    /// Whether a runner that reaches the participant only over HTTP can play it.
    pub fn black_box(self) -> bool {
        matches!(self, Needs::Messages | Needs::Wire)
    }
}

/// One check of the kit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Check {
    /// Its name: the check's function, and the test named after it.
    pub name: &'static str,
    /// What it guards against, in one line.
    pub guards: &'static str,
    /// What it needs.
    pub needs: Needs,
}

/// The checks, named once, by section: `$then!(args; messages: [check => "guards", ...],
/// faults: [...], recovery: [...], claims: [...], wire: [...])`.
#[doc(hidden)]
#[macro_export]
macro_rules! __checks {
    ($then:ident ! ($($args:tt)*)) => {
        $crate::$then! { $($args)*;
            messages: [
                prepare_reserves_once_and_a_duplicate_gets_the_same_yes
                    => "a retried prepare holding twice (two authorisations for one payment)",
                an_invalid_request_is_a_no_vote_that_holds_nothing
                    => "a payload the service cannot use being held, or answered with an error instead of a no vote",
                commit_confirms_once_and_a_duplicate_is_already_done
                    => "a retried commit applying twice (a double capture)",
                abort_cancels_once_and_a_duplicate_is_already_done
                    => "a retried abort releasing twice, or failing the second time",
                an_abort_before_its_prepare_holds_nothing_and_refuses_the_prepare
                    => "a prepare overtaken by its abort holding forever (a hold nobody will release)",
                a_prepare_after_its_transaction_ended_is_refused
                    => "a late copy of prepare holding again after the commit or the abort",
                a_prepare_past_its_deadline_is_refused_and_holds_nothing
                    => "a prepare handled after the coordinator stopped waiting holding what will be aborted",
                a_decision_contradicting_the_state_is_a_violation_and_does_nothing
                    => "a commit with no prepare, a commit after an abort or an abort after a commit being carried out",
                a_prevent_before_its_prepare_refuses_the_prepare
                    => "the staged commit's recovery aborting a transaction whose late prepare then holds anyway (a hold nobody releases, or a commit answered and then undone)",
                an_inquiry_of_a_held_transaction_leaves_it_held_and_committable
                    => "an inquiry answering held and then letting the hold go, or answering prevented for what it holds, so that recovery aborts what was answered committed",
                a_prepare_of_another_part_of_its_request_is_no_retry
                    => "one participant reached under two service names in one transaction, the same payload under both, taken for a retry: one part never carried out, the client told committed",
            ],
            faults: [
                concurrent_duplicates_take_effect_once
                    => "two copies of one message racing inside the work and both taking effect",
                a_failed_call_is_made_good_by_the_next_message
                    => "a call that failed, or whose answer was lost, being lost instead of made good",
                a_prevent_during_the_prepare_keeps_its_late_result_from_holding
                    => "a prepare still deciding when recovery prevents it holding afterwards (a late reserve result landing after the answer prevented)",
            ],
            recovery: [
                a_silent_coordinator_is_resolved_by_the_record
                    => "a hold kept forever when the coordinator goes silent, or settled against the record",
            ],
            claims: [
                an_interrupted_call_is_taken_over_once_its_claim_expires
                    => "a call cut off by a crash never finished, or redone while it may still run",
            ],
            wire: [
                an_unsigned_request_is_refused_and_holds_nothing
                    => "anyone who can reach the service preparing, committing or aborting without the secret",
                a_forged_signature_is_refused_and_holds_nothing
                    => "a request signed with another secret, or altered after signing, being obeyed",
                a_stale_request_is_refused_and_holds_nothing
                    => "a captured request replayed outside the clock-skew window",
                a_request_signed_for_another_transaction_is_refused_and_holds_nothing
                    => "a signature captured from one transaction reused for another",
                a_malformed_body_is_refused_and_holds_nothing
                    => "a body that is not the call's request being half read and acted on",
            ],
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __check_list {
    (;
        messages: [$($m:ident => $mg:literal),* $(,)?],
        faults: [$($f:ident => $fg:literal),* $(,)?],
        recovery: [$($r:ident => $rg:literal),* $(,)?],
        claims: [$($c:ident => $cg:literal),* $(,)?],
        wire: [$($w:ident => $wg:literal),* $(,)?],
    ) => {
        /// Every check of the kit, in order, with what it guards against and what it needs.
        pub const CHECKS: &[Check] = &[
            $(Check { name: stringify!($m), guards: $mg, needs: Needs::Messages },)*
            $(Check { name: stringify!($f), guards: $fg, needs: Needs::Faults },)*
            $(Check { name: stringify!($r), guards: $rg, needs: Needs::Recovery },)*
            $(Check { name: stringify!($c), guards: $cg, needs: Needs::Claims },)*
            $(Check { name: stringify!($w), guards: $wg, needs: Needs::Wire },)*
        ];
    };
}

crate::__checks!(__check_list!());

#[doc(hidden)]
#[macro_export]
macro_rules! __play {
    ($name:ident, $kit:ident;
        messages: [$($m:ident => $mg:literal),* $(,)?],
        faults: [$($f:ident => $fg:literal),* $(,)?],
        recovery: [$($r:ident => $rg:literal),* $(,)?],
        claims: [$($c:ident => $cg:literal),* $(,)?],
        wire: [$($w:ident => $wg:literal),* $(,)?],
    ) => {
        match $name {
            $(stringify!($m) => $crate::conformance::$m($kit).await,)*
            $(stringify!($f) => $crate::conformance::$f($kit).await,)*
            $(stringify!($r) => $crate::conformance::$r($kit).await,)*
            $(stringify!($c) => $crate::conformance::$c($kit).await,)*
            $(stringify!($w) => $crate::conformance::$w($kit).await,)*
            other => panic!("no check is named {other:?} (conformance::CHECKS lists them)"),
        }
    };
}

/// Plays the check named `name` against the kit's participant; panics with what it expected
/// when the participant fails it (or with "no check is named" for a name not in [`CHECKS`]).
pub async fn play<P: UnderTest>(name: &str, kit: Kit<P>) {
    crate::__checks!(__play!(name, kit));
}

/// Runs every check an SDK participant is given (all but the wire's), each on a fresh SDK
/// participant made of a subject from `make`.
pub async fn check_all<H, S, F, Fut>(mut make: F)
where
    H: Hooks,
    S: StateStore,
    F: FnMut() -> Fut,
    Fut: Future<Output = Subject<H, S>>,
{
    crate::__checks!(__run_checks!(make));
}

#[doc(hidden)]
#[macro_export]
macro_rules! __run_checks {
    ($make:ident;
        messages: [$($m:ident => $mg:literal),* $(,)?],
        faults: [$($f:ident => $fg:literal),* $(,)?],
        recovery: [$($r:ident => $rg:literal),* $(,)?],
        claims: [$($c:ident => $cg:literal),* $(,)?],
        wire: [$($w:ident => $wg:literal),* $(,)?],
    ) => {
        $($crate::conformance::$m($crate::conformance::Kit::new($make().await)).await;)*
        $($crate::conformance::$f($crate::conformance::Kit::new($make().await)).await;)*
        $($crate::conformance::$r($crate::conformance::Kit::new($make().await)).await;)*
        $($crate::conformance::$c($crate::conformance::Kit::new($make().await)).await;)*
    };
}

/// One `#[tokio::test]` per check of the kit, named after it, each against a fresh participant
/// made by the expression (evaluated in an async test, so it may `.await`):
///
/// ```ignore
/// // An SDK participant, from a `conformance::Subject`: every check but the wire's.
/// twopc_participant_sdk::conformance_tests!(my_subject().await);
/// // Any other participant, from an `UnderTest`, by its `Atomicity`: one that claims its
/// // calls gets every check but the wire's; one whose work is one conditional write per
/// // message, all but the claims' too.
/// twopc_participant_sdk::conformance_tests!(claimed: my_participant().await);
/// twopc_participant_sdk::conformance_tests!(one_write: my_participant().await);
/// // A claiming participant reached over HTTP (its `UnderTest::post_raw` answers): every check.
/// twopc_participant_sdk::conformance_tests!(claimed_wire: my_served_participant().await);
/// ```
///
/// A `one_write` participant is not given
/// [`an_interrupted_call_is_taken_over_once_its_claim_expires`]: it makes no claim, and a call
/// of it cut off either wrote or did not, which
/// [`a_failed_call_is_made_good_by_the_next_message`] plays (a failure before the write, an
/// answer lost after it). The wire's checks ([`Needs::Wire`]) send raw requests over HTTP.
///
/// The calling crate needs `tokio` (features `macros`, `rt`) among its dev-dependencies.
#[macro_export]
macro_rules! conformance_tests {
    (claimed: $subject:expr) => {
        $crate::__checks!(__check_tests!(claimed, over, $subject));
    };
    (claimed_wire: $subject:expr) => {
        $crate::__checks!(__check_tests!(claimed_wire, over, $subject));
    };
    (one_write: $subject:expr) => {
        $crate::__checks!(__check_tests!(one_write, over, $subject));
    };
    ($subject:expr) => {
        $crate::__checks!(__check_tests!(claimed, new, $subject));
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __check_tests {
    (claimed, $wire:ident, $subject:expr;
        messages: [$($m:ident => $mg:literal),* $(,)?],
        faults: [$($f:ident => $fg:literal),* $(,)?],
        recovery: [$($r:ident => $rg:literal),* $(,)?],
        claims: [$($c:ident => $cg:literal),* $(,)?],
        wire: [$($w:ident => $wg:literal),* $(,)?],
    ) => {
        $crate::__check_test!($wire, $subject; $($m,)* $($f,)* $($r,)* $($c,)*);
    };
    (claimed_wire, $wire:ident, $subject:expr;
        messages: [$($m:ident => $mg:literal),* $(,)?],
        faults: [$($f:ident => $fg:literal),* $(,)?],
        recovery: [$($r:ident => $rg:literal),* $(,)?],
        claims: [$($c:ident => $cg:literal),* $(,)?],
        wire: [$($w:ident => $wg:literal),* $(,)?],
    ) => {
        $crate::__check_test!($wire, $subject; $($m,)* $($f,)* $($r,)* $($c,)* $($w,)*);
    };
    (one_write, $wire:ident, $subject:expr;
        messages: [$($m:ident => $mg:literal),* $(,)?],
        faults: [$($f:ident => $fg:literal),* $(,)?],
        recovery: [$($r:ident => $rg:literal),* $(,)?],
        claims: [$($c:ident => $cg:literal),* $(,)?],
        wire: [$($w:ident => $wg:literal),* $(,)?],
    ) => {
        $crate::__check_test!($wire, $subject; $($m,)* $($f,)* $($r,)*);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __check_test {
    ($wire:ident, $subject:expr; $($check:ident,)*) => {
        $(#[tokio::test]
        async fn $check() {
            $crate::conformance::$check($crate::conformance::Kit::$wire($subject)).await;
        })*
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_check_is_named_once_and_says_what_it_guards_against() {
        let mut names: Vec<&str> = CHECKS.iter().map(|c| c.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), CHECKS.len(), "a name listed twice");
        for c in CHECKS {
            assert!(
                c.guards.len() > 20,
                "{}: say what it guards against",
                c.name
            );
        }
        let black_box = CHECKS.iter().filter(|c| c.needs.black_box()).count();
        assert!(black_box >= 13, "{black_box} checks over HTTP");
    }
}
