//! Typed tables (`PostgresSink::connect_typed`) against a real PostgreSQL
//! server, read back with SQL as an analyst would. Opt in with
//! `ETL_PG_URL=postgres://user@127.0.0.1:5432/db cargo test -- --include-ignored`
//! (`.ci/run` does); without the variable these tests are ignored.

use etl_core::content::typed::{ColumnType, Contract, SchemaOptions};
use etl_core::{Record, Sink};
use etl_postgres::PostgresSink;
use serde_json::json;
use std::collections::HashSet;
use std::sync::Arc;
use tokio_postgres::NoTls;

fn url() -> String {
    std::env::var("ETL_PG_URL")
        .expect("ETL_PG_URL is not set: these tests need a PostgreSQL server")
}

/// A JSON record with an `id` and an `updated_at`.
#[derive(serde::Serialize, Clone)]
#[serde(transparent)]
struct Doc(serde_json::Value);

impl Record for Doc {
    fn record_id(&self) -> Option<String> {
        self.0.get("id").map(|id| id.to_string())
    }

    fn updated_at(&self) -> Option<String> {
        self.0
            .get("updated_at")
            .and_then(|t| t.as_str())
            .map(str::to_owned)
    }
}

fn docs(values: &[serde_json::Value]) -> Vec<Doc> {
    values.iter().cloned().map(Doc).collect()
}

/// A table family of this test's own, dropped first in case a run was
/// killed.
async fn fresh(name: &str) -> (tokio_postgres::Client, String) {
    let table = format!("etl_typed_{name}_{}", std::process::id());
    let (admin, connection) = tokio_postgres::connect(&url(), NoTls).await.unwrap();
    tokio::spawn(connection);
    drop_family(&admin, &table).await;
    (admin, table)
}

/// Drops the family's tables, and leaves its `_etl_schema` row.
async fn drop_tables(admin: &tokio_postgres::Client, table: &str) {
    let tables = admin
        .query(
            "SELECT tablename::text FROM pg_tables WHERE tablename = $1 OR tablename LIKE $1 || '\\_\\_%'",
            &[&table],
        )
        .await
        .unwrap();
    for t in tables {
        let t: String = t.get(0);
        admin
            .batch_execute(&format!("DROP TABLE IF EXISTS \"{t}\" CASCADE"))
            .await
            .unwrap();
    }
}

/// Drops the family: its tables, its rejects and its `_etl_schema` row.
async fn drop_family(admin: &tokio_postgres::Client, table: &str) {
    drop_tables(admin, table).await;
    admin
        .batch_execute(&format!(
            "DROP TABLE IF EXISTS \"{table}_rejects\"; \
             DO $$ BEGIN IF to_regclass('_etl_schema') IS NOT NULL THEN \
             DELETE FROM _etl_schema WHERE table_name = '{table}'; END IF; END $$"
        ))
        .await
        .unwrap();
}

