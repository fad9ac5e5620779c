//! The principal as it travels from the `$connect` authorizer to the connections function: API
//! Gateway hands the authorizer's `principalId` and `context` (strings, numbers, booleans only)
//! to the route as `requestContext.authorizer`; the local gateway fills in the same fields.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::AccessRefusal;
use crate::grants::Grants;
use crate::verify::Principal;

/// The principal's name.
pub const PRINCIPAL_ID: &str = "principalId";
/// The grants, as a JSON string.
pub const GRANTS: &str = "grants";
/// The token's expiry (unix seconds).
pub const EXPIRES: &str = "exp";

/// The authorizer's `context` for `p` (without `principalId`, which the response carries
/// beside it).
pub fn to_context(p: &Principal) -> Map<String, Value> {
    let grants = serde_json::to_string(&p.grants).unwrap_or_else(|_| "{}".into());
    [
        (GRANTS.to_owned(), Value::String(grants)),
        (EXPIRES.to_owned(), Value::from(p.exp)),
    ]
    .into_iter()
    .collect()
}

/// The principal of a route event's `requestContext.authorizer`, or [`AccessRefusal::NoPrincipal`]
/// when there is none (no authorizer ran: closed, not open).
pub fn from_fields(fields: &HashMap<String, Value>) -> Result<Principal, AccessRefusal> {
    let sub = fields
        .get(PRINCIPAL_ID)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or(AccessRefusal::NoPrincipal)?;
    // API Gateway may pass context numbers as strings: read both.
    let exp = match fields.get(EXPIRES) {
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(s)) => s.parse().ok(),
        _ => None,
    }
    .ok_or(AccessRefusal::NoPrincipal)?;
    let grants: Grants = fields
        .get(GRANTS)
        .and_then(Value::as_str)
        .and_then(|g| serde_json::from_str(g).ok())
        .ok_or(AccessRefusal::NoPrincipal)?;
    Ok(Principal {
        sub: sub.to_owned(),
        exp,
        grants,
    })
}

/// The fields API Gateway would put in `requestContext.authorizer` for `p` (the local gateway).
pub fn to_fields(p: &Principal) -> HashMap<String, Value> {
    let mut fields: HashMap<String, Value> = to_context(p).into_iter().collect();
    fields.insert(PRINCIPAL_ID.to_owned(), Value::String(p.sub.clone()));
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_principal_survives_the_trip_through_the_authorizer_context() {
        let p = Principal {
            sub: "alice".into(),
            exp: 1_800_000_000,
            grants: Grants {
                admin: false,
                topics: vec!["accounts/alice".into()],
            },
        };
        assert_eq!(from_fields(&to_fields(&p)), Ok(p.clone()));
        let mut as_strings = to_fields(&p);
        as_strings.insert(EXPIRES.into(), Value::String("1800000000".into()));
        assert_eq!(from_fields(&as_strings), Ok(p));
    }

    #[test]
    fn no_authorizer_fields_is_no_principal() {
        assert_eq!(
            from_fields(&HashMap::new()),
            Err(AccessRefusal::NoPrincipal)
        );
    }
}
