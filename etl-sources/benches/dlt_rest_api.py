"""dlt's rest_api source over the same local endpoint as `etl run`, into a
JSONL file (the filesystem destination): the peer that rest_throughput.rs
measures `etl run` against.

    python dlt_rest_api.py URL WORKDIR

URL is the first page (`{"results": [...], "next": URL | null}`); dlt follows
`next` (its json_link paginator) and writes the records as JSONL under
WORKDIR. Prints the number of records loaded.
"""

import os
import sys

import dlt
from dlt.sources.rest_api import rest_api_source


def main() -> None:
    url, workdir = sys.argv[1], sys.argv[2]
    base, _, path = url.rpartition("/")
    source = rest_api_source(
        {
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
    )
    pipeline = dlt.pipeline(
        pipeline_name="rest_throughput",
        pipelines_dir=os.path.join(workdir, "pipelines"),
        destination=dlt.destinations.filesystem(bucket_url=os.path.join(workdir, "out")),
        dataset_name="bench",
    )
    info = pipeline.run(source, loader_file_format="jsonl")
    info.raise_on_failed_jobs()
    rows = pipeline.last_trace.last_normalize_info.row_counts.get("items", 0)
    print(rows)


if __name__ == "__main__":
    main()
