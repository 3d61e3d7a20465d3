//! Who is calling over HTTP: the bearer token of each request, matched against the tokens
//! the config names (read from the environment). Headers that merely claim roles are never
//! trusted; a request without a known token is offered nothing.

use http::HeaderMap;
use http::header::AUTHORIZATION;
use subtle::ConstantTimeEq;
use txretry_tool::Caller;

use crate::config::TokenPlan;

/// The config's tokens and the caller each one stands for.
#[derive(Clone)]
pub struct Tokens {
    known: Vec<(Vec<u8>, Caller)>,
}

impl Tokens {
    /// The tokens of a config.
    pub fn new(tokens: &[TokenPlan]) -> Tokens {
        let known = tokens
            .iter()
            .map(|token| {
                let mut caller = Caller::new(token.roles.iter().cloned());
                if let Some(set) = &token.toolset {
                    caller = caller.persona(set.clone());
                }
                (token.token.trim().as_bytes().to_vec(), caller)
            })
            .collect();
        Tokens { known }
    }

    /// Whether no token is configured (then nobody is offered anything over HTTP).
    pub fn is_empty(&self) -> bool {
        self.known.is_empty()
    }

    /// The caller of a request: the one whose token is the request's
    /// `Authorization: Bearer …`; `None` for no token, another scheme, or an unknown token.
    pub fn caller(&self, headers: &HeaderMap) -> Option<Caller> {
        let mut values = headers.get_all(AUTHORIZATION).iter();
        let value = values.next()?.to_str().ok()?;
        if values.next().is_some() {
            return None;
        }
        let (scheme, token) = value.trim().split_once(' ')?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return None;
        }
        let token = token.trim().as_bytes();
        // Every known token is compared, in constant time each.
        let mut found = None;
        for (known, caller) in &self.known {
            if bool::from(known.as_slice().ct_eq(token)) {
                found = Some(caller.clone());
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens() -> Tokens {
        Tokens::new(&[TokenPlan {
            token: "support-token-0123456789".into(),
            env: "T".into(),
            roles: vec!["support".into()],
            toolset: Some("refunds".into()),
        }])
    }

    fn headers(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, value.parse().unwrap());
        headers
    }

    #[test]
    fn only_a_known_bearer_token_makes_a_caller() {
        let tokens = tokens();
        let caller = tokens.caller(&headers("Bearer support-token-0123456789"));
        assert_eq!(caller, Some(Caller::new(["support"]).persona("refunds")));
        assert_eq!(
            tokens.caller(&headers("Bearer support-token-012345678")),
            None
        );
        assert_eq!(
            tokens.caller(&headers("Basic support-token-0123456789")),
            None
        );
        assert_eq!(tokens.caller(&HeaderMap::new()), None);
        let mut claimed = HeaderMap::new();
        claimed.insert("x-txretry-roles", "support".parse().unwrap());
        assert_eq!(tokens.caller(&claimed), None);
    }
}
