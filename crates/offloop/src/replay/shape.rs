//! The shape guard of the schema-hash levels (reference §4.4 `schemaMatchWithHttpShape`).
//!
//! Two requests with the same schema can still be different calls: another endpoint, method
//! or GraphQL operation. A schema-level candidate must agree with the request on the GraphQL
//! query (when both have one), and for `http`/`https` on the method, host and path (each when
//! both sides have it) and on the set of query-parameter keys. Both sides are read from the
//! decoded canonical input, so a base64 JSON body is seen as the object it encodes.

use std::borrow::Cow;
use std::collections::BTreeSet;

use percent_encoding::percent_decode_str;
use serde::Deserialize;
use serde_json::value::RawValue;

/// What the guard compares, read once per span.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Shape {
    /// The input is a JSON object (the request side must be one).
    pub is_object: bool,
    method: Option<String>,
    host: Option<String>,
    path: Option<String>,
    query_keys: BTreeSet<String>,
    graphql: Option<String>,
}

#[derive(Deserialize)]
struct Top<'a> {
    #[serde(borrow)]
    method: Option<&'a RawValue>,
    #[serde(borrow)]
    hostname: Option<&'a RawValue>,
    #[serde(borrow)]
    url: Option<&'a RawValue>,
    #[serde(borrow)]
    path: Option<&'a RawValue>,
    #[serde(borrow)]
    target: Option<&'a RawValue>,
    #[serde(borrow)]
    body: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Query<'a> {
    #[serde(borrow)]
    query: Option<&'a RawValue>,
}

/// The value if it is a JSON string.
fn string(v: Option<&RawValue>) -> Option<String> {
    let raw = v?.get();
    raw.starts_with('"')
        .then(|| serde_json::from_str::<String>(raw).ok())
        .flatten()
}

fn non_empty(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.is_empty())
}

impl Shape {
    /// Reads the shape of a canonical JSON input.
    pub fn of(json: &[u8]) -> Shape {
        if json.first() != Some(&b'{') {
            return Shape::default();
        }
        let Ok(top) = serde_json::from_slice::<Top>(json) else {
            return Shape::default();
        };
        let url = non_empty(string(top.url));
        let parsed_url = url.as_deref().map(parse_url);
        let host = non_empty(string(top.hostname)).or_else(|| {
            parsed_url
                .as_ref()
                .and_then(|u| u.as_ref())
                .and_then(|u| non_empty(Some(u.host.clone())))
        });
        let (path, query) = if let Some(p) = non_empty(string(top.path)) {
            split_path_query(&p)
        } else if let Some(u) = parsed_url {
            u.map(|u| (u.path, u.query)).unwrap_or_default()
        } else if let Some(t) = non_empty(string(top.target)) {
            split_path_query(&t)
        } else {
            Default::default()
        };
        Shape {
            is_object: true,
            method: string(top.method),
            host,
            path: non_empty(Some(path)),
            query_keys: query_keys(&query),
            graphql: graphql_query(top.body)
                .map(|q| normalize_graphql(&q))
                .filter(|q| !q.is_empty()),
        }
    }

    /// Whether a candidate with shape `span` (from package `span_package`) can answer a
    /// request with shape `self`.
    pub fn admits(&self, span: &Shape, span_package: &str) -> bool {
        if !self.is_object {
            return false;
        }
        if let (Some(a), Some(b)) = (&self.graphql, &span.graphql) {
            if a != b {
                return false;
            }
        }
        if span_package != "http" && span_package != "https" {
            return true;
        }
        let differ =
            |a: &Option<String>, b: &Option<String>| matches!((a, b), (Some(a), Some(b)) if a != b);
        !(differ(&self.method, &span.method)
            || differ(&self.host, &span.host)
            || differ(&self.path, &span.path)
            || self.query_keys != span.query_keys)
    }
}

/// `body.query` when the body is an object, or a JSON string holding one.
fn graphql_query(body: Option<&RawValue>) -> Option<String> {
    let raw = body?.get();
    let text: Cow<str> = if raw.starts_with('"') {
        Cow::Owned(serde_json::from_str::<String>(raw).ok()?)
    } else {
        Cow::Borrowed(raw)
    };
    if !text.trim_start().starts_with('{') {
        return None;
    }
    string(serde_json::from_str::<Query>(&text).ok()?.query)
}

