//! `--json`: one JSON array on stdout, an object per run (see [`RunReport`]).

use crate::report::RunReport;

/// The array of every run's report, pretty-printed.
pub fn render(reports: &[RunReport]) -> String {
    // Serializing plain structs of numbers, strings and maps cannot fail; should it ever,
    // say so in valid JSON rather than panic.
    serde_json::to_string_pretty(reports).unwrap_or_else(|e| {
        serde_json::json!({ "error": format!("could not serialize the report: {e}") }).to_string()
    })
}
