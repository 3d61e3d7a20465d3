//! Who is asking, for each request: a resolver of the server's choosing, or the request's
//! HTTP headers.

use rmcp::RoleServer;
use rmcp::service::RequestContext;

use crate::Caller;

/// The request header with the caller's roles, comma-separated (`x-txretry-roles:
/// support, teller`); it may be repeated. Present but empty: a caller with no roles. Absent:
/// the caller is not resolved (offered nothing).
pub const ROLES_HEADER: &str = "x-txretry-roles";

/// The request header with the persona the caller speaks as (optional; at most once, not
/// empty).
pub const PERSONA_HEADER: &str = "x-txretry-persona";

/// The request header with the agent the caller runs as (optional; at most once, not empty).
pub const AGENT_HEADER: &str = "x-txretry-agent";

/// Decides who is asking, for every `tools/list` and `tools/call` request.
///
/// Implemented for every `Fn(&RequestContext<RoleServer>) -> Option<Caller>`. `None` means the
/// caller cannot be resolved: the request is offered nothing and refused everything, with the
/// same error as an unknown tool.
///
/// The context carries the request's `_meta`, the peer (with the client's `initialize`
/// information) and, over streamable HTTP, the HTTP request ([`http_headers`]).
pub trait ResolveCaller: Send + Sync + 'static {
    /// The caller of this request, if it can be resolved.
    fn resolve(&self, request: &RequestContext<RoleServer>) -> Option<Caller>;
}

impl<F> ResolveCaller for F
where
    F: Fn(&RequestContext<RoleServer>) -> Option<Caller> + Send + Sync + 'static,
{
    fn resolve(&self, request: &RequestContext<RoleServer>) -> Option<Caller> {
        self(request)
    }
}

/// The HTTP headers of the request, when it came over rmcp's streamable HTTP server (which
/// puts the request's [`http::request::Parts`] into the context's extensions); `None` for
/// stdio and other transports.
pub fn http_headers(request: &RequestContext<RoleServer>) -> Option<&http::HeaderMap> {
    request
        .extensions
        .get::<http::request::Parts>()
        .map(|parts| &parts.headers)
}

/// The caller named by the headers [`ROLES_HEADER`] (required), [`PERSONA_HEADER`] and
/// [`AGENT_HEADER`] (optional). `None` (not resolved) when the roles header is absent, a value
/// is not valid UTF-8, or the persona or agent header is repeated or empty.
///
/// The headers are trusted as they are: put the server behind something that sets them
/// (a gateway that authenticated the client), or resolve callers with your own
/// [`ResolveCaller`] that checks a credential.
///
/// ```
/// use http::HeaderMap;
/// use txretry_tool::Caller;
/// use txretry_tool::mcp::caller_from_headers;
///
/// let mut headers = HeaderMap::new();
/// assert_eq!(caller_from_headers(&headers), None);
/// headers.insert("x-txretry-roles", "support, teller".parse().unwrap());
/// headers.insert("x-txretry-persona", "refunds".parse().unwrap());
/// assert_eq!(
///     caller_from_headers(&headers),
///     Some(Caller::new(["support", "teller"]).persona("refunds"))
/// );
/// ```
pub fn caller_from_headers(headers: &http::HeaderMap) -> Option<Caller> {
    let mut values = headers.get_all(ROLES_HEADER).iter().peekable();
    values.peek()?;
    let mut roles = Vec::new();
    for value in values {
        let value = value.to_str().ok()?;
        roles.extend(
            value
                .split(',')
                .map(str::trim)
                .filter(|role| !role.is_empty())
                .map(str::to_owned),
        );
    }
    let mut caller = Caller::new(roles);
    if let Some(persona) = single(headers, PERSONA_HEADER)? {
        caller = caller.persona(persona);
    }
    if let Some(agent) = single(headers, AGENT_HEADER)? {
        caller = caller.agent(agent);
    }
    Some(caller)
}

/// `Some(None)`: absent; `Some(Some(v))`: present once, not empty; `None`: unusable.
fn single<'h>(headers: &'h http::HeaderMap, name: &str) -> Option<Option<&'h str>> {
    let mut values = headers.get_all(name).iter();
    let Some(value) = values.next() else {
        return Some(None);
    };
    if values.next().is_some() {
        return None;
    }
    let value = value.to_str().ok()?.trim();
    (!value.is_empty()).then_some(Some(value))
}
