//! What the tests against a PostgreSQL server (`ETL_PG_URL`) share: a
//! clean table, and `etl run` into it as a process.

use std::path::Path;
use std::process::Stdio;
use tokio::process::Command;

/// The server's URL and a connection to it, `table`'s family dropped.
pub async fn postgres(table: &str) -> (String, tokio_postgres::Client) {
    let pg = std::env::var("ETL_PG_URL").expect("ETL_PG_URL is not set");
    let (client, connection) = tokio_postgres::connect(&pg, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    drop_typed(&client, table).await;
    (pg, client)
}

/// `etl run DIR/items.toml --out PG --pg-table TABLE ARGS`, `file` written
/// there first.
pub fn etl_into_postgres(
    dir: &Path,
    file: &str,
    (pg, table): (&str, &str),
    args: &[&str],
) -> Command {
    std::fs::write(dir.join("items.toml"), file).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_etl"));
    command
        .arg("run")
        .arg(dir.join("items.toml"))
        .args(["--out", pg, "--pg-table", table])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

/// Drops a typed table family `table` (its child tables, its rejects and
/// its schema row too), left by an earlier run of a test.
pub async fn drop_typed(client: &tokio_postgres::Client, table: &str) {
    client
        .batch_execute(&format!(
            "DO $$ DECLARE t text; BEGIN \
               FOR t IN SELECT tablename FROM pg_tables WHERE tablename = '{table}' \
                 OR tablename LIKE '{table}\\_\\_%' OR tablename = '{table}_rejects' LOOP \
                 EXECUTE format('DROP TABLE IF EXISTS %I CASCADE', t); END LOOP; \
               IF to_regclass('_etl_schema') IS NOT NULL THEN \
                 DELETE FROM _etl_schema WHERE table_name = '{table}'; END IF; END $$"
        ))
        .await
        .unwrap();
}
