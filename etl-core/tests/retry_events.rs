//! Each retry emits one `tracing` event naming the call (`op`), the
//! attempt, the delay, the error and whether the server's Retry-After chose
//! the delay; giving up is one event naming the call and the reason.

use etl_core::{with_retry, EtlError, RetryPolicy};
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

type Fields = BTreeMap<String, String>;

/// Records every event's level and fields.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<(Level, Fields)>>>);

struct Collect<'a>(&'a mut Fields);

impl Visit for Collect<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }
}

impl Subscriber for Recorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields::new();
        event.record(&mut Collect(&mut fields));
        self.0
            .lock()
            .unwrap()
            .push((*event.metadata().level(), fields));
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// A current-thread runtime on tokio's paused clock: the waits take no time.
fn paused() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

#[test]
fn retry_emits_one_event_per_retry_with_its_facts() {
    let recorder = Recorder::default();
    let _guard = tracing::subscriber::set_default(recorder.clone());
    let runtime = paused();
    let mut calls = 0;
    let result = runtime.block_on(with_retry(RetryPolicy::default(), || {
        calls += 1;
        let outcome = match calls {
            1 => Err(EtlError::Network("connection reset".into())),
            2 => Err(EtlError::RateLimited {
                retry_after_secs: 3,
            }),
            _ => Ok(()),
        };
        async move { outcome }
    }));
    assert!(result.is_ok());

    let events = recorder.0.lock().unwrap();
    let retries: Vec<_> = events
        .iter()
        .filter(|(_, f)| f.contains_key("attempt"))
        .collect();
    assert_eq!(retries.len(), 2, "{events:?}");
    let (level, first) = retries[0];
    assert_eq!(*level, Level::WARN);
    assert_eq!(
        first["op"], "\"with_retry\"",
        "with or without the metrics feature"
    );
    assert_eq!(first["attempt"], "1");
    assert_eq!(first["delay_ms"], "200");
    assert_eq!(first["retry_after"], "false");
    assert!(first["error"].contains("connection reset"), "{first:?}");
    let (_, second) = retries[1];
    assert_eq!(second["attempt"], "2");
    assert_eq!(second["delay_ms"], "3000");
    assert_eq!(second["retry_after"], "true");
}

#[test]
fn giving_up_is_one_event_naming_the_reason() {
    let recorder = Recorder::default();
    let _guard = tracing::subscriber::set_default(recorder.clone());
    let runtime = paused();
    let policy = RetryPolicy {
        max_attempts: 2,
        ..RetryPolicy::default()
    };
    let result: Result<(), _> = runtime.block_on(with_retry(policy, || async {
        Err(EtlError::Network("connection reset".into()))
    }));
    assert!(result.is_err());
    let events = recorder.0.lock().unwrap();
    let gave_up: Vec<_> = events
        .iter()
        .filter(|(_, f)| f.contains_key("reason"))
        .collect();
    assert_eq!(gave_up.len(), 1, "{events:?}");
    let (level, fields) = gave_up[0];
    assert_eq!(*level, Level::WARN);
    assert_eq!(fields["reason"], "Exhausted");
    assert_eq!(fields["op"], "\"with_retry\"");
    assert_eq!(fields["attempts"], "2");
    assert!(fields["error"].contains("connection reset"));
}

#[cfg(feature = "macros")]
#[test]
fn a_named_call_and_a_retry_fn_name_their_events() {
    use etl_core::retry::Retry;

    #[etl_core::retry(max_attempts = 2)]
    async fn fetch_page(fail: bool) -> Result<(), EtlError> {
        if fail {
            Err(EtlError::Network("reset".into()))
        } else {
            Ok(())
        }
    }

    let recorder = Recorder::default();
    let _guard = tracing::subscriber::set_default(recorder.clone());
    let runtime = paused();
    runtime.block_on(async {
        let _ = fetch_page(true).await;
        let _ = Retry::new(RetryPolicy {
            max_attempts: 2,
            ..RetryPolicy::default()
        })
        .name("load_invoices")
        .run(|| async { Err::<(), _>(EtlError::Network("reset".into())) })
        .await;
    });
    let events = recorder.0.lock().unwrap();
    let ops: Vec<&str> = events
        .iter()
        .filter_map(|(_, f)| f.get("op").map(String::as_str))
        .collect();
    assert_eq!(
        ops,
        [
            "\"fetch_page\"",
            "\"fetch_page\"",
            "\"load_invoices\"",
            "\"load_invoices\""
        ],
        "a retry and a give-up each: {events:?}"
    );
}
