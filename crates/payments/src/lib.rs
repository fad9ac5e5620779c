//! # payments — a service with its own logic, on `twopc-participant-sdk`
//!
//! The worked example of the participant SDK: a card payment is authorised in prepare (`reserve`),
//! captured in commit (`confirm`) and voided in abort (`cancel`). The card network is
//! [`CardGateway`], a simulation in memory with an injectable decline; the protocol around it
//! (duplicates, abort before prepare, late prepares, a silent coordinator) is the library's.
//!
//! - [`Payment`]: the payload a request gives `payments` (`{"card": "4242", "amount": 12.50}`),
//!   read by the SDK before `reserve`: one it cannot read is a `no` vote, reason `invalid`.
//! - [`CardGateway`]: authorisations by transaction, what was captured and voided; implements
//!   [`Hooks`].
//! - [`routes`]: the gateway's read API (`GET /authorisations`).
//! - `main.rs`: serves it over http (the SDK's signed router) with its state in DynamoDB.
//!
//! As a Lambda function instead, `main` would build the same participant and hand it to
//! `twopc_participant_sdk::lambda::run` (feature `lambda`), with a scheduled sweep elsewhere.
//! `payments` has no such entry: its simulated gateway lives in the process's memory, which
//! Lambda's instances do not share.
#![warn(missing_docs)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Deserialize;
use serde_json::{Value, json};
use twopc_participant_sdk::http::axum::Router;
use twopc_participant_sdk::http::axum::http::header::CONTENT_TYPE;
use twopc_participant_sdk::http::axum::routing::get;
use twopc_participant_sdk::{Call, Decimal, HookError, Hooks, Reservation, TxId};

/// What a request asks of `payments`: charge `amount` (a positive decimal, exact) to `card`.
/// The SDK reads it from the transaction's payload (`{"card": "4242", "amount": 12.50}`); one
/// that does not read is refused with the `invalid` vote and serde's reason.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "PaymentFields")]
pub struct Payment {
    /// The card (a token; never a real number here).
    pub card: String,
    /// The amount.
    pub amount: Decimal,
}

/// A payment's fields as sent, before their rules are checked.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PaymentFields {
    card: String,
    amount: Decimal,
}

impl TryFrom<PaymentFields> for Payment {
    type Error = &'static str;

    fn try_from(f: PaymentFields) -> Result<Payment, Self::Error> {
        if f.card.is_empty() {
            return Err("\"card\": expected a non-empty string");
        }
        if !f.amount.is_positive() {
            return Err("\"amount\": must be more than 0");
        }
        Ok(Payment {
            card: f.card,
            amount: f.amount,
        })
    }
}

/// Where an authorisation stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthStatus {
    /// Authorised, neither captured nor voided: the card's funds are held.
    Held,
    /// Captured: the customer paid.
    Captured,
    /// Voided: the hold was released.
    Voided,
}

impl AuthStatus {
    /// Its name in the ledger's JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            AuthStatus::Held => "held",
            AuthStatus::Captured => "captured",
            AuthStatus::Voided => "voided",
        }
    }
}

/// One authorisation: which transaction asked, what, and where it stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Authorisation {
    /// The transaction it was authorised for.
    pub tx_id: TxId,
    /// When that transaction began: with the id, the transaction (a key used again after its
    /// window reuses the id).
    pub began: u64,
    /// What was authorised.
    pub payment: Payment,
    /// Where it stands.
    pub status: AuthStatus,
}

impl Authorisation {
    /// As the ledger's JSON shows it (`amount` a number with its exact text).
    pub fn to_json(&self) -> Value {
        let amount = self
            .payment
            .amount
            .as_str()
            .parse::<serde_json::Number>()
            .map_or_else(
                |_| Value::String(self.payment.amount.as_str().into()),
                Value::Number,
            );
        json!({
            "txId": self.tx_id,
            "card": self.payment.card,
            "amount": amount,
            "status": self.status.as_str(),
        })
    }
}

#[derive(Debug, Default)]
struct Ledger {
    /// Every authorisation, in the order they were made.
    authorisations: Vec<Authorisation>,
    /// Transactions cancelled (an authorisation voided, or none made).
    voided: BTreeSet<TxId>,
    declined_cards: BTreeSet<String>,
}

impl Ledger {
    fn find(&mut self, tx: &TxId, began: u64) -> Option<&mut Authorisation> {
        self.authorisations
            .iter_mut()
            .find(|a| &a.tx_id == tx && a.began == began)
    }

