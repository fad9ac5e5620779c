//! The `direct` transport: the coordinator runs the participant logic on the table itself.
//! Used by the local stack and the benchmarks; the logic is the same code the participant
//! Lambda runs.

use crate::message::{
    CompleteReply, CompleteRequest, InquireReply, InquireRequest, PrepareReply, PrepareRequest,
};
use crate::participant::Participant;
use crate::ports::{Clock, ParticipantStore, PortError, Transport, TransportError, TxLog};
use crate::record::Target;

/// Reaches `Target::Direct` participants in-process.
#[derive(Clone, Debug)]
pub struct DirectTransport<S, L, C> {
    participant: Participant<S, L, C>,
}

impl<S, L, C> DirectTransport<S, L, C> {
    /// Wraps the participant logic.
    pub fn new(participant: Participant<S, L, C>) -> Self {
        DirectTransport { participant }
    }

    /// The participant logic.
    pub fn participant(&self) -> &Participant<S, L, C> {
        &self.participant
    }
}

fn table(target: &Target) -> Result<&str, TransportError> {
    match target {
        Target::Direct { table } => Ok(table),
        other => Err(TransportError {
            target: format!("{other:?}"),
            message: "the direct transport reaches only direct targets".into(),
            undetermined: false,
            source: None,
        }),
    }
}

fn lift(table: &str, e: PortError) -> TransportError {
    TransportError {
        target: format!("direct:{table}"),
        message: e.to_string(),
        undetermined: matches!(e, PortError::Undetermined { .. }),
        source: Some(Box::new(e)),
    }
}

impl<S: ParticipantStore, L: TxLog, C: Clock> Transport for DirectTransport<S, L, C> {
    async fn prepare(
        &self,
        target: &Target,
        req: &PrepareRequest,
    ) -> Result<PrepareReply, TransportError> {
        let t = table(target)?;
        self.participant
            .prepare(t, req)
            .await
            .map_err(|e| lift(t, e))
    }

    async fn commit(
        &self,
        target: &Target,
        req: &CompleteRequest,
    ) -> Result<CompleteReply, TransportError> {
        let t = table(target)?;
        self.participant
            .commit(t, req)
            .await
            .map_err(|e| lift(t, e))
    }

    async fn abort(
        &self,
        target: &Target,
        req: &CompleteRequest,
    ) -> Result<CompleteReply, TransportError> {
        let t = table(target)?;
        self.participant.abort(t, req).await.map_err(|e| lift(t, e))
    }

    async fn inquire(
        &self,
        target: &Target,
        req: &InquireRequest,
    ) -> Result<InquireReply, TransportError> {
        let t = table(target)?;
        self.participant
            .inquire(t, req)
            .await
            .map_err(|e| lift(t, e))
    }
}
