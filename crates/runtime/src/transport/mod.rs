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
use twopc_core::message::{CompleteReply, CompleteRequest, PrepareReply, PrepareRequest};
use twopc_core::ports::{Clock, ParticipantStore, Transport, TransportError, TxLog};
use twopc_core::record::Target;

pub use self::http::HttpTransport;
pub use self::lambda::LambdaTransport;

/// Routes each call to the transport its target names.
#[derive(Debug)]
pub struct DispatchTransport<S, L, C> {
    direct: DirectTransport<S, L, C>,
    lambda: LambdaTransport,
    http: HttpTransport,
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
        }
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
            Target::Direct { .. } => self.direct.prepare(target, req).await,
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
            Target::Direct { .. } => self.direct.commit(target, req).await,
            Target::Lambda { .. } => self.lambda.commit(target, req).await,
            Target::Http { .. } => self.http.commit(target, req).await,
        }
    }

    async fn abort(
        &self,
        target: &Target,
        req: &CompleteRequest,
    ) -> Result<CompleteReply, TransportError> {
        match target {
            Target::Direct { .. } => self.direct.abort(target, req).await,
            Target::Lambda { .. } => self.lambda.abort(target, req).await,
            Target::Http { .. } => self.http.abort(target, req).await,
        }
    }
}