/// The table's columns and their types, in order.
async fn columns(admin: &tokio_postgres::Client, table: &str) -> Vec<(String, String)> {
    admin
        .query(
            "SELECT column_name::text, data_type::text FROM information_schema.columns \
             WHERE table_name = $1 ORDER BY ordinal_position",
            &[&table],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

/// The names of the table's data columns (not the loader's), in order.
async fn data_columns(admin: &tokio_postgres::Client, table: &str) -> Vec<String> {
    let all = columns(admin, table).await.into_iter().map(|c| c.0);
    all.filter(|c| !c.starts_with("_etl_")).collect()
}

/// The family's schema as `_etl_schema` holds it.
async fn stored(admin: &tokio_postgres::Client, table: &str) -> String {
    admin
        .query_one(
            "SELECT schema FROM _etl_schema WHERE table_name = $1",
            &[&table],
        )
        .await
        .unwrap()
        .get(0)
}

async fn count(admin: &tokio_postgres::Client, sql: &str) -> i64 {
    admin.query_one(sql, &[]).await.unwrap().get(0)
}

fn issue(n: i64) -> serde_json::Value {
    json!({
        "id": n,
        "title": format!("issue {n}"),
        "updated_at": "2024-05-01T14:00:00+02:00",
        "user": {"login": "ada", "site": {"id": 7}},
        "labels": [{"name": "bug", "color": "red"}, {"name": "ui", "color": "blue"}],
        "tags": ["a", "b", "c"],
        "score": 1.5,
        "locked": false,
    })
}

#[tokio::test]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn records_load_as_typed_columns_and_child_tables_each_once() {
    let (admin, t) = fresh("shape").await;
    let sink = PostgresSink::connect_typed::<Doc>(&url(), &t, SchemaOptions::postgres())
        .await
        .unwrap();
    assert!(sink.is_typed());
    let rows = docs(&[issue(1), issue(2)]);
    assert_eq!(sink.load(&rows).await.unwrap(), 2);
    assert_eq!(
        sink.load(&rows).await.unwrap(),
        0,
        "held rows are not written again"
    );

    let cols = columns(&admin, &t).await;
    let expect = [
        ("_etl_key", "text"),
        ("_etl_id", "text"),
        ("_etl_updated_at", "timestamp with time zone"),
        ("_etl_loaded_at", "timestamp with time zone"),
        ("_etl_row", "text"),
        ("_etl_meta", "jsonb"),
        ("id", "bigint"),
        ("locked", "boolean"),
        ("score", "double precision"),
        ("title", "text"),
        ("updated_at", "timestamp with time zone"),
        ("user__login", "text"),
        ("user__site__id", "bigint"),
    ];
    let got: Vec<(&str, &str)> = cols.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    assert_eq!(got, expect);
    let labels = format!("{t}__labels");
    assert_eq!(
        columns(&admin, &labels)
            .await
            .iter()
            .map(|c| c.0.as_str())
            .collect::<Vec<_>>(),
        [
            "_etl_key",
            "_etl_parent_key",
            "_etl_root_key",
            "_etl_list_idx",
            "color",
            "name"
        ]
    );
    assert_eq!(
        count(&admin, &format!("SELECT count(*) FROM \"{labels}\"")).await,
        4,
        "each child once"
    );
    assert_eq!(
        count(
            &admin,
            &format!("SELECT count(*) FROM \"{t}__tags\" WHERE value = 'c'")
        )
        .await,
        2
    );

    // As an analyst asks: the labels of issue 2, through the views.
    let names: Vec<String> = admin
        .query(
            &format!(
                "SELECT l.name FROM \"{t}_current\" i JOIN \"{labels}_current\" l ON l._etl_parent_key = i._etl_key \
                 WHERE i.id = 2 ORDER BY l._etl_list_idx"
            ),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(names, ["bug", "ui"]);
    let row = admin
        .query_one(
            &format!(
                "SELECT _etl_row::jsonb -> 'user' ->> 'login', _etl_id, \
                 _etl_updated_at = '2024-05-01T12:00:00Z', updated_at = '2024-05-01T12:00:00Z', _etl_meta IS NULL \
                 FROM \"{t}\" WHERE id = 1"
            ),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "ada");
    assert_eq!(row.get::<_, String>(1), "1");
    assert!(row.get::<_, bool>(2) && row.get::<_, bool>(3) && row.get::<_, bool>(4));
    // The key is the raw record's, as the JSON shape and JSONL have it.
    let key: String = admin
        .query_one(&format!("SELECT _etl_key FROM \"{t}\" WHERE id = 1"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(key, etl_core::content_key(&rows[0]).unwrap());
    assert_eq!(sink.count().await.unwrap(), 2);
    assert_eq!(sink.content_keys().await.unwrap().len(), 2);
    assert_eq!(
        sink.newest_last_updated().await.unwrap().as_deref(),
        Some("2024-05-01T12:00:00Z")
    );
    drop_family(&admin, &t).await;
}

#[tokio::test]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn the_schema_evolves_across_runs_and_a_misfit_never_fails_a_load() {
    let (admin, t) = fresh("evolve").await;
    let options = SchemaOptions::postgres()
        .hint("due", ColumnType::Date)
        .hint("never", ColumnType::Bigint);
    let first = PostgresSink::connect_typed::<Doc>(&url(), &t, options.clone())
        .await
        .unwrap();
    first
        .load(&docs(&[json!({"id": 1, "count": 3})]))
        .await
        .unwrap();
    drop(first);
    let cols = columns(&admin, &t).await;
    assert!(
        cols.contains(&("never".into(), "bigint".into())),
        "a hinted column exists while all null: {cols:?}"
    );
    assert!(cols.contains(&("due".into(), "date".into())));

    // A later run: a new member, a misfit, a hinted value.
    let later = PostgresSink::connect_typed::<Doc>(&url(), &t, options)
        .await
        .unwrap();
    let loaded = later
        .load(&docs(&[
            json!({"id": 2, "count": "many", "fresh": true, "due": "2024-01-02"}),
        ]))
        .await
        .unwrap();
    assert_eq!(loaded, 1, "the misfit's row still loads");
    let row = admin
        .query_one(
            &format!(
                "SELECT count, fresh, due = DATE '2024-01-02', _etl_meta -> 'misfits' -> 0 ->> 'path', \
                 _etl_meta -> 'misfits' -> 0 ->> 'found', _etl_row::jsonb ->> 'count' FROM \"{t}\" WHERE id = 2"
            ),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, Option<i64>>(0), None);
    assert_eq!(row.get::<_, Option<bool>>(1), Some(true));
    assert!(row.get::<_, bool>(2));
    assert_eq!(row.get::<_, String>(3), "/count");
    assert_eq!(row.get::<_, String>(4), "string");
    assert_eq!(row.get::<_, String>(5), "many", "the value is in _etl_row");
    let old: Option<bool> = admin
        .query_one(&format!("SELECT fresh FROM \"{t}\" WHERE id = 1"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        old, None,
        "rows loaded before a column existed hold NULL there"
    );
    // The view shows the new column.
    assert_eq!(
        count(
            &admin,
            &format!("SELECT count(*) FROM \"{t}_current\" WHERE fresh")
        )
        .await,
        1
    );
    drop_family(&admin, &t).await;
}

#[tokio::test]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn child_rows_keep_every_kind_of_value() {
    let (admin, t) = fresh("kinds").await;
    // Child rows reach the server another way than the record's row:
    // each column type, a NULL, a misfit and a JSON column (past
    // `max_nesting`) must read back as they went in.
    let options = SchemaOptions::postgres().max_nesting(2);
    let sink = PostgresSink::connect_typed::<Doc>(&url(), &t, options)
        .await
        .unwrap();
    let record = json!({"id": 1, "items": [
        {"flag": true, "n": -7, "x": 2.5, "at": "2024-05-01T14:00:00+02:00", "s": "it's \"quoted\"",
         "deep": {"a": {"b": [1, {"c": null}]}}, "select": "kept"},
        {"flag": null, "n": "many", "x": 1, "s": "\u{e9}t\u{e9}"},
    ]});
    assert_eq!(sink.load(&docs(&[record])).await.unwrap(), 1);
    let rows = admin
        .query(
            &format!(
                "SELECT _etl_list_idx, flag, n, x, at = '2024-05-01T12:00:00Z', s, deep__a::text, \"select\" \
                 FROM \"{t}__items\" ORDER BY _etl_list_idx"
            ),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), 2);
    let (first, second) = (&rows[0], &rows[1]);
    assert_eq!(first.get::<_, i64>(0), 0);
    assert_eq!(first.get::<_, Option<bool>>(1), Some(true));
    assert_eq!(first.get::<_, Option<i64>>(2), Some(-7));
    assert_eq!(first.get::<_, Option<f64>>(3), Some(2.5));
    assert_eq!(first.get::<_, Option<bool>>(4), Some(true));
    assert_eq!(
        first.get::<_, Option<String>>(5).as_deref(),
        Some("it's \"quoted\"")
    );
    assert_eq!(
        first.get::<_, Option<String>>(6).as_deref(),
        Some(r#"{"b": [1, {"c": null}]}"#),
        "a JSON column holds the value past max_nesting"
    );
    assert_eq!(first.get::<_, Option<String>>(7).as_deref(), Some("kept"));
    assert_eq!(second.get::<_, i64>(0), 1);
    assert_eq!(second.get::<_, Option<bool>>(1), None, "a null is NULL");
    assert_eq!(second.get::<_, Option<i64>>(2), None, "a misfit is NULL");
    assert_eq!(
        second.get::<_, Option<f64>>(3),
        Some(1.0),
        "an integer fits a double"
    );
    assert_eq!(
        second.get::<_, Option<bool>>(4),
        None,
        "a missing member is NULL"
    );
    assert_eq!(
        second.get::<_, Option<String>>(5).as_deref(),
        Some("\u{e9}t\u{e9}")
    );
    drop_family(&admin, &t).await;
}

#[tokio::test]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn members_first_met_late_in_a_load_join_the_schema_in_its_transaction() {
    let (admin, t) = fresh("late").await;
    let sink = PostgresSink::connect_typed::<Doc>(&url(), &t, SchemaOptions::postgres())
        .await
        .unwrap();
    // Members first met late in a load of 1,000 (a column, child tables,
    // a misfit beside them) are added in the load's own transaction, and
    // the rows before them hold NULL there.
    let records: Vec<_> = (0..1_000)
        .map(|i| match i {
            600 => json!({"id": i, "n": i, "late": {"x": 1}}),
            900 => json!({"id": i, "n": i, "tags": ["a", "b"], "late": {"x": 2}}),
            950 => json!({"id": i, "n": "misfit", "tags": ["c"], "items": [{"k": true}]}),
            _ => json!({"id": i, "n": i}),
        })
        .collect();
    assert_eq!(sink.load(&docs(&records)).await.unwrap(), 1_000);
    let cols = columns(&admin, &t).await;
    assert!(
        cols.contains(&("late__x".into(), "bigint".into())),
        "{cols:?}"
    );
    assert_eq!(
        count(&admin, &format!("SELECT sum(late__x)::bigint FROM \"{t}\"")).await,
        3
    );
    assert_eq!(
        count(&admin, &format!("SELECT count(late__x) FROM \"{t}\"")).await,
        2,
        "the other rows hold NULL there"
    );
    assert_eq!(
        count(
            &admin,
            &format!("SELECT count(*) FROM \"{t}\" WHERE n IS NULL AND _etl_meta IS NOT NULL")
        )
        .await,
        1,
        "the misfit is NULL and named"
    );
    assert_eq!(
        count(&admin, &format!("SELECT count(*) FROM \"{t}__tags\"")).await,
        3
    );
    assert_eq!(
        count(
            &admin,
            &format!("SELECT count(*) FROM \"{t}__items\" WHERE k")
        )
        .await,
        1
    );
    // The stored schema names what the table has: a later load on a
    // new sink reads it and adds nothing.
    let schema = stored(&admin, &t).await;
    assert!(
        schema.contains("late__x") && schema.contains("__items"),
        "{schema}"
    );
    let again = PostgresSink::connect_typed::<Doc>(&url(), &t, SchemaOptions::postgres())
        .await
        .unwrap();
    assert_eq!(again.load(&docs(&records)).await.unwrap(), 0);
    assert_eq!(stored(&admin, &t).await, schema);
    drop_family(&admin, &t).await;
}

#[tokio::test]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn a_frozen_schema_rejects_what_would_change_it_and_loads_the_rest() {
    let (admin, t) = fresh("freeze").await;
    let options = SchemaOptions::postgres().contract(Contract::Freeze);
    let sink = PostgresSink::connect_typed::<Doc>(&url(), &t, options.clone())
        .await
        .unwrap();
    sink.load(&docs(&[json!({"id": 1, "n": 1})])).await.unwrap();
    let again = PostgresSink::connect_typed::<Doc>(&url(), &t, options)
        .await
        .unwrap();
    let loaded = again
        .load(&docs(&[
            json!({"id": 2, "n": 2}),
            json!({"id": 3, "n": 3, "extra": "x"}),
            json!({"id": 4, "n": "x"}),
        ]))
        .await
        .unwrap();
    assert_eq!(loaded, 1);
    assert_eq!(again.rejects_count().await.unwrap(), 2);
    let errors: Vec<String> = admin
        .query(
            &format!("SELECT error FROM \"{t}_rejects\" ORDER BY error"),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(
        errors[0].contains("\"/extra\"") && errors[0].contains("would add a column"),
        "{errors:?}"
    );
    assert!(
        errors[1].contains("\"/n\"") && errors[1].contains("does not fit"),
        "{errors:?}"
    );
    assert_eq!(
        columns(&admin, &t)
            .await
            .iter()
            .filter(|c| !c.0.starts_with("_etl_"))
            .count(),
        2,
        "no column added"
    );
    drop_family(&admin, &t).await;
}

#[tokio::test]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn hostile_member_names_load_as_data_never_as_sql() {
    let (admin, t) = fresh("hostile").await;
    let long = "k".repeat(10_000);
    let keys = [
        "\"quoted\"",
        "x\"; DROP TABLE pg_class; --",
        "select",
        "user",
        "order",
        "",
        "naïve",
        "Name",
        "name",
        "createdAt",
        "created_at",
        "a__b",
        "_etl_key",
        long.as_str(),
    ];
    let mut record = serde_json::Map::new();
    record.insert("id".into(), json!(1));
    for (i, k) in keys.iter().enumerate() {
        record.insert((*k).to_owned(), json!(i));
    }
    // Named, not numbered (a map of numbers is one json column): the
    // members nearer the top get their columns first.
    let ids: serde_json::Map<String, serde_json::Value> =
        (0..5_000).map(|i| (format!("k{i}"), json!(i))).collect();
    record.insert("zz_by_id".into(), serde_json::Value::Object(ids));
    let sink = PostgresSink::connect_typed::<Doc>(&url(), &t, SchemaOptions::postgres())
        .await
        .unwrap();
    assert_eq!(
        sink.load(&docs(&[serde_json::Value::Object(record)]))
            .await
            .unwrap(),
        1
    );
    let cols = columns(&admin, &t).await;
    let names: HashSet<&str> = cols.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(names.len(), cols.len(), "no two members on one column");
    assert!(names.contains("select") && names.contains("order") && names.contains("user"));
    assert!(cols.iter().all(|c| c.0.len() <= 63));
    assert!(
        cols.len() < 1_600,
        "the id map stays in _etl_row past the limit: {}",
        cols.len()
    );
    let key: String = admin
        .query_one(&format!("SELECT _etl_key FROM \"{t}\""), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        key.len(),
        64,
        "the member _etl_key does not take the loader's column"
    );
    let untyped = stored(&admin, &t).await;
    assert!(untyped.contains("\"untyped\":[\"/zz_by_id\"]"), "{untyped}");
    drop_family(&admin, &t).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn four_writers_adding_columns_at_once_each_get_every_column_once() {
    let (admin, t) = fresh("writers").await;
    let mut tasks = Vec::new();
    for w in 0..4i64 {
        let t = t.clone();
        tasks.push(tokio::spawn(async move {
            let sink =
                PostgresSink::connect_typed::<Doc>(&url(), &t, SchemaOptions::postgres()).await?;
            let mut new = 0;
            for batch in 0..5i64 {
                let rows: Vec<Doc> = (0..20)
                    .map(|i| {
                        let n = w * 1_000 + batch * 100 + i;
                        Doc(json!({
                            "id": n,
                            "shared": n,
                            format!("w{w}_b{batch}"): n,
                            "nested": {format!("w{w}"): {"deep": n}},
                            "list": [{format!("w{w}"): n, "common": "c"}],
                        }))
                    })
                    .collect();
                new += sink.load(&rows).await?;
            }
            Ok::<usize, etl_core::EtlError>(new)
        }));
    }
    let mut total = 0;
    for task in tasks {
        total += task.await.unwrap().unwrap();
    }
    assert_eq!(total, 400);
    assert_eq!(
        count(&admin, &format!("SELECT count(*) FROM \"{t}\"")).await,
        400
    );
    assert_eq!(
        count(&admin, &format!("SELECT count(*) FROM \"{t}__list\"")).await,
        400
    );
    let cols = columns(&admin, &t).await;
    let data: Vec<&str> = cols
        .iter()
        .map(|c| c.0.as_str())
        .filter(|c| !c.starts_with("_etl_"))
        .collect();
    // id, shared, 20 wW_bB, 4 nested__wW__deep.
    assert_eq!(data.len(), 2 + 20 + 4, "{data:?}");
    assert_eq!(data.iter().collect::<HashSet<_>>().len(), data.len());
    // Every row's own member landed in its column.
    for w in 0..4 {
        assert_eq!(
            count(
                &admin,
                &format!("SELECT count(*) FROM \"{t}\" WHERE nested__w{w}__deep = id")
            )
            .await,
            100
        );
    }
    let schema = stored(&admin, &t).await;
    for c in &data {
        assert!(
            schema.contains(&format!("\"name\":\"{c}\"")),
            "{c} is not in the stored schema"
        );
    }
    drop_family(&admin, &t).await;
}

#[tokio::test]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn a_table_of_the_json_shape_keeps_its_shape() {
    let (admin, t) = fresh("oldshape").await;
    let old = PostgresSink::connect_as::<Doc>(&url(), &t).await.unwrap();
    old.load(&docs(&[json!({"id": 1})])).await.unwrap();
    drop(old);
    let sink = PostgresSink::connect_typed::<Doc>(&url(), &t, SchemaOptions::postgres())
        .await
        .unwrap();
    assert!(!sink.is_typed());
    assert_eq!(
        sink.load(&docs(&[json!({"id": 1}), json!({"id": 2})]))
            .await
            .unwrap(),
        1
    );
    assert!(columns(&admin, &t).await.iter().any(|c| c.0 == "row"));
    drop_family(&admin, &t).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn overlapping_writers_write_each_record_and_each_child_once() {
    let (admin, t) = fresh("overlap").await;
    let records = docs(&(0..200).map(issue).collect::<Vec<_>>());
    let mut tasks = Vec::new();
    for w in 0..3 {
        let (t, mut mine) = (t.clone(), records.clone());
        // Each writer meets the records in an order of its own.
        mine.rotate_left(w * 70);
        tasks.push(tokio::spawn(async move {
            let sink =
                PostgresSink::connect_typed::<Doc>(&url(), &t, SchemaOptions::postgres()).await?;
            let mut new = 0;
            for batch in mine.chunks(50) {
                new += sink.load(batch).await?;
            }
            Ok::<usize, etl_core::EtlError>(new)
        }));
    }
    let mut total = 0;
    for task in tasks {
        total += task.await.unwrap().unwrap();
    }
    assert_eq!(total, 200, "each record new to exactly one writer");
    assert_eq!(
        count(&admin, &format!("SELECT count(*) FROM \"{t}\"")).await,
        200
    );
    assert_eq!(
        count(&admin, &format!("SELECT count(*) FROM \"{t}__labels\"")).await,
        400
    );
    assert_eq!(
        count(
            &admin,
            &format!("SELECT count(DISTINCT _etl_key) FROM \"{t}__tags\"")
        )
        .await,
        count(&admin, &format!("SELECT count(*) FROM \"{t}__tags\"")).await,
    );
    assert_eq!(
        count(&admin, &format!("SELECT count(*) FROM \"{t}__tags\"")).await,
        600
    );
    drop_family(&admin, &t).await;
}

#[tokio::test]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn a_typed_table_name_is_as_the_naming_rules_make_it() {
    let e = PostgresSink::connect_typed::<Doc>(&url(), "IssuesTable", SchemaOptions::postgres())
        .await
        .unwrap_err();
    assert!(matches!(e, etl_core::EtlError::InvalidInput(_)), "{e}");
    assert!(e.to_string().contains("\"issues_table\""), "{e}");
}

/// A typed table half there is named and nothing is written: one dropped
/// by hand whose `_etl_schema` row is left, and one whose row was deleted
/// (its columns' types are then unknown, and a guess could change one).
#[tokio::test]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn a_table_without_its_schema_row_or_a_row_without_its_table_is_named() {
    let (admin, t) = fresh("orphan").await;
    let url = url();
    let open = || PostgresSink::connect_typed::<Doc>(&url, &t, SchemaOptions::postgres());
    let first = docs(&[json!({"id": 1, "n": 1, "labels": [{"name": "a"}]})]);
    assert_eq!(open().await.unwrap().load(&first).await.unwrap(), 1);
    let rows = format!("SELECT count(*) FROM _etl_schema WHERE table_name = '{t}'");

    admin
        .execute("DELETE FROM _etl_schema WHERE table_name = $1", &[&t])
        .await
        .unwrap();
    let e = open().await.unwrap_err();
    assert!(matches!(e, etl_core::EtlError::InvalidInput(_)), "{e}");
    assert!(e.to_string().contains("no row in _etl_schema"), "{e}");
    assert_eq!(count(&admin, &rows).await, 0, "no schema row made up");
    assert_eq!(
        count(&admin, &format!("SELECT count(*) FROM \"{t}\"")).await,
        1,
        "the table as it was"
    );

    drop_family(&admin, &t).await;
    assert_eq!(open().await.unwrap().load(&first).await.unwrap(), 1);
    drop_tables(&admin, &t).await;
    let e = open().await.unwrap_err();
    assert!(matches!(e, etl_core::EtlError::InvalidInput(_)), "{e}");
    assert!(e.to_string().contains("is gone but its row"), "{e}");
    assert!(
        admin
            .query_one("SELECT to_regclass($1) IS NULL", &[&t])
            .await
            .unwrap()
            .get::<_, bool>(0),
        "no table made on the stale row"
    );
    drop_family(&admin, &t).await;
}

