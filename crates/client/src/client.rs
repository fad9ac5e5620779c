//! [`Client`]: `submit` with an idempotency key and bounded retries, `status`, `wait`.
//!
//! Retries are safe because every attempt of a submit carries the same `Idempotency-Key`: the
//! API derives the transaction's id from it, so a repeat finds the first attempt's transaction
//! (and helps it finish) instead of starting another. What is repeated: a connection that failed,
//! a timeout, `429`, and the `5xx` answers (`503 unavailable` says so itself). What is not: an
//! answer (`200`, `202`, `409`) or a refusal (`4xx`).

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HOST, HeaderValue};
use hyper::{Method, Request, Uri};
use rand::Rng;
use serde_json::Value;
use twopc_core::ids::TxId;

use crate::error::{Error, api_error, retryable_status};
use crate::http::Http;
use crate::outcome::TxAnswer;
use crate::transaction::Transaction;

/// The header that names a submit's idempotency key.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// Where the API is and how to call it.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Config {
    /// The API's base URL (`http://127.0.0.1:3000`, `https://{api}.execute-api.{region}.amazonaws.com/Prod`).
    pub base_url: String,
    /// Each attempt (connect, send, read the answer) is abandoned after this.
    pub timeout: Duration,
    /// Attempts after the first one, for failures that may pass.
    pub retries: u32,
    /// The delay before the first retry; doubled for each next one, up to [`Config::max_backoff`],
    /// each delay drawn between half and all of it.
    pub backoff: Duration,
    /// The longest delay between two attempts.
    pub max_backoff: Duration,
    /// How often [`Client::wait`] asks at first (doubled up to [`Config::max_backoff`]).
    pub poll: Duration,
    /// SigV4 signing (API Gateway with IAM authorisation); `None` sends requests unsigned.
    #[cfg(feature = "sigv4")]
    pub signing: Option<crate::sigv4::SigV4>,
    /// A bearer token sent as `Authorization: Bearer <token>` ([`Config::bearer`]).
    bearer: Option<Token>,
}

