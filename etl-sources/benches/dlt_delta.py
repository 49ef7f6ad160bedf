"""dlt's filesystem destination writing a Delta table: the peer that
delta.rs (section `dlt`) measures DeltaSink against.

    python dlt_delta.py RECORDS.json WORKDIR [PAGE [TABLE]]

RECORDS.json is a list of objects (launches, issues); dlt loads them, in
pages of PAGE (default 500) as a source would yield them, into a Delta
table TABLE (default launches) under WORKDIR: nested objects flattened
into columns, lists into child tables, by its normaliser. Prints the
seconds `pipeline.run` took (the load itself, without Python's start-up and
imports), last.
"""

import json
import sys
import time

import dlt


def main() -> None:
    path, workdir = sys.argv[1], sys.argv[2]
    page = int(sys.argv[3]) if len(sys.argv) > 3 else 500
    table = sys.argv[4] if len(sys.argv) > 4 else "launches"
    with open(path) as f:
        records = json.load(f)

    @dlt.resource(name=table, table_format="delta", write_disposition="append")
    def pages():
        for i in range(0, len(records), page):
            yield records[i : i + page]

    pipeline = dlt.pipeline(
        pipeline_name="bench_delta",
        pipelines_dir=workdir + "/.dlt",
        destination=dlt.destinations.filesystem(bucket_url=workdir + "/lake"),
        dataset_name="bench",
    )
    start = time.perf_counter()
    info = pipeline.run(pages())
    elapsed = time.perf_counter() - start
    assert not info.has_failed_jobs, info
    print(elapsed)


if __name__ == "__main__":
    main()