/// Records of the kill test: each adds a column of its batch's own
/// (`b<batch>`), so the loader changes the schema in every transaction, and
/// has `id % 3 + 1` labels.
fn killable(n: i64) -> Doc {
    let labels: Vec<_> = (0..n % 3 + 1)
        .map(|l| json!({"name": format!("l{l}"), "rank": l}))
        .collect();
    Doc(json!({"id": n, format!("b{}", n / 20): n, "labels": labels}))
}

const KILLABLE: i64 = 4_000;

/// The loader the kill test starts as a process of its own (this test
/// binary, run again with `ETL_TYPED_KILL_TABLE`); a no-op otherwise.
#[tokio::test]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn kill_child_loader() {
    let Ok(table) = std::env::var("ETL_TYPED_KILL_TABLE") else {
        return;
    };
    let sink = PostgresSink::connect_typed::<Doc>(&url(), &table, SchemaOptions::postgres())
        .await
        .unwrap();
    let records: Vec<Doc> = (0..KILLABLE).map(killable).collect();
    for batch in records.chunks(20) {
        sink.load(batch).await.unwrap();
    }
}

/// What must hold of the family after any kill: every child row has its
/// record, every record has all its child rows, and every column of the
/// table is in the stored schema (none half-made).
async fn whole(admin: &tokio_postgres::Client, t: &str) {
    let orphans = count(
        admin,
        &format!("SELECT count(*) FROM \"{t}__labels\" c WHERE NOT EXISTS (SELECT 1 FROM \"{t}\" p WHERE p._etl_key = c._etl_parent_key)"),
    )
    .await;
    assert_eq!(orphans, 0, "no child without its record");
    let short = count(
        admin,
        &format!(
            "SELECT count(*) FROM \"{t}\" p WHERE (SELECT count(*) FROM \"{t}__labels\" c \
             WHERE c._etl_parent_key = p._etl_key) <> p.id % 3 + 1"
        ),
    )
    .await;
    assert_eq!(short, 0, "every record has each of its child rows, once");
    let schema = stored(admin, t).await;
    for (column, _) in columns(admin, t).await {
        if !column.starts_with("_etl_") {
            assert!(
                schema.contains(&format!("\"name\":\"{column}\"")),
                "{column} is not in the stored schema"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn kill_9_mid_load_then_a_rerun_leaves_each_record_and_child_once() {
    let (admin, t) = fresh("kill").await;
    let mut seen = 0;
    for round in 0..3 {
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "kill_child_loader",
                "--include-ignored",
                "--nocapture",
            ])
            .env("ETL_TYPED_KILL_TABLE", &t)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Killed once it has loaded more than the round before: mid-load,
        // at a moment of the machine's choosing.
        loop {
            let exists = count(
                &admin,
                &format!("SELECT count(*) FROM pg_tables WHERE tablename = '{t}'"),
            )
            .await;
            if exists == 1
                && count(&admin, &format!("SELECT count(*) FROM \"{t}\"")).await
                    > seen + 100 * round
            {
                break;
            }
            if child.try_wait().unwrap().is_some() {
                break;
            }
            tokio::task::yield_now().await;
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        whole(&admin, &t).await;
        seen = count(&admin, &format!("SELECT count(*) FROM \"{t}\"")).await;
    }
    assert!(seen < KILLABLE, "a kill came before the end ({seen} rows)");
    // The re-run: everything once.
    let sink = PostgresSink::connect_typed::<Doc>(&url(), &t, SchemaOptions::postgres())
        .await
        .unwrap();
    let records: Vec<Doc> = (0..KILLABLE).map(killable).collect();
    let mut new = 0;
    for batch in records.chunks(200) {
        new += sink.load(batch).await.unwrap();
    }
    assert_eq!(
        new as i64,
        KILLABLE - seen,
        "the re-run writes what the killed runs did not"
    );
    assert_eq!(
        count(&admin, &format!("SELECT count(*) FROM \"{t}\"")).await,
        KILLABLE
    );
    whole(&admin, &t).await;
    drop_family(&admin, &t).await;
}

#[tokio::test]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn batches_made_before_the_stored_schema_moved_are_made_again_as_they_are_written() {
    let (admin, t) = fresh("made_ahead").await;
    let options = SchemaOptions::postgres();
    let ours = PostgresSink::connect_typed::<Doc>(&url(), &t, options.clone())
        .await
        .unwrap();
    let theirs = PostgresSink::connect_typed::<Doc>(&url(), &t, options)
        .await
        .unwrap();
    let first = docs(&[json!({"id": 1, "x": 1, "tags": ["a"]})]);
    let second = docs(&[json!({"id": 2, "x": 2, "z": "zed", "tags": ["b", "c"]})]);
    let dropped = docs(&[json!({"id": 3, "w": true})]);
    let after = docs(&[json!({"id": 4, "x": 4, "v": 1.5})]);
    // Two batches made ahead, the second on the columns the first adds;
    // then another writer adds a column of its own before either is
    // written.
    let first = Sink::prepare(&ours, &first, None).await.unwrap();
    let second = Sink::prepare(&ours, &second, None).await.unwrap();
    theirs
        .load(&docs(&[json!({"id": 9, "y": "why"})]))
        .await
        .unwrap();
    assert_eq!(first.write().await.unwrap().new, 1);
    assert_eq!(second.write().await.unwrap().new, 1);
    // A batch made and dropped unwritten adds nothing, and the batch made
    // behind it on the columns it would have added still loads.
    let dropped = Sink::prepare(&ours, &dropped, None).await.unwrap();
    let after = Sink::prepare(&ours, &after, None).await.unwrap();
    drop(dropped);
    assert_eq!(after.write().await.unwrap().new, 1);

    let names = data_columns(&admin, &t).await;
    assert_eq!(
        names,
        ["id", "y", "x", "z", "v"],
        "every column once, no `w`"
    );
    // Each record's id, then its `x`, `y` and `z`.
    type Values = (String, Option<i64>, Option<String>, Option<String>);
    let rows: Vec<Values> = admin
        .query(
            &format!("SELECT _etl_id, x, y, z FROM \"{t}\" ORDER BY _etl_id"),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    assert_eq!(
        rows,
        [
            ("1".into(), Some(1), None, None),
            ("2".into(), Some(2), None, Some("zed".into())),
            ("4".into(), Some(4), None, None),
            ("9".into(), None, Some("why".into()), None),
        ]
    );
    let tags = count(&admin, &format!("SELECT count(*) FROM \"{t}__tags\"")).await;
    assert_eq!(tags, 3, "each child row once");
    let schema = stored(&admin, &t).await;
    for member in ["\"x\"", "\"y\"", "\"z\"", "\"v\""] {
        assert!(schema.contains(member), "{member} in {schema}");
    }
    drop_family(&admin, &t).await;
}

#[tokio::test]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn under_freeze_a_batch_made_before_the_first_load_committed_is_held_to_it() {
    let (admin, t) = fresh("freeze_ahead").await;
    let options = SchemaOptions::postgres().contract(Contract::Freeze);
    let sink = PostgresSink::connect_typed::<Doc>(&url(), &t, options)
        .await
        .unwrap();
    let first = docs(&[json!({"id": 1, "n": 1})]);
    let second = docs(&[
        json!({"id": 2, "n": 2}),
        json!({"id": 3, "n": 3, "extra": "x"}),
    ]);
    // Both made on the new table; the first load shapes it, and the
    // second is then held to that shape.
    let first = Sink::prepare(&sink, &first, None).await.unwrap();
    let second = Sink::prepare(&sink, &second, None).await.unwrap();
    assert_eq!(first.write().await.unwrap().new, 1);
    assert_eq!(second.write().await.unwrap().new, 1);
    assert_eq!(sink.rejects_count().await.unwrap(), 1);
    let names = data_columns(&admin, &t).await;
    assert_eq!(names, ["id", "n"]);
    drop_family(&admin, &t).await;
}

/// `<table>_versions`: each version of an id with the time it held from
/// and until, the newest open-ended and the one `_current` holds; a
/// column added later is in the view too, and a table made before the
/// view existed gets it when opened.
#[tokio::test]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn the_versions_view_holds_each_version_and_when_it_held() {
    let (admin, t) = fresh("versions").await;
    let url = url();
    let open = || PostgresSink::connect_typed::<Doc>(&url, &t, SchemaOptions::postgres());
    let sink = open().await.unwrap();
    let versions = [
        json!({"id": 1, "state": "open", "updated_at": "2026-01-01T00:00:00Z"}),
        json!({"id": 1, "state": "closed", "updated_at": "2026-01-03T00:00:00Z"}),
        json!({"id": 2, "state": "open", "updated_at": "2026-01-02T00:00:00Z"}),
    ];
    assert_eq!(sink.load(&docs(&versions)).await.unwrap(), 3);
    // Read after the newer one, an older version still sorts before it;
    // it brings a column of its own.
    let late =
        [json!({"id": 1, "state": "triage", "updated_at": "2026-01-02T00:00:00Z", "label": "bug"})];
    assert_eq!(sink.load(&docs(&late)).await.unwrap(), 1);
    let read = |sql: String| {
        let admin = &admin;
        async move {
            admin
                .query(&sql, &[])
                .await
                .unwrap()
                .iter()
                .map(|r| {
                    (
                        r.get::<_, i64>(0),
                        r.get::<_, String>(1),
                        r.get::<_, String>(2),
                        r.get::<_, Option<String>>(3),
                        r.get::<_, Option<String>>(4),
                    )
                })
                .collect::<Vec<_>>()
        }
    };
    let sql = format!(
        "SELECT id, state, to_char(_etl_valid_from, 'MM-DD'), to_char(_etl_valid_to, 'MM-DD'), label \
         FROM \"{t}_versions\" ORDER BY id, _etl_valid_from"
    );
    let (s, d) = (String::from, |x: &str| Some(x.to_owned()));
    let want = vec![
        (1, s("open"), s("01-01"), d("01-02"), None),
        (1, s("triage"), s("01-02"), d("01-03"), d("bug")),
        (1, s("closed"), s("01-03"), None, None),
        (2, s("open"), s("01-02"), None, None),
    ];
    assert_eq!(read(sql.clone()).await, want);
    // The open-ended versions are the rows `_current` holds.
    let current = format!(
        "SELECT count(*) FROM \"{t}_versions\" v JOIN \"{t}_current\" c USING (_etl_key) \
         WHERE v._etl_valid_to IS NULL"
    );
    assert_eq!(count(&admin, &current).await, 2);
    // A table made before the view: it is made when the table is opened.
    admin
        .batch_execute(&format!("DROP VIEW \"{t}_versions\""))
        .await
        .unwrap();
    drop(sink);
    let _sink = open().await.unwrap();
    assert_eq!(read(sql).await, want);
    drop_family(&admin, &t).await;
}

/// A merge table's cursor counts the deletions it remembers: a deletion
/// newer than every row is not read again by the next incremental run.
#[tokio::test]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn a_merge_tables_cursor_counts_its_deletions() {
    use etl_core::content::write::{MergeKeys, Write};
    let (admin, t) = fresh("mergecursor").await;
    admin
        .batch_execute(&format!(
            "DO $$ BEGIN IF to_regclass('_etl_deleted') IS NOT NULL THEN \
             DELETE FROM _etl_deleted WHERE table_name = '{t}'; END IF; END $$"
        ))
        .await
        .unwrap();
    let merge = Write::Merge(
        MergeKeys::new(["/id".parse().unwrap()]).hard_delete("/deleted".parse().unwrap()),
    );
    let options = SchemaOptions::postgres().write(merge);
    let sink = PostgresSink::connect_typed::<Doc>(&url(), &t, options)
        .await
        .unwrap();
    let versions = [
        json!({"id": 1, "updated_at": "2026-11-01T00:00:00Z"}),
        json!({"id": 2, "updated_at": "2026-11-02T00:00:00Z"}),
    ];
    assert_eq!(sink.load(&docs(&versions)).await.unwrap(), 2);
    let gone = [json!({"id": 2, "deleted": true, "updated_at": "2026-11-05T00:00:00Z"})];
    assert_eq!(sink.load(&docs(&gone)).await.unwrap(), 0);
    assert_eq!(
        count(&admin, &format!("SELECT count(*) FROM \"{t}\"")).await,
        1
    );
    assert_eq!(
        sink.newest_last_updated().await.unwrap().as_deref(),
        Some("2026-11-05T00:00:00Z")
    );
    drop_family(&admin, &t).await;
}

