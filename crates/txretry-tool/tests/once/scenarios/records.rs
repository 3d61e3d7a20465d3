//! The records' table and the key: a key from the arguments, the table created on first
//! use or from `Once::ddl`, `migrate` and `prune`.

use std::time::Duration;

use txretry_tool::Once;

use super::{Setup, toolbox};
use crate::common::*;
use crate::driver::OnceDriver;

pub async fn a_key_from_the_arguments_makes_two_call_ids_one_call<D: OnceDriver>(s: &Setup<D>) {
    let once = Once::key_from_args(|args: &Args| format!("item-{}", args.item))
        .table(&s.records)
        .unwrap();
    let work = Work::new(&s.t, Step::Place);
    let toolbox = toolbox(3, D::tool(&s.fx.handle(), "place", &work).once(once));
    let a = call(&toolbox, "place", 9, "call-a").await.unwrap();
    let b = call(&toolbox, "place", 9, "call-b").await.unwrap();
    assert_eq!(a, b);
    assert_eq!(work.runs.get(), 1);
    let c = call(&toolbox, "place", 10, "call-a").await.unwrap();
    assert_eq!(c["effects"], 2);
    assert_eq!(s.record("item-9").await.0, "ok");
    assert_eq!(s.recorded().await, 2);
}

pub async fn the_table_is_created_on_first_use_migrate_is_idempotent_and_prune_expires<
    D: OnceDriver,
>(
    s: &Setup<D>,
) {
    let once = s.once();
    let work = Work::new(&s.t, Step::Place);
    let toolbox = toolbox(3, s.tool("place", &work));
    // No table yet: the first call creates it; its failed claim is not one of its attempts.
    let first = call(&toolbox, "place", 1, "call-1").await.unwrap();
    assert_eq!(first, placed(1, 1));
    call(&toolbox, "place", 2, "call-2").await.unwrap();
    assert_eq!(s.recorded().await, 2);
    s.migrate().await;
    s.migrate().await;
    assert_eq!(s.recorded().await, 2, "migrate keeps the records");

    let hour = Duration::from_secs(3600);
    assert_eq!(s.fx.prune(&once, hour).await, 0);
    s.fx.exec(D::DB.age_sql(&s.records, "call-1")).await;
    assert_eq!(s.fx.prune(&once, hour).await, 1);
    assert_eq!(s.recorded().await, 1);
    // A pruned key is forgotten: the call runs again; the kept one does not.
    call(&toolbox, "place", 1, "call-1").await.unwrap();
    assert_eq!(work.runs.get(), 3);
    call(&toolbox, "place", 2, "call-2").await.unwrap();
    assert_eq!(work.runs.get(), 3, "call-2 was kept");
}

/// Users who run their own migrations create the table from `Once::ddl`: the calls use it
/// as it is, and `migrate` finds nothing to do.
pub async fn a_table_created_from_the_ddl_is_the_one_calls_use<D: OnceDriver>(s: &Setup<D>) {
    s.fx.exec(s.once().ddl(D::DB.dialect())).await;
    assert_eq!(s.recorded().await, 0);
    let work = Work::new(&s.t, Step::Place);
    let toolbox = toolbox(3, s.tool("place", &work));
    let first = call(&toolbox, "place", 8, "call-d").await.unwrap();
    let again = call(&toolbox, "place", 8, "call-d").await.unwrap();
    assert_eq!(again, first);
    assert_eq!(work.runs.get(), 1);
    s.migrate().await;
    assert_eq!(s.record("call-d").await.0, "ok");
    assert_eq!(s.recorded().await, 1);
}
