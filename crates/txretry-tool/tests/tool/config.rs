//! Point 8: policies from a config file (TOML and JSON here; YAML goes through the same
//! serde types), per agent and per tool; an unknown key or an invalid value is a typed
//! error naming the field.

use std::time::Duration;

use serde_json::json;
use txretry_core::RetryPolicy;
use txretry_tool::{
    BoxError, BuildError, ConfigErrorKind, FailureKind, PolicyConfig, Tool, ToolContext, Toolbox,
    ToolboxConfig,
};

use crate::common::{NoArgs, anyone, failure};

const TOML: &str = r#"
[agent]
max_attempts = 3
initial_delay = "10ms"
backoff = "exponential"
backoff_factor = 2
max_delay = "1s"
jitter = "full"
retry_on = ["deadlock", "busy"]

[tools.transfer]
max_attempts = 6
timeout = "2s"

[tools.lookup]
idempotent = true
restart_safe = false
"#;

/// Reports the policy it runs under; sleeps an hour when asked to.
fn reporter(name: &str) -> Tool {
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Args {
        sleep: bool,
    }
    Tool::new(name, "", |ctx: ToolContext, args: Args| async move {
        if args.sleep {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        Ok::<_, BoxError>(json!([ctx.policy().max_attempts(), ctx.policy_level()]))
    })
}

fn toml_config(text: &str) -> Result<ToolboxConfig, txretry_tool::ConfigError> {
    ToolboxConfig::from_deserializer(toml::Deserializer::parse(text).unwrap())
}

#[tokio::test(start_paused = true)]
async fn p8_toml_config_sets_agent_and_tool_policies() {
    let config = toml_config(TOML).unwrap();
    let toolbox = Toolbox::builder()
        .policy(RetryPolicy::builder().max_attempts(9).build().unwrap())
        .tool(reporter("transfer"))
        .tool(reporter("lookup"))
        .tool(reporter("other").retry(RetryPolicy::disabled()))
        .config(config)
        .unwrap()
        .build()
        .unwrap();

    let run = |name: &'static str| {
        let toolbox = toolbox.clone();
        async move {
            toolbox
                .invoke(&anyone(), name, json!({"sleep": false}), "c")
                .await
                .unwrap()
        }
    };
    assert_eq!(
        run("transfer").await,
        json!([6, "tool"]),
        "tool keys over the agent's"
    );
    assert_eq!(
        run("lookup").await,
        json!([3, "toolbox"]),
        "agent keys over the code's 9"
    );
    assert_eq!(
        run("other").await,
        json!([1, "tool"]),
        "the code's own tool policy"
    );

    let offered = toolbox.offered(&anyone());
    let lookup = offered.iter().find(|d| d.name() == "lookup").unwrap();
    assert!(lookup.is_idempotent() && !lookup.is_restart_safe());

    // `timeout = "2s"`, not idempotent: one attempt, timed out.
    let f = failure(
        toolbox
            .invoke(&anyone(), "transfer", json!({"sleep": true}), "c")
            .await,
    );
    assert_eq!(f.kind(), FailureKind::TimedOut);
    assert_eq!(f.attempts().len(), 1);
    let timed_out = f
        .last_error()
        .downcast_ref::<txretry_tool::TimedOut>()
        .unwrap();
    assert_eq!(timed_out.limit(), Duration::from_secs(2));
}

#[test]
fn p8_json_config_reads_the_same_shape() {
    let config = ToolboxConfig::from_json(
        r#"{ "agent": { "max_attempts": 2, "initial_delay": "1.5s", "jitter": 0.25 },
             "tools": { "transfer": { "backoff": "constant", "initial_delay": "250us" } } }"#,
    )
    .unwrap();
    let agent = config.agent.as_ref().unwrap();
    assert_eq!(agent.initial_delay, Some(Duration::from_millis(1500)));
    assert_eq!(
        config.tools["transfer"].initial_delay,
        Some(Duration::from_micros(250))
    );
    // Plain serde works too, for embedding in a larger config.
    let plain: ToolboxConfig = toml::from_str(TOML).unwrap();
    assert_eq!(plain, toml_config(TOML).unwrap());
}

