//! Checks that need no database, on small configs read with `config::parse`: each problem
//! reported once, where it is.

use crate::config::{ConfigError, parse};

/// A valid config's start: one SQLite source and a tool on it.
const BASE: &str = "sources:
  shop:
    url: sqlite://orders.db
tools:
  get_order:
    source: shop
    description: Look an order up.
    parameters:
      order_id: { type: integer, min: 1 }
    statements:
      - sql: SELECT id FROM orders WHERE id = :order_id
";

/// The problems of `BASE` + `more`, with the environment `vars`.
fn problems(more: &str, vars: &[(&str, &str)]) -> Vec<ConfigError> {
    let env = |name: &str| {
        vars.iter()
            .find(|(var, _)| *var == name)
            .map(|(_, value)| (*value).to_owned())
    };
    parse(&format!("{BASE}{more}"), &env).unwrap_err()
}

/// Each problem as `check` prints it.
fn shown(problems: &[ConfigError]) -> Vec<String> {
    problems.iter().map(ToString::to_string).collect()
}

#[test]
fn a_source_that_fails_to_load_is_its_tools_only_problem() {
    let yaml = BASE
        .replace("tools:\n", "  other:\n    url: ${UNSET_ONE}\ntools:\n")
        .replace("source: shop", "source: other");
    let errors = parse(&yaml, &|_| None).unwrap_err();
    assert_eq!(
        shown(&errors),
        ["line 5, column 10: sources.other.url: the environment variable UNSET_ONE is not set"]
    );
}

#[test]
fn a_toolset_listing_a_tool_twice_says_so_at_the_second() {
    let errors = problems(
        "toolsets:\n  a:\n    tools: [get_order, get_order]\n    retry: { max_attempts: 3 }\n",
        &[],
    );
    assert_eq!(
        shown(&errors),
        ["line 14, column 24: toolsets.a.tools: lists \"get_order\" twice"]
    );
}

#[test]
fn tokens_are_checked_as_they_are_compared_trimmed_and_counted_in_characters() {
    let two = "auth:\n  tokens:\n    - { env: TOK1 }\n    - { env: TOK2 }\n";
    let same = problems(
        two,
        &[
            ("TOK1", "abcdefghijklmnopq"),
            ("TOK2", " abcdefghijklmnopq\n"),
        ],
    );
    assert_eq!(
        shown(&same),
        ["line 15, column 14: auth.tokens[1].env: TOK2 holds the same token as TOK1"]
    );
    // 15 characters (30 bytes), and 15 characters padded to 19.
    let short = problems(
        two,
        &[("TOK1", &"é".repeat(15)), ("TOK2", "  abcdefghijklmno  ")],
    );
    assert_eq!(short.len(), 2, "{:?}", shown(&short));
    for error in &short {
        assert!(
            error.message.contains("is shorter than 16 characters"),
            "{error}"
        );
    }
    let ok = format!("{BASE}{two}");
    let env = |name: &str| Some(format!("{name}-{}", "é".repeat(12)));
    assert!(parse(&ok, &env).is_ok());
}
