//! The shared demo token: an explicit opt-in (a secret the operator sets), compared in constant
//! time so the comparison's duration tells nothing about how much of a guess was right. A
//! connection admitted by it is the principal [`SHARED_PRINCIPAL`] with every topic.

use crate::AccessRefusal;
use crate::grants::Grants;
use crate::verify::Principal;

/// The principal of connections admitted by the shared token.
pub const SHARED_PRINCIPAL: &str = "shared-token";

/// `given` against the configured token, in constant time (over the SHA-256 of each, so not even
/// the length leaks): the principal it admits until `expires_at`, or [`AccessRefusal::SharedToken`].
pub fn check(expected: &str, given: &str, expires_at: u64) -> Result<Principal, AccessRefusal> {
    let digest = |s: &str| aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, s.as_bytes());
    let (a, b) = (digest(expected), digest(given));
    aws_lc_rs::constant_time::verify_slices_are_equal(a.as_ref(), b.as_ref())
        .map_err(|_| AccessRefusal::SharedToken)?;
    Ok(Principal {
        sub: SHARED_PRINCIPAL.to_owned(),
        exp: expires_at,
        grants: Grants::admin(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_shared_token_admits_and_it_grants_everything() {
        let p = check("s3cret-demo", "s3cret-demo", 99).expect("same");
        assert_eq!(
            (p.sub.as_str(), p.exp, p.grants.admin),
            (SHARED_PRINCIPAL, 99, true)
        );
        for wrong in ["", "s3cret", "s3cret-demo ", "S3CRET-DEMO"] {
            assert_eq!(
                check("s3cret-demo", wrong, 99),
                Err(AccessRefusal::SharedToken),
                "{wrong:?}"
            );
        }
    }
}
