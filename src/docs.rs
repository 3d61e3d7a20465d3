//! Guides: the pages of the repository's `docs/` folder, one module each. Their examples
//! are compiled (and those that need no server run) as doc tests of this crate, so they
//! cannot drift from the API.
//!
//! | module | page | what it covers |
//! |---|---|---|
//! | [`commit_boundary`] | `docs/commit-boundary.md` | what a runner guarantees, ambiguous commits, your error type, the outcome |
//! | [`policy`] | `docs/policy.md` | policies, per-call options, backoff, jitter, events, `run` / `run_blocking` |
//! | [`profiles`] | `docs/profiles.md` | the default classification in full, its rules, the opt-in profiles |
//! | [`admission`] | `docs/admission.md` | contention: per-key admission, in the database, only for contended keys |
//! | [`clusters`] | `docs/clusters.md` | server restarts, PgBouncer, Galera |
//! | [`high_availability`] | `docs/high-availability.md` | Postgres switchover and failover: the verdicts, the failover budget, reconnecting to the new primary, durability |
//! | [`tools`] | `docs/tools.md` | the tool layer for agents, MCP, rig, exactly-once calls |
//! | [`troubleshooting`] | `docs/troubleshooting.md` | compiler errors and surprises, and what to do |
//!
//! The guides are always in the documentation; they are compiled into the crate, and
//! their examples tested, with the features those examples use (`sqlx-postgres`,
//! `sqlx-sqlite`, `tokio-postgres`, `tool`; `mcp` and `rig` for the blocks that need them), as in `cargo test
//! --workspace --all-features`. An example that needs another feature adds it to the
//! `cfg` of `mod docs` in `lib.rs`.

#[doc = include_str!("../docs/commit-boundary.md")]
pub mod commit_boundary {}

#[doc = include_str!("../docs/policy.md")]
pub mod policy {}

#[doc = include_str!("../docs/profiles.md")]
pub mod profiles {}

#[doc = include_str!("../docs/admission.md")]
pub mod admission {}

#[doc = include_str!("../docs/clusters.md")]
pub mod clusters {}

#[doc = include_str!("../docs/high-availability.md")]
pub mod high_availability {}

#[doc = include_str!("../docs/tools.md")]
pub mod tools {}

#[doc = include_str!("../docs/troubleshooting.md")]
pub mod troubleshooting {}