    fn with(&self, status: AuthStatus) -> BTreeMap<TxId, Payment> {
        self.authorisations
            .iter()
            .filter(|a| a.status == status)
            .map(|a| (a.tx_id.clone(), a.payment.clone()))
            .collect()
    }
}

/// A simulated card gateway: authorisations held by transaction until captured or voided. Clones
/// share it. Declines are injected per card ([`CardGateway::decline`]); the card `"0002"` is
/// always declined. In memory: a restart forgets it (the participant's state, in DynamoDB,
/// does not).
#[derive(Clone, Debug, Default)]
pub struct CardGateway {
    ledger: Arc<Mutex<Ledger>>,
}

/// The card every gateway declines (the demo's failing order).
pub const DECLINED_CARD: &str = "0002";

fn poisoned<T>(_: T) -> HookError {
    HookError::new("the gateway's ledger is poisoned (a call panicked)")
}

impl CardGateway {
    fn ledger(&self) -> Result<MutexGuard<'_, Ledger>, HookError> {
        self.ledger.lock().map_err(poisoned)
    }

    /// From now on, authorisations on `card` are declined.
    pub fn decline(&self, card: &str) {
        if let Ok(mut l) = self.ledger() {
            l.declined_cards.insert(card.to_owned());
        }
    }

    /// Every authorisation, in the order they were made.
    pub fn authorisations(&self) -> Vec<Authorisation> {
        self.ledger()
            .map(|l| l.authorisations.clone())
            .unwrap_or_default()
    }

    /// Authorisations held (neither captured nor voided).
    pub fn held(&self) -> BTreeMap<TxId, Payment> {
        self.ledger()
            .map(|l| l.with(AuthStatus::Held))
            .unwrap_or_default()
    }

    /// Captured payments.
    pub fn captured(&self) -> BTreeMap<TxId, Payment> {
        self.ledger()
            .map(|l| l.with(AuthStatus::Captured))
            .unwrap_or_default()
    }

    /// Transactions whose authorisation was voided (or that had none to void).
    pub fn voided(&self) -> BTreeSet<TxId> {
        self.ledger().map(|l| l.voided.clone()).unwrap_or_default()
    }
}

/// The gateway's own read API, beside the participant's routes: `GET /authorisations`, every
/// authorisation in the order made (`[{"txId", "card", "amount", "status"}]`).
pub fn routes(gateway: CardGateway) -> Router {
    Router::new().route(
        "/authorisations",
        get(move || {
            let gateway = gateway.clone();
            async move {
                let list: Vec<Value> = gateway
                    .authorisations()
                    .iter()
                    .map(Authorisation::to_json)
                    .collect();
                (
                    [(CONTENT_TYPE, "application/json")],
                    Value::Array(list).to_string(),
                )
            }
        }),
    )
}

impl Hooks for CardGateway {
    type Payload = Payment;

    async fn reserve(&self, call: Call<'_, Payment>) -> Result<Reservation, HookError> {
        let payment = call.payload;
        let mut l = self.ledger()?;
        if payment.card == DECLINED_CARD || l.declined_cards.contains(&payment.card) {
            return Ok(Reservation::condition(format!(
                "the card {} was declined",
                payment.card
            )));
        }
        // Idempotent per transaction: a repeated authorisation finds the first.
        if l.find(call.tx_id, call.began).is_none() {
            l.authorisations.push(Authorisation {
                tx_id: call.tx_id.clone(),
                began: call.began,
                payment: payment.clone(),
                status: AuthStatus::Held,
            });
        }
        Ok(Reservation::Held)
    }

    async fn confirm(&self, call: Call<'_, Payment>) -> Result<(), HookError> {
        let mut l = self.ledger()?;
        // Idempotent per transaction: a repeated capture finds it captured.
        if let Some(a) = l
            .find(call.tx_id, call.began)
            .filter(|a| a.status == AuthStatus::Held)
        {
            a.status = AuthStatus::Captured;
        }
        Ok(())
    }

    async fn cancel(&self, call: Call<'_, Payment>) -> Result<(), HookError> {
        let mut l = self.ledger()?;
        // Also called for a reservation that never happened (an interrupted `reserve`).
        if let Some(a) = l
            .find(call.tx_id, call.began)
            .filter(|a| a.status == AuthStatus::Held)
        {
            a.status = AuthStatus::Voided;
        }
        l.voided.insert(call.tx_id.clone());
        Ok(())
    }
}
