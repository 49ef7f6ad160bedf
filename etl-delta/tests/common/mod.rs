//! What the Delta tests share: rows, and the keys a table holds as its
//! data files say.
#![allow(dead_code)] // each test file uses some

use deltalake::arrow::array::{Array, AsArray};
use deltalake::logstore::parquet_reader::ParquetObjectReader;
use deltalake::parquet::arrow::async_reader::ParquetRecordBatchStreamBuilder;
use etl_core::{Launch, Row};
use futures_util::StreamExt;
use std::collections::HashMap;

pub fn launch(i: usize, updated: &str) -> Row {
    Row::Launches(Launch {
        id: format!("launch-{i}"),
        name: format!("Electron {i}"),
        last_updated: Some(updated.into()),
        ..Default::default()
    })
}

pub fn launches(range: std::ops::Range<usize>) -> Vec<Row> {
    range.map(|i| launch(i, "2026-11-01T08:00:00Z")).collect()
}

/// Every `content_key` the table's live files hold, with how often.
pub async fn stored_keys(url: &url::Url) -> HashMap<String, usize> {
    stored_values(url, "content_key").await
}

/// How many times each value of the text column `column` is in the live
/// files of the table at `url`, read from the data files themselves.
pub async fn stored_values(url: &url::Url, column: &str) -> HashMap<String, usize> {
    let table = deltalake::open_table(url.clone()).await.unwrap();
    let store = table.object_store();
    let mut counts = HashMap::new();
    for file in table.snapshot().unwrap().log_data().iter() {
        let reader = ParquetObjectReader::new(store.clone(), file.object_store_path())
            .with_file_size(file.size() as u64);
        let mut stream = ParquetRecordBatchStreamBuilder::new(reader)
            .await
            .unwrap()
            .build()
            .unwrap();
        while let Some(batch) = stream.next().await {
            let batch = batch.unwrap();
            let keys = batch.column_by_name(column).unwrap().as_string::<i32>();
            for i in 0..keys.len() {
                *counts.entry(keys.value(i).to_string()).or_insert(0) += 1;
            }
        }
    }
    counts
}
