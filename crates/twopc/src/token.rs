//! `twopc token`: mints a WebSocket token with the local stack's signing key (the one `twopc
//! serve` keeps in its data folder), for a principal and the topics it may subscribe to.

use std::path::PathBuf;

use serde_json::{Value, json};
use twopc_authorizer::Grants;
use twopc_authorizer::local::LocalIssuer;

use crate::cli::{CliFailure, EXIT_OK};
use twopc_core::ports::{Clock, SystemClock};

/// Options of `twopc token`.
#[derive(Clone, Debug, clap::Args)]
pub struct TokenArgs {
    /// Who the token names (`sub`).
    #[arg(long)]
    pub sub: String,
    /// A topic it may subscribe to: `<service>/<key>` (`accounts/alice`) or `<service>/*`;
    /// repeat for more.
    #[arg(long = "topic")]
    pub topics: Vec<String>,
    /// May subscribe to everything (`{"all": true}`, transaction outcomes).
    #[arg(long)]
    pub admin: bool,
    /// How long it is valid: seconds, or a number with `s`, `m`, `h` or `d`.
    #[arg(long, default_value = "1h", value_parser = parse_ttl)]
    pub ttl: u64,
    /// The local stack's data folder (where its signing key is kept; made if missing).
    #[arg(long, default_value = ".twopc", env = "TWOPC_DATA_DIR")]
    pub data_dir: PathBuf,
}

/// `90`, `90s`, `15m`, `1h`, `2d` → seconds (at least 1).
fn parse_ttl(text: &str) -> Result<u64, String> {
    let (digits, unit) = match text.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&text[..i], c),
        _ => (text, 's'),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?}: expected seconds, or a number with s, m, h or d"))?;
    let unit = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3_600,
        'd' => 86_400,
        _ => return Err(format!("{text:?}: the unit is s, m, h or d")),
    };
    n.checked_mul(unit)
        .filter(|s| *s > 0)
        .ok_or_else(|| format!("{text:?}: at least one second, and not absurdly long"))
}

/// Prints the token (with `--json`: `{"token", "sub", "exp"}`).
pub fn mint(args: &TokenArgs, json: bool) -> Result<u8, CliFailure> {
    let claim = json!({"topics": args.topics, "admin": args.admin});
    let grants =
        Grants::from_claim(Some(&claim)).map_err(|e| CliFailure::new(e.code(), e.to_string()))?;
    let issuer = LocalIssuer::load_or_create(&args.data_dir)
        .map_err(|e| CliFailure::new("signing_key", e.to_string()))?;
    let now = SystemClock.now_secs();
    let token = issuer
        .mint(&args.sub, &grants, now, args.ttl)
        .map_err(|e| CliFailure::new("signing_key", e))?;
    if json {
        let exp = now.saturating_add(args.ttl);
        println!(
            "{}",
            json!({"token": token, "sub": args.sub, "exp": Value::from(exp)})
        );
    } else {
        println!("{token}");
    }
    Ok(EXIT_OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttls_read_with_their_units() {
        assert_eq!(parse_ttl("90"), Ok(90));
        assert_eq!(parse_ttl("90s"), Ok(90));
        assert_eq!(parse_ttl("15m"), Ok(900));
        assert_eq!(parse_ttl("1h"), Ok(3_600));
        assert_eq!(parse_ttl("2d"), Ok(172_800));
        for bad in ["", "0", "h", "1w", "-1", "1.5h"] {
            assert!(parse_ttl(bad).is_err(), "{bad:?}");
        }
    }
}
