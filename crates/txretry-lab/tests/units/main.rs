//! The lab's parts, one module per source file, tested without a database or the binary
//! (those are in `tests/lab`).

mod backend;
mod cli;
mod duration;
mod error;
mod grid;
mod hints;
mod invariant;
mod json;
mod presets;
mod server;
mod stats;
mod target;
mod transactions;
