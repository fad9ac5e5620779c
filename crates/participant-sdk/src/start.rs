//! What can keep a participant service from starting, or stop it serving.

use twopc_core::ports::PortError;
use twopc_function::env::ConfigError;

/// Why a participant service could not start (or stopped serving). Each names what to fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// An environment variable is missing or malformed (the error names it).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The state table could not be found or created.
    #[error("the state table {table} could not be made ready")]
    Table {
        /// The table.
        table: String,
        /// Why.
        #[source]
        source: PortError,
    },
    /// The address could not be listened on.
    #[error("cannot listen on {addr} (in use, or not this host's?)")]
    Listen {
        /// The address.
        addr: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The HTTP server stopped with an error.
    #[error("the HTTP server stopped")]
    Serve(#[source] std::io::Error),
}