/// A merge page whose key another writer inserts while the page is being
/// written (after it weighed the key, before it commits) waits for that
/// writer, then fails as a transient serialization failure, changing
/// nothing; merged again, it weighs its version against the winner's row.
#[tokio::test]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn a_merge_overtaken_by_another_writers_insert_of_its_key_is_retried_on_its_row() {
    use etl_core::content::write::{MergeKeys, Write};
    let (admin, t) = fresh("mergeovertaken").await;
    let merge = Write::Merge(MergeKeys::new(["/id".parse().unwrap()]));
    let options = SchemaOptions::postgres().write(merge);
    let sink = PostgresSink::connect_typed::<Doc>(&url(), &t, options)
        .await
        .unwrap();
    let first = [json!({"id": 1, "updated_at": "2026-11-01T00:00:00Z"})];
    assert_eq!(sink.load(&docs(&first)).await.unwrap(), 1);

    // The other writer's row of key 2, in a transaction left open.
    let (other, connection) = tokio_postgres::connect(&url(), NoTls).await.unwrap();
    tokio::spawn(connection);
    other
        .batch_execute(&format!(
            "BEGIN; INSERT INTO \"{t}\" (_etl_key, _etl_id, _etl_loaded_at, _etl_row) \
             VALUES ('theirs', '2', now(), '{{\"id\": 2}}')"
        ))
        .await
        .unwrap();
    let ours = docs(&[json!({"id": 2, "updated_at": "2026-11-02T00:00:00Z"})]);
    let load = tokio::spawn({
        let (sink, ours) = (Arc::new(sink), ours.clone());
        async move { (sink.load(&ours).await, sink) }
    });
    // The load waits on the other writer's insert of the key.
    let waiting = format!(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO \"{t}\"%'"
    );
    for _ in 0..500 {
        if count(&admin, &waiting).await > 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(
        count(&admin, &waiting).await,
        1,
        "the load waits on the key"
    );
    other.batch_execute("COMMIT").await.unwrap();
    let (overtaken, sink) = load.await.unwrap();
    let err = overtaken.unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert!(err.to_string().contains("another writer merged"), "{err}");
    // The server's words, naming the index the insert met.
    assert!(err.to_string().contains("_etl_id"), "{err}");
    assert_eq!(
        count(&admin, &format!("SELECT count(*) FROM \"{t}\"")).await,
        2,
        "nothing of the page went in"
    );

    // Merged again: its version is newer than the other writer's row.
    assert_eq!(sink.load(&ours).await.unwrap(), 1);
    let held = count(
        &admin,
        &format!("SELECT count(*) FROM \"{t}\" WHERE _etl_id = '2' AND _etl_key <> 'theirs'"),
    )
    .await;
    assert_eq!(held, 1);
    assert_eq!(
        count(&admin, &format!("SELECT count(*) FROM \"{t}\"")).await,
        2
    );
    drop_family(&admin, &t).await;
}
