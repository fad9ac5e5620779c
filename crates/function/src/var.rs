//! The environment variables the functions (and a participant service on the SDK) read, each
//! named once; `template.yaml` sets the same names (a test in `tests/` checks it).

/// The transactions table (every function).
pub const TRANSACTIONS_TABLE: &str = "TWOPC_TRANSACTIONS_TABLE";
/// The participant services as JSON: name → `{"target": {...}, "key": {...}}` for a table's
/// participant, or `{"kind": "custom", "target": {...}}` for a custom participant (one built
/// on `twopc-participant-sdk`, given an opaque `payload`) (coordinator).
pub const SERVICES: &str = "TWOPC_SERVICES";
/// The participant function's own table (participant).
pub const PARTICIPANT_TABLE: &str = "TWOPC_PARTICIPANT_TABLE";
/// The participant tables whose expired locks the sweeper resolves, as JSON: table name →
/// key schema, e.g. `{"accounts":{"hash":{"name":"id","type":"S"}}}` (sweeper; optional).
pub const LOCK_TABLES: &str = "TWOPC_LOCK_TABLES";
/// A DynamoDB endpoint URL (DynamoDB Local); unset in AWS.
pub const DYNAMODB_ENDPOINT: &str = "TWOPC_DYNAMODB_ENDPOINT";
/// A Lambda Invoke API endpoint URL (`cargo lambda watch`); unset in AWS.
pub const LAMBDA_ENDPOINT: &str = "TWOPC_LAMBDA_ENDPOINT";
/// The secret shared with the `http` participants (custom participants on
/// `twopc-participant-sdk`, whose router refuses unsigned requests): when set, the `http`
/// transport signs every request with it (`twopc_core::signing`); at least 16 bytes.
/// Coordinator and sweeper (optional; unset, requests go unsigned).
pub const HTTP_SIGNING_SECRET: &str = "TWOPC_HTTP_SIGNING_SECRET";
/// Who this coordinator is (written into locks, logged). Default: the function's name.
pub const COORDINATOR_ID: &str = "TWOPC_COORDINATOR_ID";
/// How long one call to a participant may take, in ms (lambda and http transports).
pub const CALL_TIMEOUT_MS: &str = "TWOPC_CALL_TIMEOUT_MS";
/// Most participants in one transaction.
pub const MAX_PARTICIPANTS: &str = "TWOPC_MAX_PARTICIPANTS";
/// The prepare timeout when a request gives none, in ms.
pub const DEFAULT_TIMEOUT_MS: &str = "TWOPC_DEFAULT_TIMEOUT_MS";
/// The largest prepare timeout a request may ask for, in ms.
pub const MAX_TIMEOUT_MS: &str = "TWOPC_MAX_TIMEOUT_MS";
/// The largest accepted request body, in bytes (coordinator).
pub const MAX_BODY_BYTES: &str = "TWOPC_MAX_BODY_BYTES";
/// Most overdue transactions one sweep drives.
pub const SWEEP_MAX_TRANSACTIONS: &str = "TWOPC_SWEEP_MAX_TRANSACTIONS";
/// Most expired locks one sweep examines per table.
pub const SWEEP_MAX_LOCKS: &str = "TWOPC_SWEEP_MAX_LOCKS";
/// How many transactions one sweep drives at once.
pub const SWEEP_CONCURRENCY: &str = "TWOPC_SWEEP_CONCURRENCY";
/// Most entries an item's fence keeps after a pruning write (participant logic: every
/// function that runs it). Default 24; at least 1. Liveness only, see
/// `ParticipantConfig::fence_capacity`.
pub const FENCE_CAPACITY: &str = "TWOPC_FENCE_CAPACITY";
/// `ParticipantConfig::max_reservations`.
pub const MAX_RESERVATIONS: &str = "TWOPC_MAX_RESERVATIONS";
/// How the coordinator commits: `auto` (the default: a transaction of `direct` tables, none
/// hot, no delete, as one native `TransactWriteItems`; any other staged), `staged` (the record
/// written with the prepares, answered after one round, finished after the answer) or
/// `classic` (begin, prepare, decide, complete, finalize, then answer). Coordinator.
pub const COMMIT_MODE: &str = "TWOPC_COMMIT_MODE";
/// How long an item found contended stays marked hot, in ms (coordinator): native attempts
/// avoid it until a window after the last contention seen there. Default 10000; at least 1.
/// `CoordinatorConfig::heat_window_ms`.
pub const HEAT_WINDOW_MS: &str = "TWOPC_HEAT_WINDOW_MS";
/// How long past the largest timeout (`TWOPC_MAX_TIMEOUT_MS`) after its transaction began a
/// fence entry is kept when the fence has room, in ms. Default 10000. Liveness only, see
/// `ParticipantConfig::fence_window_ms` (the two together).
pub const FENCE_MARGIN_MS: &str = "TWOPC_FENCE_MARGIN_MS";
/// The CloudWatch namespace of the EMF metrics.
pub const METRICS_NAMESPACE: &str = "TWOPC_METRICS_NAMESPACE";
/// The log filter (`tracing-subscriber` directives, e.g. `info,twopc_core=debug`).
pub const LOG: &str = "RUST_LOG";
/// Set by Lambda: the function's name (the default coordinator id).
pub const FUNCTION_NAME: &str = "AWS_LAMBDA_FUNCTION_NAME";
/// Set by Lambda when the function's application log level is configured (`LoggingConfig`,
/// JSON log format): `TRACE` … `FATAL`. It sets the level of the project's own crates,
/// over `RUST_LOG`.
pub const LAMBDA_LOG_LEVEL: &str = "AWS_LAMBDA_LOG_LEVEL";
/// Set by the Lambda runtime for the invocation in progress: its X-Ray trace header
/// (`twopc_runtime::trace`'s fallback).
pub const LAMBDA_TRACE_ID: &str = "_X_AMZN_TRACE_ID";

