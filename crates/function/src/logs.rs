//! JSON logs: one line per event (CloudWatch Logs Insights reads their fields), carrying the
//! fields of the innermost span under `span` (handlers open a [`tx_span`] so every line of a
//! transaction's work carries `span.txId`) and of every span it is in under `spans`, outermost
//! first. In Lambda the outermost is the runtime's own invocation span (`lambda_runtime`'s
//! `TracingLayer`: `requestId` and, when X-Ray is on, `xrayTraceId`), so every line written
//! while an invocation is handled carries `spans.0.xrayTraceId`: a log line leads to its trace.
//! CloudWatch stamps each line, so the lines carry no time of their own.

use tracing::Span;
use tracing_subscriber::EnvFilter;
use twopc_core::ids::TxId;

use crate::var;

/// The project's crates whose lines the filter keeps at `info` (the fan-out ones too); the rest
/// (the SDK, the runtime) only when they warn.
pub const OWN_CRATES: &[&str] = &[
    "twopc_core",
    "twopc_dynamo",
    "twopc_runtime",
    "twopc_function",
    "twopc_fanout",
    "coordinator",
    "participant",
    "sweeper",
    "stream_processor",
    "connections",
];

/// The log filter when `RUST_LOG` is unset: [`OWN_CRATES`] at `info`, everything else at
/// `warn`. template.yaml's `LogFilter` default is the same text.
pub const DEFAULT_LOG_FILTER: &str = "warn,twopc_core=info,twopc_dynamo=info,twopc_runtime=info,twopc_function=info,twopc_fanout=info,coordinator=info,participant=info,sweeper=info,stream_processor=info,connections=info";

/// The module of `lambda_runtime` that opens each invocation's span (`Lambda runtime invoke`,
/// at `info`, with `requestId` and `xrayTraceId`); it writes no log lines. A filter that leaves
/// it out (any filter at `warn`, as the default) never creates that span, and the lines lose the
/// trace id: [`log_filter`] always lets it through.
pub const INVOCATION_SPAN_DIRECTIVE: &str = "lambda_runtime::layers::trace=info";

/// The filter directives from `RUST_LOG` (or [`DEFAULT_LOG_FILTER`] when it is unset or blank)
/// and Lambda's application log level (`AWS_LAMBDA_LOG_LEVEL`), then
/// [`INVOCATION_SPAN_DIRECTIVE`]. Lambda's level, when set and valid, replaces whatever
/// `RUST_LOG` says about [`OWN_CRATES`]: an operator who turns a function to DEBUG in the console
/// sees its debug lines, while `RUST_LOG` keeps governing the other crates.
pub fn log_filter(rust_log: Option<&str>, lambda_level: Option<&str>) -> String {
    format!(
        "{},{INVOCATION_SPAN_DIRECTIVE}",
        level_filter(rust_log, lambda_level)
    )
}

fn level_filter(rust_log: Option<&str>, lambda_level: Option<&str>) -> String {
    let base = rust_log
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .unwrap_or(DEFAULT_LOG_FILTER);
    let Some(level) = lambda_level.and_then(lambda_level_directive) else {
        return base.to_owned();
    };
    let mut directives: Vec<String> = base
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .filter(|d| {
            let target = d.split(['=', '[']).next().unwrap_or_default();
            !OWN_CRATES
                .iter()
                .any(|c| target == *c || target.starts_with(&format!("{c}::")))
        })
        .map(str::to_owned)
        .collect();
    directives.extend(OWN_CRATES.iter().map(|c| format!("{c}={level}")));
    directives.join(",")
}

/// A Lambda log level as a `tracing` level (`FATAL` has none of its own: `error`).
fn lambda_level_directive(level: &str) -> Option<&'static str> {
    match level.trim().to_ascii_uppercase().as_str() {
        "TRACE" => Some("trace"),
        "DEBUG" => Some("debug"),
        "INFO" => Some("info"),
        "WARN" => Some("warn"),
        "ERROR" | "FATAL" => Some("error"),
        _ => None,
    }
}