/// A bearer token, kept out of `Debug` output.
#[derive(Clone)]
struct Token(String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl Config {
    /// Defaults: 30 s per attempt (API Gateway gives up on its integration at 29 s), 3 retries
    /// from 100 ms up to 2 s apart, unsigned.
    pub fn new(base_url: impl Into<String>) -> Self {
        Config {
            base_url: base_url.into(),
            timeout: Duration::from_secs(30),
            retries: 3,
            backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(2),
            poll: Duration::from_millis(100),
            #[cfg(feature = "sigv4")]
            signing: None,
            bearer: None,
        }
    }

    /// Sends `Authorization: Bearer <token>` with every request (the local stack's operator
    /// API wants an admin token); not with SigV4, whose signature is the `Authorization` header.
    pub fn bearer(mut self, token: impl Into<String>) -> Self {
        self.bearer = Some(Token(token.into()));
        self
    }

    /// Each attempt's time limit.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Retries after the first attempt, the first `backoff` apart.
    pub fn retries(mut self, retries: u32, backoff: Duration) -> Self {
        self.retries = retries;
        self.backoff = backoff;
        self
    }

    /// Signs every request (SigV4, service `execute-api`).
    #[cfg(feature = "sigv4")]
    pub fn sigv4(mut self, signing: crate::sigv4::SigV4) -> Self {
        self.signing = Some(signing);
        self
    }
}

/// A client of the coordinator's HTTP API. Cheap to clone (the connection pool is shared).
#[derive(Clone, Debug)]
pub struct Client {
    config: Config,
    base: String,
    host: HeaderValue,
    http: Http,
    #[cfg(feature = "sigv4")]
    signer: std::sync::Arc<tokio::sync::OnceCell<crate::sigv4::Signer>>,
}

impl Client {
    /// A client of the API at `config.base_url` (`http` or `https`). Credentials for signing are
    /// resolved on the first request.
    pub fn new(config: Config) -> Result<Client, Error> {
        let base = config.base_url.trim_end_matches('/').to_owned();
        let uri: Uri = base
            .parse()
            .map_err(|e| Error::Invalid(format!("base URL {base:?}: {e}")))?;
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => {
                return Err(Error::Invalid(format!(
                    "base URL {base:?}: expected http://... or https://..."
                )));
            }
        };
        let authority = uri
            .authority()
            .ok_or_else(|| Error::Invalid(format!("base URL {base:?}: no host")))?;
        // The host as hyper would send it (no default port), named before signing so the signed
        // and the sent `host` are the same.
        let host = match (authority.port_u16(), https) {
            (Some(443), true) | (Some(80), false) | (None, _) => authority.host().to_owned(),
            _ => authority.as_str().to_owned(),
        };
        let host = HeaderValue::from_str(&host)
            .map_err(|e| Error::Invalid(format!("base URL {base:?}: {e}")))?;
        Ok(Client {
            http: Http::new(https, config.timeout)?,
            base,
            host,
            config,
            #[cfg(feature = "sigv4")]
            signer: Default::default(),
        })
    }

    /// Submits `tx`. With no `idempotency_key`, one is made (a random UUID); every attempt
    /// carries the same, so a retry never runs the transaction twice. `Ok` is the API's answer:
    /// committed, aborted (with its [`Abort`](crate::Abort) code), or decided but not finished
    /// (`202`: [`Client::wait`] for it). A request the API refuses is [`Error::Api`]; retries
    /// spent without any answer, [`Error::Undetermined`].
    pub async fn submit(
        &self,
        tx: &Transaction,
        idempotency_key: Option<&str>,
    ) -> Result<TxAnswer, Error> {
        self.submit_json(&tx.to_json(), idempotency_key).await
    }

    /// [`Client::submit`] with a body as JSON (a transaction read from a file, say).
    pub async fn submit_json(
        &self,
        body: &Value,
        idempotency_key: Option<&str>,
    ) -> Result<TxAnswer, Error> {
        let key = idempotency_key.map_or_else(|| TxId::random().to_string(), str::to_owned);
        let key_header = HeaderValue::from_str(&key).map_err(|_| {
            Error::Invalid(format!(
                "Idempotency-Key {key:?} must be 1 to 255 visible ASCII characters"
            ))
        })?;
        let body = Bytes::from(body.to_string());
        let mut maybe_received = false;
        let mut attempt = 0;
        let last = loop {
            let result = self
                .attempt(
                    Method::POST,
                    "/transactions",
                    Some(&key_header),
                    body.clone(),
                )
                .await;
            let error = match result {
                Ok((status @ (200 | 202), answer)) => return TxAnswer::from_answer(status, answer),
                // A 409 with a status is an aborted transaction; without, a refusal
                // (`idempotency_key_reused`).
                Ok((409, answer)) if answer.get("status").is_some() => {
                    return TxAnswer::from_answer(409, answer);
                }
                Ok((status, answer)) if !retryable_status(status) => {
                    return Err(if (200..300).contains(&status) {
                        Error::Protocol {
                            status,
                            message: format!("a success that is not a transaction: {answer}"),
                        }
                    } else {
                        api_error(status, answer)
                    });
                }
                Ok((status, answer)) => api_error(status, answer),
                Err(e @ (Error::Invalid(_) | Error::Signing { .. })) => return Err(e),
                Err(e) => e,
            };
            maybe_received |= error.maybe_received();
            if attempt >= self.config.retries {
                break error;
            }
            tokio::time::sleep(self.backoff(attempt)).await;
            attempt += 1;
        };
        if maybe_received {
            Err(Error::Undetermined {
                tx_id: TxId::for_idempotency_key(&key),
                idempotency_key: key,
                last: Box::new(last),
            })
        } else {
            Err(last)
        }
    }

    /// The transaction as it stands (`GET /transactions/{txId}`); repeated like a submit. An
    /// unknown id is [`Error::Api`] with [`ErrorCode::NotFound`](crate::ErrorCode::NotFound).
    pub async fn status(&self, tx_id: &TxId) -> Result<TxAnswer, Error> {
        let path = format!("/transactions/{tx_id}");
        let mut attempt = 0;
        loop {
            let error = match self.attempt(Method::GET, &path, None, Bytes::new()).await {
                Ok((200, answer)) => return TxAnswer::from_answer(200, answer),
                Ok((status, answer)) if !retryable_status(status) => {
                    return Err(api_error(status, answer));
                }
                Ok((status, answer)) => api_error(status, answer),
                Err(e @ (Error::Invalid(_) | Error::Signing { .. })) => return Err(e),
                Err(e) => e,
            };
            if attempt >= self.config.retries {
                return Err(error);
            }
            tokio::time::sleep(self.backoff(attempt)).await;
            attempt += 1;
        }
    }

    /// One page of unfinished transactions (`GET /transactions?status=pending`), oldest
    /// deadline first: with `overdue`, only those past their deadline; `limit` (1 to 100) a
    /// page; `next` from the previous page. Repeated like [`Client::status`].
    pub async fn pending(
        &self,
        overdue: bool,
        limit: Option<u32>,
        next: Option<&str>,
    ) -> Result<Pending, Error> {
        let mut path = String::from("/transactions?status=pending");
        if overdue {
            path.push_str("&overdue=true");
        }
        if let Some(limit) = limit {
            path.push_str(&format!("&limit={limit}"));
        }
        if let Some(next) = next {
            // A cursor is `<deadline>.<uuid>`: digits, hex, dots and dashes, nothing to encode.
            if !next
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
            {
                return Err(Error::Invalid(format!(
                    "{next:?} is not a page cursor: pass the \"next\" of the previous page"
                )));
            }
            path.push_str(&format!("&next={next}"));
        }
        let mut attempt = 0;
        loop {
            let error = match self.attempt(Method::GET, &path, None, Bytes::new()).await {
                Ok((200, answer)) => return Pending::from_answer(answer),
                Ok((status, answer)) if !retryable_status(status) => {
                    return Err(api_error(status, answer));
                }
                Ok((status, answer)) => api_error(status, answer),
                Err(e @ (Error::Invalid(_) | Error::Signing { .. })) => return Err(e),
                Err(e) => e,
            };
            if attempt >= self.config.retries {
                return Err(error);
            }
            tokio::time::sleep(self.backoff(attempt)).await;
            attempt += 1;
        }
    }

    /// Asks for the transaction until it is finished (`COMMITTED` or `ABORTED`), at most for
    /// `within`: for a submit answered `202`. A decided transaction always finishes (the sweeper
    /// completes what its coordinator left); past `within`, [`Error::Unfinished`].
    pub async fn wait(&self, tx_id: &TxId, within: Duration) -> Result<TxAnswer, Error> {
        let started = tokio::time::Instant::now();
        let mut every = self.config.poll;
        loop {
            let outcome = self.status(tx_id).await?;
            if outcome.is_finished() {
                return Ok(outcome);
            }
            let waited = started.elapsed();
            if waited + every > within {
                return Err(Error::Unfinished {
                    tx_id: outcome.tx_id,
                    status: outcome.status,
                    waited,
                });
            }
            tokio::time::sleep(every).await;
            every = (every * 2).min(self.config.max_backoff);
        }
    }

    /// One request to `path` (which starts with `/` and may carry a query), built and signed
    /// like every other, and not retried: for a caller that relays requests it is given (the
    /// operator console), whose own user decides whether to ask again. `Ok` is any answer, its
    /// status and JSON body (numbers keep their text).
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: Bytes,
    ) -> Result<(u16, Value), Error> {
        if !path.starts_with('/') {
            return Err(Error::Invalid(format!("{path:?}: a path starts with /")));
        }
        self.attempt(method, path, None, body).await
    }

    /// The delay before retry `attempt` (0 for the first): exponential, capped, jittered.
    fn backoff(&self, attempt: u32) -> Duration {
        let full = self
            .config
            .backoff
            .saturating_mul(2u32.saturating_pow(attempt))
            .min(self.config.max_backoff);
        full.mul_f64(rand::rng().random_range(0.5..=1.0))
    }

    /// One attempt: the request built (and signed) afresh, sent, its answer read.
    async fn attempt(
        &self,
        method: Method,
        path: &str,
        key: Option<&HeaderValue>,
        body: Bytes,
    ) -> Result<(u16, Value), Error> {
        let url = format!("{}{path}", self.base);
        let mut builder = Request::builder()
            .method(method)
            .uri(&url)
            .header(HOST, self.host.clone())
            .header(ACCEPT, "application/json");
        if !body.is_empty() {
            builder = builder.header(CONTENT_TYPE, "application/json");
        }
        if let Some(k) = key {
            builder = builder.header(IDEMPOTENCY_KEY, k.clone());
        }
        if let Some(Token(token)) = &self.config.bearer {
            builder = builder.header(AUTHORIZATION, format!("Bearer {token}"));
        }
        #[allow(unused_mut)] // signed in place with `sigv4`
        let mut request = builder
            .body(Full::new(body.clone()))
            .map_err(|e| Error::Invalid(format!("{url:?}: {e}")))?;
        #[cfg(feature = "sigv4")]
        if let Some(signing) = &self.config.signing {
            let host = self.host.to_str().unwrap_or_default();
            let signer = self
                .signer
                .get_or_try_init(|| crate::sigv4::Signer::new(signing, host))
                .await?;
            signer.sign(&mut request, &body).await?;
        }
        self.http.exchange(request).await
    }
}

/// A page of [`Client::pending`].
#[derive(Clone, Debug)]
pub struct Pending {
    /// The unfinished transactions, oldest deadline first.
    pub transactions: Vec<TxAnswer>,
    /// The cursor of the next page; `None` on the last.
    pub next: Option<String>,
}

impl Pending {
    fn from_answer(answer: Value) -> Result<Pending, Error> {
        let bad = |message: String| Error::Protocol {
            status: 200,
            message,
        };
        let transactions = answer
            .get("transactions")
            .and_then(Value::as_array)
            .ok_or_else(|| bad(format!("a listing without \"transactions\": {answer}")))?
            .iter()
            .map(|t| TxAnswer::from_answer(200, t.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        let next = match answer.get("next") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => return Err(bad(format!("\"next\" is not a string: {other}"))),
        };
        Ok(Pending { transactions, next })
    }
}
