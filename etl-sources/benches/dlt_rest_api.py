"""dlt's rest_api source over the same local endpoint as `etl run`, into a
JSONL file (the filesystem destination): the peer that rest_throughput.rs
measures `etl run` against.

    python dlt_rest_api.py URL WORKDIR [list | family | family-parallel] [DESTINATION] [merge]

URL is the first page (`{"results": [...], "next": URL | null}`); dlt follows
`next` (its json_link paginator) and writes the records as JSONL under
WORKDIR. Prints the number of records loaded.

DESTINATION (typed_scale.rs's `run_*` sections): `delta` writes a Delta
table under WORKDIR (the filesystem destination, `table_format="delta"`);
`postgres` loads into the database dlt's environment names
(DESTINATION__POSTGRES__CREDENTIALS, so that no password is on the command
line), schema `etl_bench_dlt`, which the caller drops between runs. Either
way dlt's normaliser makes columns and child tables, as a typed `etl run`
does.

With `merge` (typed_scale.rs's `dispositions_*`), the resource is loaded
with `write_disposition="merge"` and `primary_key="id"`: dlt's default
merge strategy (delete-insert) into PostgreSQL; into Delta, the one dlt
offers there (upsert).

With `family`, URL is the server's root: `parents` is one page of
`{"id": n, "page": n}` records (not loaded), and `items` is read once for
each, `items?page={resources.parents.page}`, a single page each: dlt's
parent and child. `family-parallel` marks the child `parallelized=True`
(its requests run in dlt's extract workers: EXTRACT__WORKERS).
"""

import os
import sys

import dlt
from dlt.sources.rest_api import rest_api_source


def family(url: str, parallel: bool) -> dict:
    return {
        "client": {"base_url": url, "paginator": "single_page"},
        "resources": [
            {
                "name": "parents",
                "selected": False,
                "endpoint": {"path": "parents", "data_selector": "results"},
            },
            {
                "name": "items",
                "parallelized": parallel,
                "endpoint": {
                    "path": "items",
                    "params": {"page": "{resources.parents.page}"},
                    "data_selector": "results",
                },
            },
        ],
    }


def main() -> None:
    url, workdir = sys.argv[1], sys.argv[2]
    mode = sys.argv[3] if len(sys.argv) > 3 else "list"
    dest = sys.argv[4] if len(sys.argv) > 4 else "jsonl"
    if mode in ("family", "family-parallel"):
        config = family(url, mode == "family-parallel")
    else:
        base, _, path = url.rpartition("/")
        config = {
            "client": {
                "base_url": base + "/",
                "paginator": {"type": "json_link", "next_url_path": "next"},
            },
            "resources": [
                {
                    "name": "items",
                    "endpoint": {"path": path, "data_selector": "results"},
                }
            ],
        }
    if dest == "delta":
        for resource in config["resources"]:
            resource["table_format"] = "delta"
    if len(sys.argv) > 5 and sys.argv[5] == "merge":
        for resource in config["resources"]:
            # Delta takes only the upsert strategy in dlt; elsewhere its
            # default (delete-insert).
            resource["write_disposition"] = (
                {"disposition": "merge", "strategy": "upsert"} if dest == "delta" else "merge"
            )
            resource["primary_key"] = "id"
    source = rest_api_source(config)
    if dest == "postgres":
        destination = dlt.destinations.postgres()
        # The caller drops this schema before each run, as each run of
        # ours loads a table family of its own.
        dataset = "etl_bench_dlt"
        file_format = None
    else:
        destination = dlt.destinations.filesystem(bucket_url=os.path.join(workdir, "out"))
        dataset = "bench"
        file_format = None if dest == "delta" else "jsonl"
    pipeline = dlt.pipeline(
        pipeline_name="rest_throughput",
        pipelines_dir=os.path.join(workdir, "pipelines"),
        destination=destination,
        dataset_name=dataset,
    )
    info = pipeline.run(source, loader_file_format=file_format)
    info.raise_on_failed_jobs()
    rows = pipeline.last_trace.last_normalize_info.row_counts.get("items", 0)
    print(rows)


if __name__ == "__main__":
    main()