/// The stream processor's tables as JSON: table → `"transactions"` or
/// `{"participant": NAME, "key": {...}}` (stream-processor).
pub const STREAM_TABLES: &str = "TWOPC_STREAM_TABLES";
/// The Firehose delivery stream of the data lake (stream-processor).
pub const DELIVERY_STREAM: &str = "TWOPC_DELIVERY_STREAM";
/// The WebSocket subscriptions table (stream-processor, connections).
pub const CONNECTIONS_TABLE: &str = "TWOPC_CONNECTIONS_TABLE";
/// A Firehose endpoint URL (moto, a local emulator); unset in AWS (stream-processor).
pub const FIREHOSE_ENDPOINT: &str = "TWOPC_FIREHOSE_ENDPOINT";
/// The WebSocket API's management endpoint (stream-processor).
pub const WEBSOCKET_ENDPOINT: &str = "TWOPC_WEBSOCKET_ENDPOINT";
/// The opt-in shared demo token: when set, `$connect` also admits `?token=` equal to it
/// (ws-authorizer).
pub const WS_TOKEN: &str = "TWOPC_WS_TOKEN";
/// The OIDC issuer WebSocket tokens must come from, their `iss` (ws-authorizer).
pub const WS_ISSUER: &str = "TWOPC_WS_ISSUER";
/// The audience WebSocket tokens must name in `aud` (ws-authorizer).
pub const WS_AUDIENCE: &str = "TWOPC_WS_AUDIENCE";
/// The issuer's https JWKS URL; unset, no JWT is accepted (ws-authorizer).
pub const WS_JWKS_URL: &str = "TWOPC_WS_JWKS_URL";
/// The accepted JWT algorithms, comma-separated (default RS256,ES256; ws-authorizer).
pub const WS_ALGORITHMS: &str = "TWOPC_WS_ALGORITHMS";

/// A folder to record every AWS request the process makes in, one JSON line per distinct
/// (role, action, resource) (`twopc_runtime::record`), read from the process's environment:
/// `make test` and `make sam-local` set it, and a test holds `template.yaml`'s grants to what
/// was recorded. Unset in AWS.
pub const RECORD_AWS_CALLS: &str = "TWOPC_RECORD_AWS_CALLS";

/// Every variable the functions read (for documentation and the template check).
pub const ALL: &[&str] = &[
    TRANSACTIONS_TABLE,
    SERVICES,
    PARTICIPANT_TABLE,
    LOCK_TABLES,
    DYNAMODB_ENDPOINT,
    LAMBDA_ENDPOINT,
    HTTP_SIGNING_SECRET,
    COORDINATOR_ID,
    CALL_TIMEOUT_MS,
    COMMIT_MODE,
    HEAT_WINDOW_MS,
    MAX_PARTICIPANTS,
    DEFAULT_TIMEOUT_MS,
    MAX_TIMEOUT_MS,
    MAX_BODY_BYTES,
    SWEEP_MAX_TRANSACTIONS,
    SWEEP_MAX_LOCKS,
    SWEEP_CONCURRENCY,
    FENCE_CAPACITY,
    MAX_RESERVATIONS,
    FENCE_MARGIN_MS,
    METRICS_NAMESPACE,
    LOG,
    STREAM_TABLES,
    DELIVERY_STREAM,
    CONNECTIONS_TABLE,
    FIREHOSE_ENDPOINT,
    WEBSOCKET_ENDPOINT,
    WS_TOKEN,
    WS_ISSUER,
    WS_AUDIENCE,
    WS_JWKS_URL,
    WS_ALGORITHMS,
    RECORD_AWS_CALLS,
];
