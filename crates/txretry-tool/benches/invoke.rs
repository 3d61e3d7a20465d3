//! What the toolbox adds to a tool call on the happy path, over calling the handler
//! directly. JSON work (reading the arguments from a `serde_json::Value`, writing the output
//! to one) is measured on its own: a hand-written JSON wrapper pays it too.
//!
//! `cargo bench -p txretry-tool --bench invoke -- --quick`
//!
//! The handlers complete without waiting, so each future is polled once with a no-op waker:
//! no runtime is in the measurement.

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use txretry_core::RetryPolicy;
use txretry_tool::{BoxError, Caller, Tool, ToolContext, Toolbox};

#[derive(Clone, Deserialize, JsonSchema)]
struct GetOrder {
    order_id: i64,
    include_items: bool,
}

#[derive(Serialize)]
struct Order {
    id: i64,
    status: &'static str,
    total_cents: i64,
    items: Vec<i64>,
}

/// The tool's own work: a stand-in for a handler whose database call returned at once.
async fn get_order(args: GetOrder) -> Result<Order, BoxError> {
    Ok(Order {
        id: args.order_id,
        status: "open",
        total_cents: 1234,
        items: if args.include_items {
            vec![1, 2]
        } else {
            Vec::new()
        },
    })
}

/// Polls a future that completes without waiting.
fn now<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => output,
        Poll::Pending => unreachable!("the benchmarked futures never wait"),
    }
}

fn toolbox() -> Toolbox {
    let noop = |name: &str| {
        Tool::new(name, "", |_ctx: ToolContext, args: GetOrder| {
            get_order(args)
        })
        .roles(["support"])
    };
    Toolbox::builder()
        .policy(RetryPolicy::builder().max_attempts(3).build().unwrap())
        .on_retry(|_| {})
        .tool(noop("list_orders"))
        .tool(
            Tool::new(
                "get_order",
                "Look an order up.",
                |_ctx: ToolContext, args: GetOrder| get_order(args),
            )
            .roles(["support", "admin"])
            .read_only(true),
        )
        .tool(noop("cancel_order"))
        .persona("helpdesk", ["get_order", "list_orders"])
        .agent("support-bot", ["get_order", "cancel_order"])
        .build()
        .unwrap()
}

fn bench(c: &mut Criterion) {
    let args = json!({"order_id": 42, "include_items": true});
    let typed = GetOrder {
        order_id: 42,
        include_items: true,
    };
    let toolbox = toolbox();
    let caller = Caller::new(["support"])
        .persona("helpdesk")
        .agent("support-bot");
    assert!(now(toolbox.invoke(&caller, "get_order", args.clone(), "call-1")).is_ok());

    let mut group = c.benchmark_group("invoke");
    group.bench_function("handler_direct", |b| {
        b.iter_batched(
            || typed.clone(),
            |typed| now(get_order(black_box(typed))).map(black_box),
            BatchSize::SmallInput,
        )
    });
    group.bench_function("json_args_and_output", |b| {
        b.iter_batched(
            || args.clone(),
            |args| {
                let typed = GetOrder::deserialize(black_box(&args)).unwrap();
                let order = Order {
                    id: typed.order_id,
                    status: "open",
                    total_cents: 1234,
                    items: vec![1, 2],
                };
                serde_json::to_value(&order).unwrap()
            },
            BatchSize::SmallInput,
        )
    });
    group.bench_function("handler_with_json", |b| {
        b.iter_batched(
            || args.clone(),
            |args| {
                let typed = GetOrder::deserialize(black_box(&args)).unwrap();
                let order = now(get_order(typed)).unwrap();
                serde_json::to_value(&order).unwrap()
            },
            BatchSize::SmallInput,
        )
    });
    group.bench_function("toolbox_invoke", |b| {
        b.iter_batched(
            || args.clone(),
            |args| -> Value {
                now(toolbox.invoke(&caller, "get_order", black_box(args), "call-1")).unwrap()
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
