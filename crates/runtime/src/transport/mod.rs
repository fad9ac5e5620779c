//! Transports: how the coordinator reaches participants (`docs/architecture.md`, "Transport failures").
//!
//! - [`lambda::LambdaTransport`]: `Invoke` of a participant function (`Target::Lambda`).
//! - [`http::HttpTransport`]: an external service speaking the participant JSON
//!   (`Target::Http`).
//! - [`DispatchTransport`]: routes each call by its target, to those two or to the core's
//!   in-process [`DirectTransport`] (`Target::Direct`). The coordinator and the sweeper use it,
//!   since a record may name participants of every kind.

pub mod http;
pub mod lambda;

use twopc_core::direct::DirectTransport;
use twopc_core::message::{
    CompleteReply, CompleteRequest, InquireReply, InquireRequest, PrepareReply, PrepareRequest,
};
use twopc_core::ports::{Clock, ParticipantStore, Transport, TransportError, TxLog};
use twopc_core::record::Target;

use crate::telemetry::Metrics;

pub use self::http::HttpTransport;
pub use self::lambda::LambdaTransport;

/// Routes each call to the transport its target names, and counts the protocol violations its
/// participants answer, whatever their transport ([`Metrics::protocol_violation`]): the one
/// place violations are counted (a participant function does not count its own). Its in-process
/// participants' prepares report their age ([`Metrics::began_age`]), as a participant
/// function's do.
#[derive(Debug)]
pub struct DispatchTransport<S, L, C> {
    direct: DirectTransport<S, L, C>,
    lambda: LambdaTransport,
    http: HttpTransport,
    metrics: Option<Metrics>,
}

impl<S, L, C> DispatchTransport<S, L, C> {
    /// Routes `direct`, `lambda` and `http` targets to these.
    pub fn new(
        direct: DirectTransport<S, L, C>,
        lambda: LambdaTransport,
        http: HttpTransport,
    ) -> Self {
        DispatchTransport {
            direct,
            lambda,
            http,
            metrics: None,
        }
    }

    /// Counts violations (and in-process prepares' ages) in `metrics`.
    pub fn with_metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    fn counted(
        &self,
        reply: Result<CompleteReply, TransportError>,
    ) -> Result<CompleteReply, TransportError> {
        if let (Ok(CompleteReply::Violation { .. }), Some(m)) = (&reply, &self.metrics) {
            m.protocol_violation();
        }
        reply
    }

    /// The in-process transport (its participant logic).
    pub fn direct(&self) -> &DirectTransport<S, L, C> {
        &self.direct
    }
}

impl<S: ParticipantStore, L: TxLog, C: Clock> Transport for DispatchTransport<S, L, C> {
    async fn prepare(
        &self,
        target: &Target,
        req: &PrepareRequest,
    ) -> Result<PrepareReply, TransportError> {
        match target {
            Target::Direct { table } => {
                if let Some(m) = &self.metrics {
                    m.began_age(table, self.direct.participant().age(req.began));
                }
                self.direct.prepare(target, req).await
            }
            Target::Lambda { .. } => self.lambda.prepare(target, req).await,
            Target::Http { .. } => self.http.prepare(target, req).await,
        }
    }

    async fn commit(
        &self,
        target: &Target,
        req: &CompleteRequest,
    ) -> Result<CompleteReply, TransportError> {
        match target {
            Target::Direct { .. } => self.counted(self.direct.commit(target, req).await),
            Target::Lambda { .. } => self.counted(self.lambda.commit(target, req).await),
            Target::Http { .. } => self.counted(self.http.commit(target, req).await),
        }
    }

    async fn abort(
        &self,
        target: &Target,
        req: &CompleteRequest,
    ) -> Result<CompleteReply, TransportError> {
        match target {
            Target::Direct { .. } => self.counted(self.direct.abort(target, req).await),
            Target::Lambda { .. } => self.counted(self.lambda.abort(target, req).await),
            Target::Http { .. } => self.counted(self.http.abort(target, req).await),
        }
    }

    async fn inquire(
        &self,
        target: &Target,
        req: &InquireRequest,
    ) -> Result<InquireReply, TransportError> {
        match target {
            Target::Direct { .. } => self.direct.inquire(target, req).await,
            Target::Lambda { .. } => self.lambda.inquire(target, req).await,
            Target::Http { .. } => self.http.inquire(target, req).await,
        }
    }
}
