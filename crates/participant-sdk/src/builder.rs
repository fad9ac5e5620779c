//! [`Builder`]: a participant's parts named one at a time, what is not named defaulted.

use std::time::Duration;

use twopc_core::ports::{Clock, SystemClock, TxLog};

use crate::hooks::Hooks;
use crate::participant::{DEFAULT_CLAIM_MS, SdkParticipant};
use crate::store::StateStore;

/// Builds an [`SdkParticipant`]: the hooks, where its states are kept
/// ([`states`](Builder::states)) and the transaction log it resolves silent coordinators by
/// ([`log`](Builder::log)), both on DynamoDB with feature `dynamodb`
/// ([`dynamodb`](Builder::dynamodb), [`dynamodb_from_env`](Builder::dynamodb_from_env)).
/// The clock (the system's) and the claim of a `confirm` or `cancel` call (30 s) may be
/// changed.
///
/// ```no_run
/// # async fn wire(hooks: impl twopc_participant_sdk::Hooks + 'static)
/// #     -> Result<(), twopc_participant_sdk::StartError> {
/// use twopc_participant_sdk::SdkParticipant;
///
/// let participant = SdkParticipant::builder(hooks)
///     .dynamodb_from_env()
///     .await?
///     .claim(std::time::Duration::from_secs(10))
///     .build();
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `build`"]
pub struct Builder<H, S = (), L = (), C = SystemClock> {
    hooks: H,
    states: S,
    log: L,
    clock: C,
    claim_ms: u64,
}

impl<H: Hooks> SdkParticipant<H, (), (), SystemClock> {
    /// A builder around the service's hooks.
    pub fn builder(hooks: H) -> Builder<H> {
        Builder {
            hooks,
            states: (),
            log: (),
            clock: SystemClock,
            claim_ms: DEFAULT_CLAIM_MS,
        }
    }
}

impl<H, S, L, C> Builder<H, S, L, C> {
    /// Where the participant keeps each transaction's state.
    pub fn states<S2: StateStore>(self, states: S2) -> Builder<H, S2, L, C> {
        Builder {
            hooks: self.hooks,
            states,
            log: self.log,
            clock: self.clock,
            claim_ms: self.claim_ms,
        }
    }

    /// The coordinator's transaction log, read (and, for an abandoned transaction, aborted)
    /// when a coordinator goes silent.
    pub fn log<L2: TxLog>(self, log: L2) -> Builder<H, S, L2, C> {
        Builder {
            hooks: self.hooks,
            states: self.states,
            log,
            clock: self.clock,
            claim_ms: self.claim_ms,
        }
    }

    /// The clock (tests move a `ManualClock`).
    pub fn clock<C2: Clock>(self, clock: C2) -> Builder<H, S, L, C2> {
        Builder {
            hooks: self.hooks,
            states: self.states,
            log: self.log,
            clock,
            claim_ms: self.claim_ms,
        }
    }

    /// How long a `confirm` or `cancel` call may take: past it the call counts as interrupted,
    /// and the next commit, abort or sweep calls the hook again (default 30 s). `reserve` has
    /// the transaction's deadline instead.
    pub fn claim(mut self, claim: Duration) -> Self {
        self.claim_ms = u64::try_from(claim.as_millis()).unwrap_or(u64::MAX);
        self
    }
}

impl<H: Hooks, S: StateStore, L: TxLog, C: Clock> Builder<H, S, L, C> {
    /// The participant.
    pub fn build(self) -> SdkParticipant<H, S, L, C> {
        SdkParticipant::new(self.hooks, self.states, self.log, self.clock, self.claim_ms)
    }
}

#[cfg(feature = "dynamodb")]
mod dynamodb {
    use twopc_dynamo::DynamoTxLog;
    use twopc_function::env::{ConfigError, Env};
    use twopc_function::var;

    use super::Builder;
    use crate::dynamo::DynamoStates;
    use crate::start::StartError;

    /// Where a participant on DynamoDB finds its tables, from the environment.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub(crate) struct TableNames {
        pub(crate) states: String,
        pub(crate) transactions: String,
        pub(crate) endpoint: Option<String>,
    }

    impl TableNames {
        pub(crate) fn read<F: Fn(&str) -> Option<String>>(
            env: &Env<F>,
        ) -> Result<TableNames, ConfigError> {
            Ok(TableNames {
                states: env.required(
                    var::PARTICIPANT_TABLE,
                    "set it to the name of this service's state table (kind ParticipantState)",
                )?,
                transactions: env.required(
                    var::TRANSACTIONS_TABLE,
                    "set it to the name of the coordinator's transactions table",
                )?,
                endpoint: env.get(var::DYNAMODB_ENDPOINT),
            })
        }
    }

    impl<H, S, L, C> Builder<H, S, L, C> {
        /// Both tables on DynamoDB through `client`: the service's state table
        /// (`twopc_dynamo::tables::TableKind::ParticipantState`, see
        /// [`DynamoStates::create_table_if_missing`]) and the coordinator's transactions
        /// table.
        pub fn dynamodb(
            self,
            client: &aws_sdk_dynamodb::Client,
            states_table: impl Into<String>,
            transactions_table: impl Into<String>,
        ) -> Builder<H, DynamoStates, DynamoTxLog, C> {
            let log = DynamoTxLog::new(client.clone(), transactions_table);
            self.states(DynamoStates::new(client.clone(), states_table))
                .log(log)
        }

        /// [`Builder::dynamodb`] with what the environment names: the state table in
        /// `TWOPC_PARTICIPANT_TABLE`, the transactions table in `TWOPC_TRANSACTIONS_TABLE`,
        /// and, when `TWOPC_DYNAMODB_ENDPOINT` is set, DynamoDB Local there (a fixed region,
        /// dummy credentials); otherwise the AWS SDK's default chain. A missing variable is
        /// refused with its name.
        pub async fn dynamodb_from_env(
            self,
        ) -> Result<Builder<H, DynamoStates, DynamoTxLog, C>, StartError> {
            let tables = TableNames::read(&Env::process())?;
            let sdk = twopc_dynamo::aws_loader(tables.endpoint.is_some())
                .load()
                .await;
            let mut config = aws_sdk_dynamodb::config::Builder::from(&sdk);
            if let Some(url) = &tables.endpoint {
                config = config.endpoint_url(url);
            }
            let client = aws_sdk_dynamodb::Client::from_conf(config.build());
            Ok(self.dynamodb(&client, tables.states, tables.transactions))
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn env(
            pairs: &'static [(&'static str, &'static str)],
        ) -> Env<impl Fn(&str) -> Option<String>> {
            Env::new(move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_owned())
            })
        }

        #[test]
        fn the_tables_come_from_the_environment_and_a_missing_one_is_named() {
            let t = TableNames::read(&env(&[
                (var::PARTICIPANT_TABLE, "payments-state"),
                (var::TRANSACTIONS_TABLE, "tx"),
                (var::DYNAMODB_ENDPOINT, ""),
            ]))
            .expect("both tables");
            assert_eq!(t.states, "payments-state");
            assert_eq!(t.transactions, "tx");
            assert_eq!(t.endpoint, None, "empty is AWS's own");
            let e = TableNames::read(&env(&[(var::TRANSACTIONS_TABLE, "tx")])).unwrap_err();
            assert!(e.to_string().contains(var::PARTICIPANT_TABLE), "{e}");
            let e = TableNames::read(&env(&[(var::PARTICIPANT_TABLE, "p")])).unwrap_err();
            assert!(e.to_string().contains(var::TRANSACTIONS_TABLE), "{e}");
        }
    }
}