#[test]
fn p8_an_unknown_key_is_an_error_naming_the_field() {
    let cases = [
        ("[agent]\nmax_attempt = 3\n", "agent.max_attempt"),
        (
            "[tools.transfer]\nidempotnet = true\n",
            "tools.transfer.idempotnet",
        ),
        ("[agents]\nmax_attempts = 3\n", "agents"),
    ];
    for (text, field) in cases {
        let err = toml_config(text).unwrap_err();
        assert_eq!(err.field(), field, "{err}");
        assert_eq!(err.kind(), ConfigErrorKind::Invalid);
        assert!(err.message().contains("unknown field"), "{err}");
    }
    // Plain serde names the key too.
    let err = toml::from_str::<ToolboxConfig>("[agent]\nmax_attempt = 3\n").unwrap_err();
    assert!(err.to_string().contains("max_attempt"), "{err}");
    let err = serde_json::from_str::<PolicyConfig>(r#"{"idempotent": true}"#).unwrap_err();
    assert!(
        err.to_string().contains("unknown field `idempotent`"),
        "{err}"
    );
}

/// serde's derive reads a struct from a list too, by position: `[3, "100ms"]` would have
/// been `max_attempts = 3, initial_delay = "100ms"`. Every section is a table.
#[test]
fn p8_a_section_given_as_a_list_is_refused() {
    for (text, field) in [
        (r#"{"agent": [3, "100ms"]}"#, "agent"),
        (r#"{"tools": {"transfer": [5]}}"#, "tools.transfer"),
        (r#"[{"max_attempts": 3}]"#, ""),
    ] {
        let err = ToolboxConfig::from_json(text).unwrap_err();
        assert_eq!(err.field(), field, "{text}: {err}");
        assert!(err.message().contains("expected a table"), "{text}: {err}");
    }
    let err = serde_json::from_str::<PolicyConfig>("[4]").unwrap_err();
    assert!(err.to_string().contains("expected a table"), "{err}");
    let yaml = serde_saphyr::from_str::<ToolboxConfig>("agent: [3]\n");
    assert!(yaml.is_err(), "{yaml:?}");
    // Tables still read as before.
    let config = ToolboxConfig::from_json(r#"{"agent": {"max_attempts": 3}}"#).unwrap();
    assert_eq!(config.agent.unwrap().max_attempts, Some(3));
}

#[test]
fn p8_an_invalid_value_is_an_error_naming_the_field() {
    let cases = [
        (
            "[agent]\ninitial_delay = \"150\"\n",
            "agent.initial_delay",
            "needs a unit",
        ),
        (
            "[agent]\ninitial_delay = 150\n",
            "agent.initial_delay",
            "a duration such as",
        ),
        (
            "[agent]\nmax_delay = \"5 parsecs\"\n",
            "agent.max_delay",
            "unknown unit",
        ),
        ("[agent]\njitter = 1.5\n", "agent.jitter", "0..=1"),
        (
            "[agent]\njitter = \"some\"\n",
            "agent.jitter",
            "\"none\", \"full\"",
        ),
        (
            "[agent]\nbackoff = \"fibonacci\"\n",
            "agent.backoff",
            "fibonacci",
        ),
        (
            "[agent]\nretry_on = [\"deadlock\", \"deadlocks\"]\n",
            "agent.retry_on[1]",
            "lock_timeout",
        ),
        (
            "[agent]\nmax_attempts = 0\n",
            "agent.max_attempts",
            "at least 1",
        ),
        ("[agent]\nmax_attempts = -1\n", "agent.max_attempts", "-1"),
        (
            "[agent]\nbackoff = \"linear\"\nbackoff_factor = 2\n",
            "agent.backoff_factor",
            "exponential",
        ),
        (
            "[agent]\nbackoff_factor = 0.5\n",
            "agent.backoff_factor",
            "at least 1",
        ),
        (
            "[agent]\ninitial_delay = \"2s\"\nmax_delay = \"1s\"\n",
            "agent.max_delay",
            "must not be below",
        ),
        (
            "[tools.t]\ntimeout = \"0s\"\n",
            "tools.t.timeout",
            "longer than zero",
        ),
        (
            "[agent]\nmax_elapsed = \"0s\"\n",
            "agent.max_elapsed",
            "longer than zero",
        ),
        (
            "[agent]\nfailover = \"0s\"\n",
            "agent.failover",
            "longer than zero",
        ),
        (
            "[tools.t]\nidempotent = \"yes\"\n",
            "tools.t.idempotent",
            "invalid type",
        ),
    ];
    for (text, field, says) in cases {
        let err = toml_config(text).unwrap_err();
        assert_eq!(err.field(), field, "{text}: {err}");
        assert!(err.message().contains(says), "{text}: {err}");
        assert!(err.to_string().starts_with(&format!("{field}: ")), "{err}");
    }
}

#[test]
fn p8_a_config_naming_an_unknown_tool_fails_the_build() {
    let config = toml_config("[tools.transfr]\nmax_attempts = 2\n").unwrap();
    let err = Toolbox::builder()
        .tool(Tool::new(
            "transfer",
            "",
            |_: ToolContext, _: NoArgs| async { Ok::<_, BoxError>(()) },
        ))
        .config(config)
        .unwrap()
        .build()
        .unwrap_err();
    let BuildError::Config(err) = err else {
        panic!("{err:?}");
    };
    assert_eq!(err.kind(), ConfigErrorKind::UnknownTool);
    assert_eq!(err.field(), "tools.transfr");
}

/// A tool whose own policy waits 10 ms, doubling up to 500 ms.
fn quick_tool(name: &str) -> Tool {
    let policy = RetryPolicy::builder()
        .backoff(txretry_core::Backoff::Exponential {
            initial: Duration::from_millis(10),
            factor: 2.0,
        })
        .max_delay(Duration::from_millis(500))
        .build()
        .unwrap();
    reporter(name).retry(policy)
}

/// The config error that building a toolbox of `tool` with `config` fails with.
fn refused_at_build(tool: Tool, config: ToolboxConfig) -> txretry_tool::ConfigError {
    match Toolbox::builder()
        .tool(tool)
        .config(config)
        .unwrap()
        .build()
    {
        Err(BuildError::Config(err)) => err,
        other => panic!("expected a config error, got {:?}", other.err()),
    }
}

#[test]
fn p8_a_section_is_checked_against_the_policy_it_is_layered_over() {
    // 100 ms is below the default's 150 ms first wait, not below this tool's 10 ms: fine.
    let config =
        ToolboxConfig::from_json(r#"{ "tools": { "transfer": { "max_delay": "100ms" } } }"#)
            .expect("a cap the tool's own policy allows is read");
    Toolbox::builder()
        .tool(quick_tool("transfer"))
        .config(config.clone())
        .unwrap()
        .build()
        .expect("the tool waits 10 ms first: a 100 ms cap fits");
    // Over the default policy it does not fit, and the build says which key.
    let err = refused_at_build(reporter("transfer"), config);
    assert_eq!(err.field(), "tools.transfer.max_delay", "{err}");
    // A first wait above the tool's own 500 ms cap: the key the section set is blamed.
    let config =
        ToolboxConfig::from_json(r#"{ "tools": { "transfer": { "initial_delay": "1s" } } }"#)
            .unwrap();
    let err = refused_at_build(quick_tool("transfer"), config);
    assert_eq!(err.field(), "tools.transfer.initial_delay", "{err}");
    assert!(err.message().contains("layered over"), "{err}");
}

#[test]
fn p8_a_tool_section_given_twice_is_an_error() {
    let err = ToolboxConfig::from_json(
        r#"{ "tools": { "t": { "max_attempts": 0 }, "t": { "max_attempts": 3 } } }"#,
    )
    .unwrap_err();
    assert!(err.message().contains("\"t\" is given twice"), "{err}");
    assert!(err.field().starts_with("tools"), "{err}");
}

#[test]
fn p8_a_wait_with_no_backoff_is_refused() {
    let err =
        ToolboxConfig::from_json(r#"{ "agent": { "backoff": "none", "initial_delay": "1s" } }"#)
            .unwrap_err();
    assert_eq!(err.field(), "agent.initial_delay", "{err}");
    assert!(err.message().contains("backoff \"none\""), "{err}");
}

#[test]
fn p8_a_huge_value_is_not_echoed_whole() {
    let huge = "9".repeat(1_000_000);
    let err = ToolboxConfig::from_json(&format!(r#"{{ "agent": {{ "max_delay": "{huge}" }} }}"#))
        .unwrap_err();
    assert_eq!(err.field(), "agent.max_delay");
    assert!(
        err.message().chars().count() <= 501,
        "{} chars",
        err.message().len()
    );
    assert!(err.message().ends_with('…'));
}

#[test]
fn p8_a_huge_tool_name_is_not_echoed_whole() {
    let name = "t".repeat(100_000);
    let err = ToolboxConfig::from_json(&format!(
        r#"{{ "tools": {{ "{name}": {{ "max_attempts": 0 }} }} }}"#
    ))
    .unwrap_err();
    assert!(err.field().starts_with("tools.ttt"), "{err}");
    assert!(
        err.field().chars().count() <= 201,
        "{} chars",
        err.field().len()
    );
    assert!(
        err.to_string().len() < 1_000,
        "{} bytes",
        err.to_string().len()
    );
}

/// A syntax error is about no field: the path stops at the section it was found in (it
/// said `agent.?`).
#[test]
fn p8_a_syntax_error_names_the_section_it_is_in() {
    let err = ToolboxConfig::from_json(r#"{ "agent": { "max_attempts": 3, } }"#).unwrap_err();
    assert_eq!(err.field(), "agent", "{err}");
    assert!(err.message().contains("trailing comma"), "{err}");
    let err = ToolboxConfig::from_json(r#"{ "agent": "#).unwrap_err();
    assert!(!err.field().contains('?'), "{err}");
}

/// An empty `tools:` (YAML's null, as a commented-out list of tools leaves it; JSON's
/// `null`) is no tool sections, as an empty `agent:` is no agent policy.
#[test]
fn p8_an_empty_tools_section_is_no_sections() {
    for yaml in [
        "tools:\n",
        "agent:\n  max_attempts: 3\ntools:\n  # transfer: {}\n",
    ] {
        let config = serde_saphyr::from_str::<ToolboxConfig>(yaml)
            .unwrap_or_else(|e| panic!("{yaml:?}: {e}"));
        assert!(config.tools.is_empty(), "{yaml:?}");
    }
    let config = ToolboxConfig::from_json(r#"{"tools": null}"#).unwrap();
    assert!(config.tools.is_empty());
    // Anything else that is not a table is still refused.
    let err = ToolboxConfig::from_json(r#"{"tools": 3}"#).unwrap_err();
    assert_eq!(err.field(), "tools", "{err}");
}