/// Installs the JSON log subscriber (once per process; later calls do nothing), filtered by
/// [`log_filter`].
pub fn init_tracing() {
    let rust_log = std::env::var(var::LOG).ok();
    let lambda_level = std::env::var(var::LAMBDA_LOG_LEVEL).ok();
    let filter = EnvFilter::try_new(log_filter(rust_log.as_deref(), lambda_level.as_deref()))
        .unwrap_or_else(|_| EnvFilter::new(log_filter(None, None)));
    // Err only if a subscriber is already installed (tests): keep that one.
    let _ = subscriber(filter, std::io::stdout).try_init();
}

/// The log subscriber: JSON lines, the event's fields at the top, the innermost span's under
/// `span`, every span's under `spans` (outermost first), no target, no time.
pub fn subscriber<W>(
    filter: EnvFilter,
    writer: W,
) -> tracing_subscriber::fmt::SubscriberBuilder<
    tracing_subscriber::fmt::format::JsonFields,
    tracing_subscriber::fmt::format::Format<tracing_subscriber::fmt::format::Json, ()>,
    EnvFilter,
    W,
>
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .flatten_event(true)
        .with_current_span(true)
        .with_span_list(true)
        .with_target(false)
        .without_time()
        .with_writer(writer)
}

/// The span of one transaction's work: every log line inside it carries `txId`. Pass `None`
/// when the id is not known yet and [`record_tx`] it once it is.
pub fn tx_span(tx: Option<&TxId>, request_id: &str) -> Span {
    let span = tracing::info_span!("tx", txId = tracing::field::Empty, requestId = request_id);
    if let Some(tx) = tx {
        record_tx(&span, tx);
    }
    span
}

/// Records the transaction id on a [`tx_span`].
pub fn record_tx(span: &Span, tx: &TxId) {
    span.record("txId", tx.as_str());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_filter_keeps_every_own_crate_at_info() {
        for c in OWN_CRATES {
            assert!(
                DEFAULT_LOG_FILTER.contains(&format!(",{c}=info")),
                "{c} missing from DEFAULT_LOG_FILTER"
            );
        }
        assert!(DEFAULT_LOG_FILTER.starts_with("warn,"));
        assert!(EnvFilter::try_new(DEFAULT_LOG_FILTER).is_ok());
    }

    #[test]
    fn rust_log_alone_is_the_filter_and_blank_means_the_default() {
        assert_eq!(level_filter(Some("debug"), None), "debug");
        assert_eq!(level_filter(Some("  "), None), DEFAULT_LOG_FILTER);
        assert_eq!(level_filter(None, None), DEFAULT_LOG_FILTER);
        // An unknown Lambda level changes nothing.
        assert_eq!(level_filter(Some("debug"), Some("LOUD")), "debug");
        // The invocation span always passes, last (so the most specific for its module).
        assert_eq!(
            log_filter(Some("debug"), None),
            format!("debug,{INVOCATION_SPAN_DIRECTIVE}")
        );
    }

    #[test]
    fn lambdas_log_level_sets_the_own_crates_and_keeps_the_other_directives() {
        let f = level_filter(
            Some("warn,aws_sdk_dynamodb=debug,twopc_core=info,sweeper::handler=trace"),
            Some("DEBUG"),
        );
        let directives: Vec<&str> = f.split(',').collect();
        assert_eq!(&directives[..2], ["warn", "aws_sdk_dynamodb=debug"]);
        for c in OWN_CRATES {
            assert!(directives.contains(&format!("{c}=debug").as_str()), "{f}");
        }
        assert!(!f.contains("=info") && !f.contains("=trace"), "{f}");
        assert!(level_filter(None, Some("fatal")).ends_with("connections=error"));
        assert!(EnvFilter::try_new(f).is_ok());
    }
}