/// Braces padded with spaces, whitespace runs collapsed: formatting does not change a query.
fn normalize_graphql(q: &str) -> String {
    let padded = q.trim().replace('{', " { ").replace('}', " } ");
    padded.split_whitespace().collect::<Vec<_>>().join(" ")
}

struct Url {
    host: String,
    path: String,
    query: String,
}

/// Host, percent-decoded path and raw query of an absolute or relative URL. `None` when the
/// path has an invalid escape (Go's `url.Parse` refuses those too).
fn parse_url(raw: &str) -> Option<Url> {
    let raw = raw.split('#').next().unwrap_or_default();
    let after_scheme = match raw.find("://") {
        Some(i) if is_scheme(&raw[..i]) => &raw[i + 1..],
        _ => raw,
    };
    let (host, rest) = match after_scheme.strip_prefix("//") {
        Some(a) => {
            let end = a.find(['/', '?']).unwrap_or(a.len());
            (hostname(&a[..end]), &a[end..])
        }
        None => (String::new(), after_scheme),
    };
    let (path, query) = split_path_query(rest);
    if has_bad_escape(&path) {
        return None;
    }
    let path = percent_decode_str(&path).decode_utf8_lossy().into_owned();
    Some(Url { host, path, query })
}

fn is_scheme(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

fn has_bad_escape(s: &str) -> bool {
    let b = s.as_bytes();
    b.iter().enumerate().any(|(i, &c)| {
        c == b'%'
            && !(b.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
    })
}

/// `user:pw@host:port` → `host`; `[::1]:80` → `::1`.
fn hostname(authority: &str) -> String {
    let hostport = authority.rsplit('@').next().unwrap_or_default();
    if let Some(v6) = hostport.strip_prefix('[') {
        return v6.split(']').next().unwrap_or_default().to_string();
    }
    hostport.split(':').next().unwrap_or_default().to_string()
}

fn split_path_query(p: &str) -> (String, String) {
    match p.split_once('?') {
        Some((path, query)) => (path.to_string(), query.to_string()),
        None => (p.to_string(), String::new()),
    }
}

/// Query-parameter names, URL-unescaped and trimmed; empty names are ignored.
fn query_keys(query: &str) -> BTreeSet<String> {
    form_urlencoded::parse(query.as_bytes())
        .map(|(k, _)| k.trim().to_string())
        .filter(|k| !k.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(json: &str) -> Shape {
        Shape::of(json.as_bytes())
    }

    #[test]
    fn http_shape() {
        let req =
            shape(r#"{"method":"GET","url":"http://api.test:8080/v1/users?id=1&sort=asc#x"}"#);
        assert_eq!(req.host.as_deref(), Some("api.test"));
        assert_eq!(req.path.as_deref(), Some("/v1/users"));
        let same =
            shape(r#"{"method":"GET","hostname":"api.test","path":"/v1/users?sort=desc&id=2"}"#);
        assert!(req.admits(&same, "http"));
        let other_path =
            shape(r#"{"method":"GET","url":"http://api.test/v1/orders?id=1&sort=asc"}"#);
        assert!(!req.admits(&other_path, "http"));
        assert!(req.admits(&other_path, "pg"), "only http is shape-checked");
        let other_keys = shape(r#"{"method":"GET","target":"/v1/users?id=1"}"#);
        assert!(!req.admits(&other_keys, "https"));
        let other_method = shape(r#"{"method":"POST","target":"/v1/users?id=1&sort=x"}"#);
        assert!(!req.admits(&other_method, "http"));
        let other_host = shape(r#"{"url":"https://u:p@other.test/v1/users?sort&id"}"#);
        assert!(!req.admits(&other_host, "http"));
        assert!(shape(r#"{"url":"/a%20b?x+y=1&%7a=2&=3"}"#)
            .query_keys
            .contains("x y"));
        assert!(!shape("[1]").admits(&req, "http"));
    }

    #[test]
    fn graphql_queries_must_agree() {
        let a = shape(r#"{"body":{"query":"query {\n  user { id }\n}"}}"#);
        let b = shape(r#"{"body":"{\"query\":\"query{user{id}}\"}"}"#);
        let c = shape(r#"{"body":{"query":"query { user { name } }"}}"#);
        assert_eq!(a.graphql, b.graphql);
        assert!(a.admits(&b, "graphql"));
        assert!(!a.admits(&c, "fetch"));
        assert!(a.admits(&shape(r#"{"body":{}}"#), "http"));
    }
}
