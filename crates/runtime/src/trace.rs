//! X-Ray trace propagation: one transaction, one trace. API Gateway starts the trace and
//! Lambda hands each invocation its header (`Context::xray_trace_id`); a handler runs its work
//! [`within`] it, and the transports send [`current`] on as `X-Amzn-Trace-Id`: the `lambda`
//! transport on its `Invoke` (Lambda continues the trace in the participant function), the
//! `http` transport to the service (which continues it if it is traced).
//!
//! Outside a [`within`] scope, the Lambda runtime's `_X_AMZN_TRACE_ID` (the current
//! invocation's, set by `lambda_runtime`) stands in; with neither, no header is sent.

use std::future::Future;

use twopc_function::var;

/// The header carrying the trace.
pub const HEADER: &str = "x-amzn-trace-id";

tokio::task_local! {
    static TRACE: Option<String>;
}

/// Runs `work` with `trace` as the current trace header (`None`: no header, not even the
/// runtime's).
pub async fn within<F: Future>(trace: Option<String>, work: F) -> F::Output {
    TRACE.scope(trace, work).await
}

/// The trace header to send on: the [`within`] scope's, else the Lambda runtime's. Only a
/// value that is a valid header value.
pub fn current() -> Option<String> {
    let trace = match TRACE.try_with(Clone::clone) {
        Ok(scoped) => scoped,
        Err(_) => std::env::var(var::LAMBDA_TRACE_ID).ok(),
    };
    trace.filter(|t| !t.is_empty() && t.bytes().all(|b| (0x20..0x7f).contains(&b)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_scope_sets_the_trace_and_none_clears_it() {
        let root = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
        assert_eq!(
            within(Some(root.to_owned()), async { current() }).await,
            Some(root.to_owned())
        );
        assert_eq!(within(None, async { current() }).await, None);
        assert_eq!(
            within(Some("bad\nvalue".to_owned()), async { current() }).await,
            None,
            "never an invalid header"
        );
    }
}
