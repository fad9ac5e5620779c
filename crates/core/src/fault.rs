//! Named fault points: where a test may make the coordinator stop dead, as a killed process
//! would (no cleanup, nothing more written). A fired point never returns: the coordinator's
//! future stops there and the test drops it (`twopc_tests::CrashAt`); nothing in the product's
//! errors or answers knows about crashes.

use std::fmt;

/// A step of the coordinator after which it may be made to crash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FaultPoint {
    /// The record is written; nothing prepared.
    AfterBegin,
    /// Participant `i` answered prepare (others may be in flight: they are cut off).
    AfterPrepare(usize),
    /// Every vote is in; the decision is not written.
    BeforeDecide,
    /// Staged commit: the stager has its answer ("committed": its put acknowledged and every
    /// vote yes); nothing made explicit yet.
    AfterAnswer,
    /// The decision is written; no participant told.
    AfterDecide,
    /// Participant `i` completed commit/abort (others may be in flight: they are cut off).
    AfterComplete(usize),
    /// Every participant acknowledged; the record is not finalized.
    BeforeFinalize,
}

impl fmt::Display for FaultPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FaultPoint::AfterPrepare(i) => write!(f, "after-prepare-{i}"),
            FaultPoint::AfterComplete(i) => write!(f, "after-complete-{i}"),
            FaultPoint::AfterBegin => f.write_str("after-begin"),
            FaultPoint::BeforeDecide => f.write_str("before-decide"),
            FaultPoint::AfterAnswer => f.write_str("after-answer"),
            FaultPoint::AfterDecide => f.write_str("after-decide"),
            FaultPoint::BeforeFinalize => f.write_str("before-finalize"),
        }
    }
}

/// Decides whether the coordinator crashes at a point.
pub trait Faults: Send + Sync {
    /// True: crash here (the coordinator's future never resumes).
    fn fire(&self, point: FaultPoint) -> bool;
}

/// Never crashes (production).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoFaults;

impl Faults for NoFaults {
    fn fire(&self, _: FaultPoint) -> bool {
        false
    }
}
