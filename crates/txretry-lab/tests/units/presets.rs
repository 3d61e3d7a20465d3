//! `src/presets.rs`.

use clap::ValueEnum;
use std::time::Duration;
use txretry::{Admission, RetryPolicy};
use txretry_lab::cli::PolicyArg;
use txretry_lab::presets::*;
use txretry_lab::stats::RetryCounter;

#[test]
fn every_preset_has_a_flag_of_the_same_name() {
    for preset in Preset::every() {
        let arg = PolicyArg::from_str(preset.name(), false).expect("a --policy value");
        assert_eq!(Preset::selected(arg), vec![preset]);
    }
    assert_eq!(Preset::selected(PolicyArg::All), Preset::ALL.to_vec());
    // And no flag value without a preset (besides `all`).
    assert_eq!(
        PolicyArg::value_variants().len(),
        Preset::every().count() + 1
    );
}

#[test]
fn a_list_runs_each_preset_once_in_order() {
    assert_eq!(
        Preset::selected_list(&[
            PolicyArg::HighAvailability,
            PolicyArg::Default,
            PolicyArg::Default
        ]),
        vec![Preset::Default, Preset::HighAvailability]
    );
    assert_eq!(
        Preset::selected_list(&[PolicyArg::HighAvailability, PolicyArg::All]),
        Preset::every().collect::<Vec<_>>()
    );
}

#[test]
fn policies_build_with_the_documented_settings() {
    let counter = RetryCounter::default();
    let admission = Admission::per_key();
    assert_eq!(Preset::None.policy(&counter, &admission).max_attempts(), 1);
    assert_eq!(
        Preset::Default.policy(&counter, &admission).max_attempts(),
        RetryPolicy::default().max_attempts()
    );
    for preset in [
        Preset::Immediate,
        Preset::ExpJitter,
        Preset::Contention,
        Preset::Database,
        Preset::Adaptive,
    ] {
        assert_eq!(
            preset.policy(&counter, &admission).max_attempts(),
            MANY_ATTEMPTS
        );
    }
}

#[test]
fn high_availability_preset_is_the_library_one() {
    let counter = RetryCounter::default();
    let ours = Preset::HighAvailability.policy(&counter, &Admission::per_key());
    let theirs = RetryPolicy::high_availability();
    assert_eq!(ours.failover_budget(), theirs.failover_budget());
    assert_eq!(ours.max_attempts(), theirs.max_attempts());
    for kind in txretry::TransientKind::ALL {
        assert_eq!(ours.retries(kind), theirs.retries(kind), "{kind:?}");
    }
    // The contrast: the default policy does not ride out a failover.
    assert!(
        !Preset::Default
            .policy(&counter, &Admission::per_key())
            .retries(txretry::TransientKind::Failover)
    );
}

#[test]
fn default_preset_decides_like_the_library_default() {
    use txretry::{TransientKind, Verdict};
    let counter = RetryCounter::default();
    let ours = Preset::Default.policy(&counter, &Admission::per_key());
    let theirs = RetryPolicy::default();
    for v in [
        Verdict::Transient(TransientKind::Deadlock),
        Verdict::Ambiguous,
        Verdict::Permanent,
    ] {
        for idempotent in [false, true] {
            for attempt in 1..=3 {
                assert_eq!(
                    ours.decide(v, idempotent, attempt, Duration::ZERO, 0.5),
                    theirs.decide(v, idempotent, attempt, Duration::ZERO, 0.5),
                    "{v:?}, idempotent {idempotent}, attempt {attempt}"
                );
            }
        }
    }
}
